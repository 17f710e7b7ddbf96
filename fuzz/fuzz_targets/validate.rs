//! Arbitrary bytes → JSON → `ProvisionRequest` → `ValidationPolicy::validate`: whatever parses must validate
//! (accept or reject) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use provisioner::domain::ProvisionRequest;
use provisioner::service::ValidationPolicy;

fuzz_target!(|data: &[u8]| {
    let Ok(request) = serde_json::from_slice::<ProvisionRequest>(data) else {
        return;
    };
    let policy = ValidationPolicy::DEFAULT;
    let _ = policy.validate(&request);
});
