//! `kubectl delete -k resources/` removes what `kubectl apply -k resources/` installs, so the kustomization holds no
//! Namespace the platform owns: `kubeopera-core`, shared with host-cluster-controller and auth-service, would go
//! with everything in it. (`manifests` applies the same files to a real API server.)

use std::path::Path;

use yaml_rust2::YamlLoader;

/// Namespaces other components live in, which the platform creates and deletes.
const SHARED: &[&str] = &["kubeopera-core"];

#[test]
fn the_kustomization_manages_no_shared_namespace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("resources");
    let kustomization = std::fs::read_to_string(root.join("kustomization.yaml")).unwrap();
    let kustomization = &YamlLoader::load_from_str(&kustomization).unwrap()[0];
    let files = kustomization["resources"].as_vec().expect("kustomization.yaml lists its resources");
    let mut namespaces = Vec::new();
    for file in files {
        let file = file.as_str().unwrap();
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_else(|error| panic!("{file}: {error}"));
        for document in YamlLoader::load_from_str(&text).unwrap() {
            if document["kind"].as_str() == Some("Namespace") {
                let name = document["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                assert!(!SHARED.contains(&name.as_str()), "{file} creates the shared Namespace {name}");
                namespaces.push(name);
            }
        }
    }
    assert_eq!(namespaces, ["kubeopera-provisioning"], "the kustomization owns the Jobs' namespace only");
}
