//! Several named worker pools through both APIs: requested, shown in both shapes, stored the way the previous
//! release reads them when they can be, changed whole by an upgrade, and refused naming the field.

use axum::http::StatusCode;
use sea_orm::ConnectionTrait as _;
use serde_json::{Value, json};
use test_support::{Backend, TestApp, eks_body, on_both_databases, spawn_app};

const RUNTIME_POOLS: &str = "query($id: String!) { runtimeStatus(id: $id) { runtimeConfiguration { clusterConfig {
    workerPool { machineType maxSize }
    workerPools { name machineType minSize maxSize zones labels spot taints { key value effect } }
} } } }";

const UPGRADE: &str = "mutation($id: String!, $config: UpgradeClusterInput!) {
    upgradeCluster(id: $id, config: $config) { id state }
}";

/// The EKS example with a general pool named default and a tainted, labelled spot pool for GPUs in one zone
/// that starts empty.
fn two_pools(name: &str) -> Value {
    let mut body = eks_body(name);
    let config = body["clusterConfig"].as_object_mut().unwrap();
    config.remove("workerPool");
    config.insert(
        "workerPools".into(),
        json!([
            { "name": "default", "machineType": "m6i.large", "minSize": 1, "maxSize": 3 },
            {
                "name": "gpu", "machineType": "g5.xlarge", "minSize": 0, "maxSize": 2, "diskSizeGb": 200,
                "zones": ["eu-central-1b"], "labels": { "kubeopera.io/accelerator": "nvidia" },
                "taints": [{ "key": "nvidia.com/gpu", "effect": "NoSchedule" }], "spot": true
            }
        ]),
    );
    body
}

/// The configuration's JSON as the runtime `name`'s row holds it.
async fn stored_config(app: &TestApp, name: &str) -> Value {
    let db = sea_orm::Database::connect(&app.database.url).await.unwrap();
    let statement = format!("SELECT cluster_config FROM runtime WHERE name = '{name}'");
    let row = db.query_one_raw(sea_orm::Statement::from_string(db.get_database_backend(), statement)).await;
    let row = row.unwrap().expect("the runtime's row");
    // PostgreSQL's JSON column, SQLite's text.
    row.try_get::<Value>("", "cluster_config")
        .unwrap_or_else(|_| serde_json::from_str(&row.try_get::<String>("", "cluster_config").unwrap()).unwrap())
}

async fn graphql_pools(app: &TestApp, runtime_id: &str) -> Value {
    let response = app.graphql(RUNTIME_POOLS, json!({ "id": runtime_id })).await;
    assert!(response.get("errors").is_none(), "{response}");
    response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"].clone()
}

async fn named_pools_are_shown_in_both_shapes_by_both_apis(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&two_pools("pools-a")).await;

    let rest = app.get(&format!("/api/v1/runtimes/{runtime_id}")).await;
    assert_eq!(rest.status, StatusCode::OK, "{}", rest.text);
    let config = &rest.json()["clusterConfig"];
    let names: Vec<&str> =
        config["workerPools"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "gpu"], "{config}");
    assert_eq!(config["workerPools"][1]["taints"], json!([{ "key": "nvidia.com/gpu", "effect": "NoSchedule" }]));
    assert_eq!(config["workerPools"][1]["diskSizeGb"], 200);
    assert_eq!(config["workerPools"][0]["diskSizeGb"], 50, "the default disk, as for the single pool");
    // Kyma's clients read the single pool: the one named default.
    assert_eq!(
        (&config["workerPool"]["machineType"], &config["workerPool"]["maxSize"]),
        (&json!("m6i.large"), &json!(3))
    );

    let graphql = graphql_pools(&app, &runtime_id).await;
    assert_eq!(graphql["workerPool"], json!({ "machineType": "m6i.large", "maxSize": 3 }));
    let gpu = &graphql["workerPools"][1];
    assert_eq!(
        (&gpu["name"], &gpu["minSize"], &gpu["zones"], &gpu["spot"]),
        (&json!("gpu"), &json!(0), &json!(["eu-central-1b"]), &json!(true))
    );
    assert_eq!(gpu["labels"], json!({ "kubeopera.io/accelerator": "nvidia" }));
    assert_eq!(gpu["taints"], json!([{ "key": "nvidia.com/gpu", "value": null, "effect": "NoSchedule" }]));

    // Stored as named pools: the previous release cannot read them (and so cannot render one pool and plan the
    // others' removal during a rolling update).
    let stored = stored_config(&app, "pools-a").await;
    assert!(stored.get("workerPool").is_none() && stored["workerPools"].is_array(), "{stored}");
}

