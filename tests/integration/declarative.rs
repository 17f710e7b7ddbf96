//! The Runtime resource on the real API server: its definition installs, `kubectl get runtimes` shows its
//! columns, and the API server itself refuses a malformed spec and an edit of what is fixed at creation.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use provisioner::declarative::convert::provision_request;
use provisioner::declarative::resource::RuntimeResource;
use provisioner::domain::{ProvisionRequest, Topology};
use provisioner::service::ValidationPolicy;
use serde_json::{Value, json};
use test_support::Backend;
use test_support::auth_service::aws_credential;
use test_support::engine::{Engine, KUBECONFIG_OUTPUT, RUNNER_PLAN_SUMMARY};
use test_support::kubectl::Kubectl;
use test_support::runtimes::{
    WAIT, condition, is_ready, reconciling_engine, recorded_runtime, run_succeeds, runtime, state_is, tenant_namespace,
    wait_for,
};

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
    let (_, admin, namespace) = tenant_namespace("declarative").await;
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

/// A Runtime's life through the reconciler, on the real control plane with the production RBAC: applied, it is
/// provisioned (one provisioning, whatever the reconciler's restarts) and Ready with its kubeconfig in a Secret
/// of its namespace; a new version upgrades it and `observedGeneration` follows; `hibernated` hibernates and wakes
/// it; a protected one keeps its finalizer and says why; deleted, it is deprovisioned and goes with its Secret.
#[tokio::test]
async fn a_runtime_resource_lives_its_life_through_the_same_operations() {
    let (_, admin, tenant) = tenant_namespace("tenant").await;
    let (mut engine, process) = reconciling_engine(Backend::Postgres, &tenant).await;
    let runtimes: Api<RuntimeResource> = Api::namespaced(admin.clone(), &tenant);
    let mut object = runtime("blue", Topology::VanillaKubeadm);
    object["spec"]["deletionProtection"] = json!(false);
    let object: RuntimeResource = serde_json::from_value(object).unwrap();
    runtimes.create(&PostParams::default(), &object).await.expect("created");

    let runtime_id = recorded_runtime(&runtimes, "blue").await;
    assert_eq!(runtimes.get("blue").await.unwrap().finalizers(), ["provisioner.kubeopera.io/deprovision"]);
    // A restart of the reconciler while the provisioning runs queues nothing more.
    process.stop().await;
    let process = engine.start_process(&[]).await;
    let succeeds = |kind: &'static str| run_succeeds(&engine, kind, runtime_id);
    succeeds("provision").await;
    // Ready, but no kubeconfig Secret until the namespace's admin grants the service its Secrets here.
    let ungranted = wait_for(&runtimes, "blue", "a refused kubeconfig", |object| {
        object.and_then(|object| condition(object, "Reconciled")).is_some_and(|c| c.reason == "KubeconfigForbidden")
    })
    .await
    .unwrap();
    assert!(is_ready(Some(&ungranted)) && ungranted.status.as_ref().unwrap().kubeconfig_secret_ref.is_none());
    engine.grant_runtime_kubeconfigs(&tenant).await;
    let ready = wait_for(&runtimes, "blue", "Ready with its kubeconfig", |object| {
        is_ready(object) && object.and_then(|object| object.status.as_ref()?.kubeconfig_secret_ref.clone()).is_some()
    })
    .await
    .unwrap();
    let status = ready.status.clone().unwrap();
    assert_eq!((status.state.as_deref(), status.observed_generation), (Some("Ready"), ready.metadata.generation));
    let secret_name = status.kubeconfig_secret_ref.expect("the kubeconfig's Secret").name;
    assert_eq!(secret_name, "blue-kubeconfig");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &tenant);
    let secret = secrets.get(&secret_name).await.expect("the kubeconfig Secret");
    assert_eq!(secret.data.unwrap()["kubeconfig"].0, KUBECONFIG_OUTPUT.as_bytes());
    assert_eq!(secret.metadata.owner_references.unwrap()[0].uid, ready.metadata.uid.clone().unwrap());
    // The namespace is the runtime's tenant.
    let path = format!("/api/v1/runtimes/{runtime_id}");
    let own = engine.app.request("GET", &path, None, &[("Tenant", tenant.as_str())]).await;
    assert_eq!(own.json()["name"], "blue");
    let other = engine.app.request("GET", &path, None, &[("Tenant", "another-tenant")]).await;
    assert_eq!(other.status, axum::http::StatusCode::NOT_FOUND);
    let operations = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/operations")).await.json();
    assert_eq!(operations["operations"].as_array().map(Vec::len), Some(1), "one provisioning: {operations}");

    // The resource is the runtime's only writer: a change through REST is refused, naming it.
    let refused = engine.app.patch(&path, &json!({ "workerPool": { "maxSize": 9 } })).await;
    assert_eq!(refused.status, axum::http::StatusCode::CONFLICT, "{}", refused.text);
    assert!(refused.text.contains("managed_by_resource") && refused.text.contains(&format!("{tenant}/blue")));
    assert_eq!(engine.app.get(&path).await.json()["managedBy"], json!(format!("{tenant}/blue")));

    // A new version: an upgrade, and observedGeneration follows.
    let patch = |spec: Value| {
        let runtimes = runtimes.clone();
        async move { runtimes.patch("blue", &PatchParams::default(), &Patch::Merge(json!({ "spec": spec }))).await }
    };
    let upgraded = patch(json!({ "kubernetesVersion": "1.35" })).await.unwrap();
    wait_for(&runtimes, "blue", "Updating", state_is("Updating")).await;
    succeeds("upgrade").await;
    let ready = wait_for(&runtimes, "blue", "Ready again", |object| {
        is_ready(object) && object.unwrap().status.as_ref().unwrap().observed_generation == upgraded.metadata.generation
    })
    .await
    .unwrap();
    let shown = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(shown["clusterConfig"]["kubernetesVersion"], "1.35", "{shown}");
    assert!(ready.status.unwrap().last_operation.unwrap().operation_type == "Upgrade");

    // Hibernated, then awake.
    patch(json!({ "hibernated": true })).await.unwrap();
    wait_for(&runtimes, "blue", "Hibernating", state_is("Hibernating")).await;
    succeeds("hibernate").await;
    wait_for(&runtimes, "blue", "Hibernated", state_is("Hibernated")).await;
    patch(json!({ "hibernated": false })).await.unwrap();
    wait_for(&runtimes, "blue", "Updating", state_is("Updating")).await;
    succeeds("wake-up").await;
    wait_for(&runtimes, "blue", "Ready after the wake-up", is_ready).await;

    // Protected, its deletion waits and says why; unprotected in the spec, it is deprovisioned and goes.
    patch(json!({ "deletionProtection": true })).await.unwrap();
    let protected = async {
        while engine.app.get(&path).await.json()["deletionProtection"] != json!(true) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(WAIT, protected).await.expect("the spec's protection reaches the runtime");
    runtimes.delete("blue", &Default::default()).await.expect("deletion requested");
    let held = wait_for(&runtimes, "blue", "a refused deprovisioning", |object| {
        object.and_then(|object| condition(object, "Reconciled")).is_some_and(|reconciled| reconciled.status == "False")
    })
    .await
    .unwrap();
    let reconciled = condition(&held, "Reconciled").unwrap();
    assert!(reconciled.message.contains("protect"), "{reconciled:?}");
    patch(json!({ "deletionProtection": false })).await.unwrap();
    wait_for(&runtimes, "blue", "Deprovisioning", state_is("Deprovisioning")).await;
    engine.runner_succeeds(&format!("deprovision-{runtime_id}"), None).await;
    wait_for(&runtimes, "blue", "gone", |object| object.is_none()).await;
    let deleted = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(deleted["state"], "Deleted", "{deleted}");
    let gone = async {
        while secrets.get_opt(&secret_name).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(WAIT, gone).await.expect("the kubeconfig Secret goes with its Runtime");

    // Its life is told in events on the object, each refusal once.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), &tenant);
    let told: Vec<(String, String)> = (events.list(&Default::default()).await.unwrap().items.into_iter())
        .filter(|event| event.regarding.as_ref().and_then(|regarding| regarding.name.as_deref()) == Some("blue"))
        .map(|event| (event.type_.unwrap_or_default(), event.reason.unwrap_or_default()))
        .collect();
    for (kind, reason) in [
        ("Normal", "ProvisionQueued"),
        ("Warning", "KubeconfigForbidden"),
        ("Normal", "UpgradeQueued"),
        ("Normal", "HibernateQueued"),
        ("Normal", "WakeUpQueued"),
        ("Warning", "DeletionProtected"),
        ("Normal", "DeprovisionQueued"),
        ("Normal", "Deprovisioned"),
    ] {
        let count = told.iter().filter(|(told_kind, told_reason)| told_kind == kind && told_reason == reason).count();
        assert_eq!(count, 1, "{kind} {reason} once: {told:?}");
    }
    process.stop().await;
}

/// Writes a GitOps folder: a kustomization of `names` (EKS Runtimes of the REST example) in `namespace`, each
/// labelled as this folder's.
fn write_folder(folder: &std::path::Path, namespace: &str, names: &[&str]) {
    for name in names {
        let object = runtime(name, Topology::Eks);
        std::fs::write(folder.join(format!("{name}.yaml")), object.to_string()).unwrap();
    }
    let resources: Vec<String> = names.iter().map(|name| format!("  - {name}.yaml\n")).collect();
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {namespace}\n\
         labels:\n  - pairs:\n      kubeopera.io/gitops: test\nresources:\n{}",
        resources.concat()
    );
    std::fs::write(folder.join("kustomization.yaml"), kustomization).unwrap();
}

