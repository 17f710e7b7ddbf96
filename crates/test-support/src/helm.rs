//! The real helm (`TEST_HELM_BIN`, built by `make helm`), run against a test control plane.

use std::path::Path;
use std::process::Command;

/// The chart users install.
pub const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/cluster-provisioner");

/// Runs `helm <arguments>` with the kubeconfig `kubeconfig` and its own caches and configuration beside it (never
/// the user's); panics with its output when it fails, returns its stdout.
pub fn helm(kubeconfig: &Path, arguments: &[&str]) -> String {
    let helm = std::env::var("TEST_HELM_BIN").expect("TEST_HELM_BIN is set by `make test` (tools/build-helm.sh)");
    let folder = kubeconfig.parent().unwrap();
    let output = Command::new(helm)
        .args(arguments)
        .env("KUBECONFIG", kubeconfig)
        .env("HELM_CACHE_HOME", folder.join("cache"))
        .env("HELM_CONFIG_HOME", folder.join("config"))
        .env("HELM_DATA_HOME", folder.join("data"))
        .output()
        .expect("run helm");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "helm {arguments:?}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}