/// The single pool is the pool named default in both directions, and one plain pool named default is stored as
/// the single pool, which every release reads.
async fn the_single_pool_is_the_pool_named_default(backend: Backend) {
    let app = spawn_app(backend).await;
    let single = app.provisioned(&eks_body("pools-single")).await;
    let shown = graphql_pools(&app, &single).await;
    assert_eq!(shown["workerPools"][0]["name"], "default");
    assert_eq!(shown["workerPools"][0]["maxSize"], shown["workerPool"]["maxSize"]);
    assert!(stored_config(&app, "pools-single").await["workerPool"].is_object());

    let mut body = eks_body("pools-plain");
    let pool = body["clusterConfig"].as_object_mut().unwrap().remove("workerPool").unwrap();
    let mut named = pool.clone();
    named["name"] = json!("default");
    body["clusterConfig"]["workerPools"] = json!([named]);
    app.provisioned(&body).await;
    let stored = stored_config(&app, "pools-plain").await;
    assert_eq!((stored.get("workerPools"), &stored["workerPool"]), (None, &pool), "{stored}");
}

async fn an_upgrade_replaces_the_pools_whole(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&eks_body("pools-b")).await;
    let path = format!("/api/v1/runtimes/{runtime_id}");
    let pools = json!([
        { "name": "default", "machineType": "t3.large", "minSize": 1, "maxSize": 3 },
        { "name": "batch", "machineType": "c6i.2xlarge", "minSize": 0, "maxSize": 10, "spot": true }
    ]);
    let accepted = app.patch(&path, &json!({ "workerPools": pools })).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let target = &app.get(&path).await.json()["targetConfig"];
    let names: Vec<&str> =
        target["workerPools"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "batch"], "{target}");
    app.run_queued_operation(&[], provisioner::domain::OperationState::Succeeded).await;
    assert_eq!(graphql_pools(&app, &runtime_id).await["workerPools"][1]["name"], "batch");

    // The single pool's change is a change of the pool named default; once none is, it is refused.
    let response =
        app.graphql(UPGRADE, json!({ "id": runtime_id, "config": { "workerPool": { "maxSize": 4 } } })).await;
    assert!(response.get("errors").is_none(), "{response}");
    app.run_queued_operation(&[], provisioner::domain::OperationState::Succeeded).await;
    let shown = graphql_pools(&app, &runtime_id).await;
    assert_eq!((&shown["workerPools"][0]["maxSize"], &shown["workerPools"][1]["maxSize"]), (&json!(4), &json!(10)));

    let only_batch = json!([{ "name": "batch", "machineType": "c6i.2xlarge", "minSize": 0, "maxSize": 10 }]);
    let accepted = app.patch(&path, &json!({ "workerPools": only_batch })).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    app.run_queued_operation(&[], provisioner::domain::OperationState::Succeeded).await;
    let refused = app.patch(&path, &json!({ "workerPool": { "maxSize": 5 } })).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.json()["errors"][0]["field"], "clusterConfig.workerPool", "{}", refused.text);
    let both = app.patch(&path, &json!({ "workerPool": { "maxSize": 5 }, "workerPools": only_batch })).await;
    assert_eq!(both.json()["errors"][0]["field"], "clusterConfig.workerPools", "{}", both.text);
}

/// Bad pools are refused before anything is recorded, each naming its field.
async fn bad_pools_are_refused_naming_the_field(backend: Backend) {
    let app = spawn_app(backend).await;
    let cases: [(&str, Value, &str); 6] = [
        ("duplicate names", json!([{ "name": "a" }, { "name": "a" }]), "clusterConfig.workerPools[1].name"),
        ("not a DNS label", json!([{ "name": "GPU_pool" }]), "clusterConfig.workerPools[0].name"),
        ("minimum above maximum", json!([{ "minSize": 5, "maxSize": 2 }]), "clusterConfig.workerPools[0].minSize"),
        ("a zone not the cluster's", json!([{ "zones": ["us-east-1a"] }]), "clusterConfig.workerPools[0].zones[0]"),
        (
            "a label the kubelet may not set",
            json!([{ "labels": { "node-role.kubernetes.io/worker": "" } }]),
            "clusterConfig.workerPools[0].labels.node-role.kubernetes.io/worker",
        ),
        (
            "a taint without an effect",
            json!([{ "taints": [{ "key": "gpu" }] }]),
            "clusterConfig.workerPools[0].taints[0].effect",
        ),
    ];
    for (what, changes, field) in cases {
        let mut body = two_pools(&format!("bad-{}", what.len()));
        let pools = body["clusterConfig"]["workerPools"].as_array_mut().unwrap();
        pools.truncate(1);
        let base = pools[0].clone();
        *pools = changes
            .as_array()
            .unwrap()
            .iter()
            .map(|change| {
                let mut pool = base.clone();
                pool.as_object_mut().unwrap().extend(change.as_object().unwrap().clone());
                pool
            })
            .collect();
        let answer = app.post_provision(&body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{what}: {}", answer.text);
        assert_eq!(answer.json()["errors"][0]["field"], field, "{what}: {}", answer.text);
    }
    let listed = app.get("/api/v1/runtimes").await.json();
    assert_eq!(listed["runtimes"], json!([]), "nothing recorded: {listed}");
}

on_both_databases!(
    named_pools_are_shown_in_both_shapes_by_both_apis,
    the_single_pool_is_the_pool_named_default,
    an_upgrade_replaces_the_pools_whole,
    bad_pools_are_refused_naming_the_field,
);