/// GitOps: a folder of three Runtimes applied with `kubectl apply -k --prune` is provisioned and `kubectl wait
/// --for=condition=Ready` returns; `kubectl get runtimes` shows the definition's columns; one Runtime removed from
/// the folder and the folder applied again is deprovisioned and goes, and the other two are left as they were.
#[tokio::test]
async fn a_runtime_removed_from_a_gitops_folder_is_deprovisioned_and_the_others_stay() {
    let (control_plane, admin, tenant) = tenant_namespace("gitops").await;
    let (engine, process) = reconciling_engine(Backend::Sqlite, &tenant).await;
    engine.grant_runtime_kubeconfigs(&tenant).await;
    let kubectl = Kubectl::admin(control_plane);
    let folder = kubectl.folder().join("runtimes");
    std::fs::create_dir(&folder).unwrap();
    let folder_path = folder.to_str().unwrap();
    let apply = ["apply", "-k", folder_path, "--prune", "-l", "kubeopera.io/gitops=test"];
    let apply = [&apply[..], &["--prune-allowlist=provisioner.kubeopera.io/v1alpha1/Runtime"]].concat();

    write_folder(&folder, &tenant, &["alpha", "beta", "gamma"]);
    kubectl.run(&apply);
    let runtimes: Api<RuntimeResource> = Api::namespaced(admin.clone(), &tenant);
    let mut ids = std::collections::BTreeMap::new();
    for name in ["alpha", "beta", "gamma"] {
        let runtime_id = recorded_runtime(&runtimes, name).await;
        run_succeeds(&engine, "provision", runtime_id).await;
        ids.insert(name, runtime_id);
    }
    for name in ["alpha", "beta", "gamma"] {
        wait_for(&runtimes, name, "Ready", is_ready).await;
    }
    let names = ["runtime/alpha", "runtime/beta", "runtime/gamma"];
    kubectl.run(&[&["wait", "--for=condition=Ready", "-n", &tenant, "--timeout=60s"], &names[..]].concat());
    let table = kubectl.run(&["get", "runtimes", "-A"]);
    println!("$ kubectl get runtimes -A\n{table}");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "STATE", "TOPOLOGY", "VERSION", "REGION", "AGE"]);
    let row = table.lines().find(|line| line.starts_with(&tenant) && line.contains("alpha")).unwrap();
    assert_eq!(row.split_whitespace().collect::<Vec<_>>()[2..6], ["Ready", "eks", "1.34", "eu-central-1"]);

    write_folder(&folder, &tenant, &["alpha", "beta"]);
    let pruned = kubectl.run(&apply);
    assert!(pruned.contains("runtime.provisioner.kubeopera.io/gamma pruned"), "{pruned}");
    wait_for(&runtimes, "gamma", "Deprovisioning", state_is("Deprovisioning")).await;
    engine.runner_succeeds(&format!("deprovision-{}", ids["gamma"]), None).await;
    wait_for(&runtimes, "gamma", "gone", |object| object.is_none()).await;
    for name in ["alpha", "beta"] {
        let operations = engine.app.get(&format!("/api/v1/provisions/{}/operations", ids[name])).await.json();
        assert_eq!(operations["operations"].as_array().map(Vec::len), Some(1), "{name} untouched: {operations}");
        assert!(is_ready(runtimes.get_opt(name).await.unwrap().as_ref()), "{name} stays Ready");
    }
    process.stop().await;
}

