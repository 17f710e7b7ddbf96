//! Who may reach a cluster's Kubernetes API, through both APIs on SQLite and PostgreSQL: a provisioning names the
//! IPv4 ranges (`clusterConfig.apiAllowedCidrs`) or the operator does (`APP_API_ALLOWED_CIDRS`); with neither it is
//! refused, so no cluster's API is open to every address by default. The runtime records its list, which every
//! later run renders into its topology's module (whatever the operator's list becomes), and an upgrade replaces it.

use axum::http::StatusCode;
use provisioner::domain::{OperationState, Runtime};
use provisioner::render::{RenderedConfig, Renderer, RunAction, RunInputs};
use provisioner::store::Store;
use sea_orm::ConnectionTrait as _;
use serde_json::{Value, json};
use test_support::{
    Backend, TEST_API_ALLOWED_CIDRS, TestApp, documents, eks_body, gke_body, on_both_databases, provision_body,
    provision_input, spawn_app, spawn_app_with,
};

const REQUESTED: [&str; 2] = ["203.0.113.0/24", "198.51.100.7/32"];

const API_ALLOWED_CIDRS: &str = "query($id: String!) {
    runtimeStatus(id: $id) { runtimeConfiguration { clusterConfig { apiAllowedCidrs } } }
}";

/// The module input each topology's ranges go to, as `(module, input)`.
fn module_input(topology: &str) -> (&'static str, &'static str) {
    match topology {
        "vanilla_kubeadm" => ("security", "api_allowed_cidrs"),
        "eks" => ("eks", "endpoint_public_access_cidrs"),
        "gke" => ("gke", "master_authorized_cidrs"),
        other => panic!("unknown topology {other}"),
    }
}

/// The ranges `rendered` passes to its topology's module.
fn rendered_cidrs(rendered: &RenderedConfig, topology: &str) -> Vec<String> {
    let (module, input) = module_input(topology);
    let body: hcl::Body = hcl::parse(&rendered.files["main.tf"]).expect("main.tf parses");
    let module = body
        .blocks()
        .find(|block| block.identifier() == "module" && block.labels()[0].as_str() == module)
        .unwrap_or_else(|| panic!("no module {module}"));
    let attribute = module.body().attributes().find(|attribute| attribute.key() == input);
    match attribute.unwrap_or_else(|| panic!("module {module:?} gets no {input}")).expr() {
        hcl::Expression::Array(items) => items
            .iter()
            .map(|item| match item {
                hcl::Expression::String(cidr) => cidr.clone(),
                other => panic!("{input} holds {other:?}"),
            })
            .collect(),
        other => panic!("{input} is {other:?}"),
    }
}

/// The runtime as the store holds it, which is what the worker renders.
async fn stored_runtime(app: &TestApp, runtime_id: &str) -> Runtime {
    let store = Store::connect(&app.database.url, 2, std::time::Duration::from_secs(5)).await.unwrap();
    store.find_runtime(runtime_id.parse().unwrap()).await.unwrap().expect("the runtime is recorded")
}

/// The ranges both APIs show for the runtime, which must agree.
async fn shown_cidrs(app: &TestApp, runtime_id: &str) -> Value {
    let rest =
        app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json()["clusterConfig"]["apiAllowedCidrs"].clone();
    let response = app.graphql(API_ALLOWED_CIDRS, json!({ "id": runtime_id })).await;
    assert!(response.get("errors").is_none(), "{response}");
    let graphql = &response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"]["apiAllowedCidrs"];
    assert_eq!(&rest, graphql, "REST and GraphQL show the same ranges");
    rest
}

