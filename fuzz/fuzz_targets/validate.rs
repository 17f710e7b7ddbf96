//! Arbitrary bytes → JSON → `ProvisionRequest` → `ValidationPolicy::validate`: whatever parses must validate
//! (accept or reject) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use provisioner::domain::ProvisionRequest;
use provisioner::service::{KubernetesVersion, ValidationPolicy};

fuzz_target!(|data: &[u8]| {
    let Ok(request) = serde_json::from_slice::<ProvisionRequest>(data) else {
        return;
    };
    let policy = ValidationPolicy {
        min_kubernetes_version: KubernetesVersion { major: 1, minor: 32 },
        max_kubernetes_version: KubernetesVersion { major: 1, minor: 37 },
    };
    let _ = policy.validate(&request);
});
