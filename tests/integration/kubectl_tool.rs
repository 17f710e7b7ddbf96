//! The real kubectl (`TEST_KUBECTL_BIN`, built by `make kubectl` from tools/kubectl at the control plane's
//! Kubernetes version) works against the shared test control plane with an admin kubeconfig, and its minor is the
//! server's, so tests can drive the cluster the way an operator does.

use std::path::Path;
use std::process::Command;

/// Runs `kubectl --kubeconfig <kubeconfig> <arguments>` with its cache beside the kubeconfig and no user
/// preferences (kuberc); panics with its output when it fails, returns its stdout.
fn kubectl(kubeconfig: &Path, arguments: &[&str]) -> String {
    let kubectl =
        std::env::var("TEST_KUBECTL_BIN").expect("TEST_KUBECTL_BIN is set by `make test` (tools/build-kubectl.sh)");
    let cache = kubeconfig.parent().unwrap().join("cache");
    let output = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(&cache)
        .args(arguments)
        .env("KUBERC", "off")
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "kubectl {arguments:?}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// The minor of a `kubectl version -o json` half (`clientVersion` or `serverVersion`), as a number: a build
/// without the version ldflags has none, which must not pass as equal.
fn minor(version: &serde_json::Value, side: &str) -> u32 {
    let minor = version[side]["minor"].as_str().unwrap_or_default();
    minor.trim_end_matches('+').parse().unwrap_or_else(|_| panic!("{side} has no minor: {version}"))
}

#[tokio::test]
async fn kubectl_lists_the_namespaces_and_its_minor_is_the_servers() {
    let control_plane = test_control_plane::shared().await;
    let namespace = control_plane.new_namespace("kubectl-tool").await.unwrap();
    let folder = tempfile::tempdir().unwrap();
    let kubeconfig = folder.path().join("kubeconfig");
    control_plane.write_kubeconfig(&kubeconfig).unwrap();

    let names = kubectl(&kubeconfig, &["get", "namespaces", "-o", "name"]);
    let names: Vec<&str> = names.lines().collect();
    assert!(names.contains(&"namespace/default"), "{names:?}");
    assert!(names.contains(&format!("namespace/{namespace}").as_str()), "{names:?}");

    let version: serde_json::Value = serde_json::from_str(&kubectl(&kubeconfig, &["version", "-o", "json"])).unwrap();
    assert_eq!(version["clientVersion"]["major"], "1", "{version}");
    assert_eq!(version["serverVersion"]["major"], "1", "{version}");
    assert_eq!(minor(&version, "clientVersion"), minor(&version, "serverVersion"), "{version}");
}