/// The GitOps example folder holds Runtimes the API server accepts as they are.
#[tokio::test]
async fn the_gitops_examples_are_runtimes_the_api_server_accepts() {
    let (control_plane, _, namespace) = tenant_namespace("examples").await;
    let kubectl = Kubectl::admin(control_plane);
    let rendered = kubectl.run(&["kustomize", "examples/gitops"]);
    assert!(rendered.matches("kind: Runtime").count() >= 2, "{rendered}");
    for file in ["examples/gitops/blue.yaml", "examples/gitops/green.yaml"] {
        let created = kubectl.run(&["create", "--dry-run=server", "-n", &namespace, "-f", file, "-o", "json"]);
        let object: RuntimeResource = serde_json::from_str(&created).expect("a Runtime");
        assert!(object.spec.cluster.api_allowed_cidrs.is_some(), "{file} names the ranges its API is open to");
        // And the provisioner takes it as it is: the request it stands for passes the service's checks.
        let request = provision_request(&object.name_any(), &object.spec);
        ValidationPolicy::DEFAULT.validate(&request).unwrap_or_else(|refused| panic!("{file}: {refused:?}"));
    }
}

/// A runtime created through REST is adopted by a Runtime of its name and tenant that names it in `spec.adopt`:
/// the object records it without provisioning anything, REST changes are refused from then on, and a change of the
/// object upgrades it. Another tenant's Runtime cannot adopt it (not found, as for REST).
#[tokio::test]
async fn a_runtime_created_through_rest_is_adopted_by_a_runtime_resource() {
    let (control_plane, admin, tenant) = tenant_namespace("adopt").await;
    let stranger = control_plane.new_namespace("stranger").await.unwrap();
    let scope = format!("{tenant},{stranger}");
    let (engine, process) = Engine::start(Backend::Sqlite, &[("APP_RUNTIME_RESOURCES", &scope)]).await;
    engine.app.auth.add_tenant_credential(&tenant, "cred-aws-1", aws_credential());
    let body = serde_json::to_value(ProvisionRequest::example_named(Topology::Eks, "red")).unwrap();
    let answer = engine.app.request("POST", "/api/v1/provisions", Some(&body), &[("Tenant", tenant.as_str())]).await;
    assert_eq!(answer.status, axum::http::StatusCode::ACCEPTED, "{}", answer.text);
    let runtime_id = answer.json()["id"].as_str().unwrap().to_owned();
    run_succeeds(&engine, "provision", runtime_id.parse().unwrap()).await;
    engine.wait_for_status(&runtime_id, &["succeeded"], WAIT).await;

    let adopting = |namespace: &str| {
        let mut object = runtime("red", Topology::Eks);
        object["spec"]["adopt"] = json!(runtime_id);
        object["metadata"]["namespace"] = json!(namespace);
        serde_json::from_value::<RuntimeResource>(object).unwrap()
    };
    let foreign: Api<RuntimeResource> = Api::namespaced(admin.clone(), &stranger);
    foreign.create(&PostParams::default(), &adopting(&stranger)).await.unwrap();
    let refused = wait_for(&foreign, "red", "a refusal", |object| {
        object.and_then(|object| condition(object, "Reconciled")).is_some_and(|reconciled| reconciled.status == "False")
    })
    .await
    .unwrap();
    assert_eq!(condition(&refused, "Reconciled").unwrap().reason, "NotFound");

    let runtimes: Api<RuntimeResource> = Api::namespaced(admin.clone(), &tenant);
    runtimes.create(&PostParams::default(), &adopting(&tenant)).await.unwrap();
    let adopted = wait_for(&runtimes, "red", "Ready", is_ready).await.unwrap();
    assert_eq!(adopted.status.unwrap().runtime_id.map(|id| id.to_string()), Some(runtime_id.clone()));
    let path = format!("/api/v1/runtimes/{runtime_id}");
    let refused = engine.app.patch(&path, &json!({ "workerPool": { "maxSize": 9 } })).await;
    assert_eq!(refused.status, axum::http::StatusCode::CONFLICT, "{}", refused.text);
    let operations = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/operations")).await.json();
    assert_eq!(operations["operations"].as_array().map(Vec::len), Some(1), "adopting queues nothing: {operations}");

    let patch = json!({ "spec": { "workerPool": { "maxSize": 9 } } });
    runtimes.patch("red", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    wait_for(&runtimes, "red", "Updating", state_is("Updating")).await;
    run_succeeds(&engine, "upgrade", runtime_id.parse().unwrap()).await;
    wait_for(&runtimes, "red", "Ready after the upgrade", is_ready).await;
    assert_eq!(engine.app.get(&path).await.json()["clusterConfig"]["workerPool"]["maxSize"], 9);
    process.stop().await;
}

/// A Runtime whose approval policy holds plans back: its upgrade's plan waits, and the status shows the operation
/// and the digest to approve; approved through the API (the object's manager does not stop approvals), it is
/// applied and the Runtime is Ready at its new generation.
#[tokio::test]
async fn a_held_back_plan_of_a_runtime_shows_its_digest_and_is_approved_through_the_api() {
    let (_, admin, tenant) = tenant_namespace("approval").await;
    let (engine, process) = reconciling_engine(Backend::Sqlite, &tenant).await;
    let runtimes: Api<RuntimeResource> = Api::namespaced(admin.clone(), &tenant);
    let mut object = runtime("held", Topology::Eks);
    object["spec"]["approvalPolicy"] = json!("safeOnly");
    runtimes.create(&PostParams::default(), &serde_json::from_value(object).unwrap()).await.unwrap();
    let runtime_id = recorded_runtime(&runtimes, "held").await;
    run_succeeds(&engine, "provision", runtime_id).await;
    wait_for(&runtimes, "held", "Ready", is_ready).await;

    let patch = json!({ "spec": { "workerPool": { "machineType": "m6i.large" } } });
    let edited = runtimes.patch("held", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    wait_for(&runtimes, "held", "Updating", state_is("Updating")).await;
    let digest = "e".repeat(64);
    let mut report: Value = serde_json::from_str(RUNNER_PLAN_SUMMARY).unwrap();
    report["savedPlanSha256"] = json!(digest);
    engine.runner_exits(&format!("upgrade-{runtime_id}"), 0, &report.to_string()).await;
    let waiting = wait_for(&runtimes, "held", "a waiting plan", |object| {
        object.and_then(|object| object.status.as_ref()?.waiting_plan.clone()).is_some()
    })
    .await
    .unwrap();
    let plan = waiting.status.unwrap().waiting_plan.unwrap();
    assert_eq!(plan.sha256, digest);
    assert_eq!(plan.risk, Some(runner_contract::plan::PlanRisk::Risky));

    let approve = json!({ "planSha256": digest });
    let path = format!("/api/v1/operations/{}/approve", plan.operation_id);
    let approved = engine.app.request("POST", &path, Some(&approve), &[]).await;
    assert_eq!(approved.status, axum::http::StatusCode::ACCEPTED, "{}", approved.text);
    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&format!("upgrade-{runtime_id}-approved"), Some((&outputs, KUBECONFIG_OUTPUT))).await;
    wait_for(&runtimes, "held", "Ready at its new generation", |object| {
        is_ready(object) && object.unwrap().status.as_ref().unwrap().observed_generation == edited.metadata.generation
    })
    .await;
    process.stop().await;
}
