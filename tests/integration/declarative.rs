//! The Runtime resource on the real API server: its definition installs, `kubectl get runtimes` shows its
//! columns, and the API server itself refuses a malformed spec and an edit of what is fixed at creation.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use provisioner::declarative::crd::runtime_crd;
use provisioner::declarative::resource::RuntimeResource;
use provisioner::domain::{ProvisionRequest, Topology};
use serde_json::{Value, json};

/// Installs the chart's definition (server-side apply: every test may) and waits until it is served.
async fn install_definition(client: kube::Client) {
    let definitions: Api<CustomResourceDefinition> = Api::all(client);
    let definition = runtime_crd();
    let name = definition.metadata.name.clone().unwrap();
    let apply = PatchParams::apply("provisioner-tests").force();
    definitions.patch(&name, &apply, &Patch::Apply(&definition)).await.expect("the definition installs");
    let established = await_condition(definitions, &name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(30), established).await.expect("established in time").unwrap();
}

/// A Runtime of the REST example's configuration.
fn runtime(name: &str, topology: Topology) -> Value {
    let request = serde_json::to_value(ProvisionRequest::example_named(topology, name)).unwrap();
    let mut spec = request["clusterConfig"].clone();
    spec["description"] = request["runtimeInput"]["description"].clone();
    json!({
        "apiVersion": "provisioner.kubeopera.io/v1alpha1",
        "kind": "Runtime",
        "metadata": { "name": name },
        "spec": spec,
    })
}

fn api_error(error: kube::Error) -> (u16, String) {
    match error {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("not an API error: {other}"),
    }
}

/// The definition is served with kubectl's columns; a Runtime is created in a namespace; an edit of the version
/// is taken, one of the topology, the region or the GCP project is refused by the API server with the field and
/// the reason; a topology the provisioner does not build is refused at creation.
#[tokio::test]
async fn the_runtime_definition_is_served_and_the_api_server_refuses_what_may_not_change() {
    let control_plane = test_control_plane::shared().await;
    let admin = control_plane.admin_client().unwrap();
    install_definition(admin.clone()).await;
    let namespace = control_plane.new_namespace("declarative").await.unwrap();
    let runtimes: Api<RuntimeResource> = Api::namespaced(admin.clone(), &namespace);
    let create = |object: Value| {
        let runtimes = runtimes.clone();
        async move {
            let object: RuntimeResource = serde_json::from_value(object).expect("a Runtime");
            runtimes.create(&PostParams::default(), &object).await
        }
    };
    create(runtime("blue", Topology::Eks)).await.expect("created");
    create(runtime("green", Topology::Gke)).await.expect("created");

    let merge = |name: &'static str, spec: Value| {
        let runtimes = runtimes.clone();
        async move { runtimes.patch(name, &PatchParams::default(), &Patch::Merge(json!({ "spec": spec }))).await }
    };
    let changed = merge("blue", json!({ "kubernetesVersion": "1.35" })).await.expect("the version may change");
    assert_eq!(changed.spec.cluster.kubernetes_version, "1.35");
    for (name, spec, field, reason) in [
        ("blue", json!({ "topology": "vanilla_kubeadm" }), "spec.topology", "topology cannot change"),
        ("blue", json!({ "region": "us-east-1" }), "spec.region", "region cannot change"),
        ("green", json!({ "gcp": { "projectId": "another-project" } }), "spec.gcp.projectId", "gcp.projectId cannot"),
    ] {
        let (code, message) = api_error(merge(name, spec).await.expect_err("refused by the API server"));
        assert_eq!(code, 422, "{message}");
        assert!(message.contains(field) && message.contains(reason), "{message}");
    }

    let mut unknown = runtime("red", Topology::Eks);
    unknown["spec"]["topology"] = json!("openstack");
    let object: Value = unknown;
    let request =
        kube::core::Request::new(format!("/apis/provisioner.kubeopera.io/v1alpha1/namespaces/{namespace}/runtimes"));
    let post = request.create(&PostParams::default(), serde_json::to_vec(&object).unwrap()).unwrap();
    let error = admin.request::<Value>(post).await.expect_err("an unknown topology is refused");
    let (code, message) = api_error(error);
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("spec.topology") && message.contains("vanilla_kubeadm"), "{message}");

    // What `kubectl get runtimes` prints: the server's table of the definition's columns.
    let table =
        axum::http::Request::get(format!("/apis/provisioner.kubeopera.io/v1alpha1/namespaces/{namespace}/runtimes"))
            .header(axum::http::header::ACCEPT, "application/json;as=Table;v=v1;g=meta.k8s.io")
            .body(Vec::new())
            .unwrap();
    let table: Value = admin.request(table).await.expect("a table");
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|column| column["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "State", "Topology", "Version", "Region", "Age"]);
    let rows: Vec<Value> = table["rows"].as_array().unwrap().iter().map(|row| row["cells"].clone()).collect();
    assert_eq!(rows[0][0], "blue");
    assert_eq!((&rows[0][2], &rows[0][3]), (&json!("eks"), &json!("1.35")));
    assert_eq!(rows[1][2], "gke");
}