/// Without the operator's list, a provisioning that names no ranges is refused in both APIs with the field and
/// the variable named, and nothing is recorded; one that names them is accepted, and a bad entry is named by its
/// index.
async fn a_provisioning_without_api_ranges_is_refused_when_the_operator_names_none(backend: Backend) {
    // A blank value counts as unset, so this is the service with no APP_API_ALLOWED_CIDRS.
    let app = spawn_app_with(backend, &[("APP_API_ALLOWED_CIDRS", "")], None).await;
    assert_eq!(app.settings.validation.api_allowed_cidrs, None);

    let answer = app.post_provision(&provision_body("no-ranges")).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let problem = answer.json();
    assert_eq!(
        (&problem["code"], &problem["field"]),
        (&json!("invalid_input"), &json!("clusterConfig.apiAllowedCidrs"))
    );
    assert_eq!(problem["errors"].as_array().map(Vec::len), Some(1), "{problem}");
    assert_eq!(problem["errors"][0]["reason"], "required", "{problem}");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("no default is configured (APP_API_ALLOWED_CIDRS)"), "{detail}");

    let response = app.graphql(documents::PROVISION, json!({ "config": provision_input("no-ranges") })).await;
    let extensions = &response["errors"][0]["extensions"];
    assert_eq!((&extensions["code"], &extensions["error_code"]), (&json!("BAD_REQUEST"), &json!(400)), "{response}");
    assert_eq!(extensions["field"], "clusterConfig.apiAllowedCidrs", "{response}");
    assert_eq!(response["errors"][0]["message"], problem["detail"]);

    let list = app.graphql("{ runtimes { edges { cursor } } }", json!({})).await;
    assert_eq!(list["data"]["runtimes"]["edges"], json!([]), "nothing recorded: {list}");

    // A bad entry is named by its index, in both APIs.
    let mut body = gke_body("bad-ranges");
    body["clusterConfig"]["apiAllowedCidrs"] = json!(["203.0.113.0/24", "203.0.113.9/24"]);
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let problem = answer.json();
    assert_eq!(
        (&problem["field"], &problem["errors"][0]["reason"]),
        (&json!("clusterConfig.apiAllowedCidrs[1]"), &json!("format"))
    );
    assert!(problem["detail"].as_str().unwrap().contains("did you mean 203.0.113.0/24?"), "{problem}");
    let mut input = provision_input("bad-ranges");
    input["clusterConfig"]["apiAllowedCidrs"] = json!(["0.0.0.0/0", "fd00::/8"]);
    let response = app.graphql(documents::PROVISION, json!({ "config": input })).await;
    assert_eq!(response["errors"][0]["extensions"]["field"], "clusterConfig.apiAllowedCidrs[1]", "{response}");

    // The request's own ranges need no operator's list.
    let mut body = provision_body("own-ranges");
    body["clusterConfig"]["apiAllowedCidrs"] = json!(REQUESTED);
    let runtime_id = app.provisioned(&body).await;
    assert_eq!(shown_cidrs(&app, &runtime_id).await, json!(REQUESTED));
}

/// The request's ranges are recorded with the runtime (in a column of their own: the configuration's JSON keeps
/// the shape the previous release reads) and rendered into each topology's module, whatever the operator's list.
async fn the_requests_api_ranges_are_recorded_and_rendered_for_every_topology(backend: Backend) {
    let app = spawn_app(backend).await;
    for (mut body, topology) in [
        (provision_body("ranges-vanilla"), "vanilla_kubeadm"),
        (eks_body("ranges-eks"), "eks"),
        (gke_body("ranges-gke"), "gke"),
    ] {
        body["clusterConfig"]["apiAllowedCidrs"] = json!(REQUESTED);
        let runtime_id = app.provisioned(&body).await;
        assert_eq!(shown_cidrs(&app, &runtime_id).await, json!(REQUESTED), "{topology}");

        let runtime = stored_runtime(&app, &runtime_id).await;
        let operator = ["192.0.2.0/24".parse().unwrap()];
        let renderer = Renderer::new().unwrap().with_operator_api_allowed_cidrs(Some(&operator));
        let provider = provisioner::domain::ProviderVersion::pinned(runtime.cluster_config.topology.cloud());
        for (operation_type, action) in [
            (provisioner::domain::OperationType::Provision, RunAction::Apply),
            (provisioner::domain::OperationType::WakeUp, RunAction::Apply),
            (provisioner::domain::OperationType::Deprovision, RunAction::Destroy),
        ] {
            let rendered = renderer.render(&runtime, operation_type, action, &provider, RunInputs::default()).unwrap();
            assert_eq!(rendered_cidrs(&rendered, topology), REQUESTED, "{topology} {operation_type:?}");
        }

        let db = sea_orm::Database::connect(&app.database.url).await.unwrap();
        let name = body["runtimeInput"]["name"].as_str().unwrap();
        let statement = format!("SELECT cluster_config, api_allowed_cidrs FROM runtime WHERE name = '{name}'");
        let row = db.query_one_raw(sea_orm::Statement::from_string(db.get_database_backend(), statement)).await;
        let row = row.unwrap().expect("the runtime's row");
        let config: Value = row.try_get("", "cluster_config").unwrap();
        let cidrs: Value = row.try_get("", "api_allowed_cidrs").unwrap();
        assert!(config.get("apiAllowedCidrs").is_none(), "the previous release reads this JSON: {config}");
        assert_eq!(cidrs, json!(REQUESTED));
    }
}

