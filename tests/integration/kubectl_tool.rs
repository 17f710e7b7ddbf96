//! The real kubectl (`TEST_KUBECTL_BIN`, built by `make kubectl` from tools/kubectl at the control plane's
//! Kubernetes version) works against the shared test control plane with an admin kubeconfig, and its minor is the
//! server's, so tests can drive the cluster the way an operator does.

use test_support::kubectl::Kubectl;

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
    let kubectl = Kubectl::admin(control_plane);

    let names = kubectl.run(&["get", "namespaces", "-o", "name"]);
    let names: Vec<&str> = names.lines().collect();
    assert!(names.contains(&"namespace/default"), "{names:?}");
    assert!(names.contains(&format!("namespace/{namespace}").as_str()), "{names:?}");

    let version: serde_json::Value = serde_json::from_str(&kubectl.run(&["version", "-o", "json"])).unwrap();
    assert_eq!(version["clientVersion"]["major"], "1", "{version}");
    assert_eq!(version["serverVersion"]["major"], "1", "{version}");
    assert_eq!(minor(&version, "clientVersion"), minor(&version, "serverVersion"), "{version}");
}