/// A request that names no ranges gets the operator's, recorded with the runtime: a later change of the operator's
/// list does not change what its runs render.
async fn the_operators_api_ranges_apply_when_the_request_names_none(backend: Backend) {
    let app = spawn_app(backend).await;
    for (body, topology) in [
        (provision_body("operator-vanilla"), "vanilla_kubeadm"),
        (eks_body("operator-eks"), "eks"),
        (gke_body("operator-gke"), "gke"),
    ] {
        assert!(body["clusterConfig"].get("apiAllowedCidrs").is_none(), "as Kyma's clients send it");
        let runtime_id = app.provisioned(&body).await;
        assert_eq!(shown_cidrs(&app, &runtime_id).await, json!([TEST_API_ALLOWED_CIDRS]), "{topology}");

        let runtime = stored_runtime(&app, &runtime_id).await;
        let rendered = test_support::render(&runtime, RunAction::Apply);
        assert_eq!(rendered_cidrs(&rendered, topology), [TEST_API_ALLOWED_CIDRS], "{topology}");
        let changed = ["192.0.2.0/24".parse().unwrap()];
        let renderer = Renderer::new().unwrap().with_operator_api_allowed_cidrs(Some(&changed));
        let provider = provisioner::domain::ProviderVersion::pinned(runtime.cluster_config.topology.cloud());
        let upgrade = provisioner::domain::OperationType::Upgrade;
        let rendered = renderer.render(&runtime, upgrade, RunAction::Apply, &provider, RunInputs::default()).unwrap();
        assert_eq!(rendered_cidrs(&rendered, topology), [TEST_API_ALLOWED_CIDRS], "{topology}: the recorded list");
    }
}

/// An upgrade replaces the ranges: the runtime shows the new ones only once it succeeded, and its runs render them.
async fn an_upgrade_replaces_the_api_ranges_once_it_succeeded(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&eks_body("narrowed")).await;
    let path = format!("/api/v1/provisions/{runtime_id}");

    let refused = app.patch(&path, &json!({ "apiAllowedCidrs": ["203.0.113.0/24", "nope"] })).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.json()["field"], "clusterConfig.apiAllowedCidrs[1]");
    let refused = app.patch(&path, &json!({ "apiAllowedCidrs": [] })).await;
    assert_eq!(refused.json()["field"], "clusterConfig.apiAllowedCidrs", "{}", refused.text);

    let accepted = app.patch(&path, &json!({ "apiAllowedCidrs": REQUESTED })).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let status = app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(status["targetConfig"]["apiAllowedCidrs"], json!(REQUESTED), "{status}");
    assert_eq!(shown_cidrs(&app, &runtime_id).await, json!([TEST_API_ALLOWED_CIDRS]), "queued: as last applied");
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    assert_eq!(shown_cidrs(&app, &runtime_id).await, json!(REQUESTED));
    let rendered = test_support::render(&stored_runtime(&app, &runtime_id).await, RunAction::Apply);
    assert_eq!(rendered_cidrs(&rendered, "eks"), REQUESTED);

    // GraphQL's upgrade takes them too.
    let upgrade =
        "mutation($id: String!, $config: UpgradeClusterInput!) { upgradeCluster(id: $id, config: $config) { id } }";
    let response =
        app.graphql(upgrade, json!({ "id": runtime_id, "config": { "apiAllowedCidrs": ["192.0.2.0/24"] } })).await;
    assert!(response.get("errors").is_none(), "{response}");
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    assert_eq!(shown_cidrs(&app, &runtime_id).await, json!(["192.0.2.0/24"]));
}

on_both_databases!(
    a_provisioning_without_api_ranges_is_refused_when_the_operator_names_none,
    the_requests_api_ranges_are_recorded_and_rendered_for_every_topology,
    the_operators_api_ranges_apply_when_the_request_names_none,
    an_upgrade_replaces_the_api_ranges_once_it_succeeded,
);
