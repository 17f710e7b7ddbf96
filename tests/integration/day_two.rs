//! Day-2 requests through both APIs, on SQLite and on PostgreSQL: upgrades, dry runs, hibernations and wake-ups
//! are validated, refused while they would conflict, and the stored configuration (and whether the runtime
//! sleeps) changes only when the operation succeeded.

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use serde_json::{Value, json};
use test_support::documents;
use test_support::{Backend, TestApp, eks_body, on_both_databases, provision_body, provision_input, spawn_app};

const UPGRADE: &str = "mutation($id: String!, $config: UpgradeClusterInput!, $dryRun: Boolean) {
    upgradeCluster(id: $id, config: $config, dryRun: $dryRun) { id operation state runtimeID dryRun }
}";

const CLUSTER_CONFIG: &str = "query($id: String!) {
    runtimeStatus(id: $id) {
        lastOperationStatus { id operation state dryRun }
        runtimeConfiguration { clusterConfig { kubernetesVersion workerPool { maxSize } } }
    }
}";

async fn cluster_config(app: &TestApp, runtime_id: &str) -> Value {
    let response = app.graphql(CLUSTER_CONFIG, json!({ "id": runtime_id })).await;
    assert!(response.get("errors").is_none(), "{response}");
    response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"].clone()
}

const HIBERNATION: &str = "query($id: String!) {
    runtimeStatus(id: $id) {
        lastOperationStatus { operation state }
        hibernationStatus { hibernated hibernationPossible }
    }
}";

/// `hibernationStatus` from GraphQL and `hibernation` from REST, which must agree.
async fn hibernation(app: &TestApp, runtime_id: &str) -> Value {
    let response = app.graphql(HIBERNATION, json!({ "id": runtime_id })).await;
    assert!(response.get("errors").is_none(), "{response}");
    let graphql = response["data"]["runtimeStatus"]["hibernationStatus"].clone();
    let rest = app.get(&format!("/api/v1/provisions/{runtime_id}")).await.json()["hibernation"].clone();
    assert_eq!(graphql, rest);
    graphql
}

fn error_fields(answer: &Value) -> Vec<String> {
    answer["errors"].as_array().unwrap().iter().map(|error| error["field"].as_str().unwrap().to_owned()).collect()
}

async fn an_upgrade_changes_the_configuration_only_once_it_succeeded(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&eks_body("upgrade-a")).await;
    let path = format!("/api/v1/provisions/{runtime_id}");

    let accepted = app.patch(&path, &json!({ "kubernetesVersion": "1.35", "workerPool": { "maxSize": 5 } })).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let accepted = accepted.json();
    assert_eq!((accepted["operation"].as_str(), accepted["dryRun"].as_bool()), (Some("upgrade"), Some(false)));
    let status = app.get(&path).await.json();
    assert_eq!((status["operation"].as_str(), status["status"].as_str()), (Some("upgrade"), Some("queued")));
    assert_eq!(status["operationId"], accepted["operationId"]);
    // Queued: the runtime still shows what was last applied.
    assert_eq!(
        cluster_config(&app, &runtime_id).await,
        json!({ "kubernetesVersion": "1.34", "workerPool": { "maxSize": 3 } })
    );

    // One operation per runtime: a second upgrade and a deprovisioning wait for this one.
    let second = app.patch(&path, &json!({ "workerPool": { "maxSize": 6 } })).await;
    assert_eq!(second.status, StatusCode::CONFLICT, "{}", second.text);
    assert_eq!(second.json()["code"], "operation_in_progress");
    assert_eq!(app.delete(&path).await.json()["code"], "operation_in_progress");
    let response = app.graphql(UPGRADE, json!({ "id": runtime_id, "config": { "kubernetesVersion": "1.35" } })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "operation_in_progress", "{response}");

    // A failed upgrade keeps the previous configuration, and the status says it failed.
    app.run_queued_operation(&[], OperationState::Failed).await;
    assert_eq!(cluster_config(&app, &runtime_id).await["kubernetesVersion"], "1.34");
    let status = app.get(&path).await.json();
    assert_eq!((status["operation"].as_str(), status["status"].as_str()), (Some("upgrade"), Some("failed")));

    // The same upgrade through GraphQL, this time succeeding: now the runtime shows it.
    let response = app
        .graphql(
            UPGRADE,
            json!({ "id": runtime_id, "config": { "kubernetesVersion": "1.35", "workerPool": { "maxSize": 5 } } }),
        )
        .await;
    assert!(response.get("errors").is_none(), "{response}");
    let upgrade = &response["data"]["upgradeCluster"];
    assert_eq!((upgrade["operation"].as_str(), upgrade["state"].as_str()), (Some("Upgrade"), Some("Pending")));
    assert_eq!(app.run_queued_operation(&[], OperationState::Succeeded).await, upgrade["id"].as_str().unwrap());
    assert_eq!(
        cluster_config(&app, &runtime_id).await,
        json!({ "kubernetesVersion": "1.35", "workerPool": { "maxSize": 5 } })
    );

    // Upgrading to what it already is changes nothing.
    let same = app.patch(&path, &json!({ "kubernetesVersion": "1.35" })).await;
    assert_eq!(same.status, StatusCode::BAD_REQUEST, "{}", same.text);
    assert_eq!(same.json()["code"], "nothing_to_change");
    let response = app.graphql(UPGRADE, json!({ "id": runtime_id, "config": {} })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "nothing_to_change", "{response}");
    assert_eq!(response["errors"][0]["extensions"]["code"], "BAD_REQUEST");
}

async fn a_dry_run_upgrade_plans_and_leaves_the_configuration(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&eks_body("upgrade-b")).await;
    let accepted = app
        .request(
            "PATCH",
            &format!("/api/v1/provisions/{runtime_id}?dryRun=true"),
            Some(&json!({ "kubernetesVersion": "1.35" })),
            &[],
        )
        .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    assert_eq!(accepted.json()["dryRun"], true);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let response = app.graphql(CLUSTER_CONFIG, json!({ "id": runtime_id })).await;
    let status = &response["data"]["runtimeStatus"];
    assert_eq!(status["lastOperationStatus"]["operation"], "Upgrade", "{response}");
    assert_eq!(status["lastOperationStatus"]["state"], "Succeeded");
    assert_eq!(status["lastOperationStatus"]["dryRun"], true);
    assert_eq!(status["runtimeConfiguration"]["clusterConfig"]["kubernetesVersion"], "1.34");

    let response = app
        .graphql(UPGRADE, json!({ "id": runtime_id, "config": { "kubernetesVersion": "1.35" }, "dryRun": true }))
        .await;
    assert_eq!(response["data"]["upgradeCluster"]["dryRun"], true, "{response}");

    let answer =
        app.request("PATCH", &format!("/api/v1/provisions/{runtime_id}?dryRun=maybe"), Some(&json!({})), &[]).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    assert_eq!(answer.json()["field"], "dryRun");
}

async fn upgrades_name_every_field_they_may_not_change(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&eks_body("upgrade-c")).await;
    let path = format!("/api/v1/provisions/{runtime_id}");

    let body = json!({ "region": "eu-west-1", "credentialId": "other", "aws": { "zones": ["eu-west-1a"] }, "controlPlane": { "count": 5 } });
    let answer = app.patch(&path, &body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let answer = answer.json();
    assert_eq!(answer["code"], "invalid_input");
    assert_eq!(answer["field"], "clusterConfig.aws");
    assert_eq!(
        error_fields(&answer),
        ["clusterConfig.aws", "clusterConfig.controlPlane.count", "clusterConfig.credentialId", "clusterConfig.region"]
    );

    let answer = app
        .patch(&path, &json!({ "kubernetesVersion": "1.33", "workerPool": { "minSize": 9, "maxSize": 4 } }))
        .await
        .json();
    assert_eq!(error_fields(&answer), ["clusterConfig.kubernetesVersion", "clusterConfig.workerPool.minSize"]);
    let detail = answer["detail"].as_str().unwrap();
    assert!(detail.contains("provision a new runtime at 1.33 and move the workloads to it"), "{answer}");

    let response = app.graphql(UPGRADE, json!({ "id": runtime_id, "config": { "kubernetesVersion": "2.0" } })).await;
    let extensions = &response["errors"][0]["extensions"];
    assert_eq!(extensions["code"], "BAD_REQUEST", "{response}");
    assert_eq!(extensions["field"], "clusterConfig.kubernetesVersion");
    assert!(response["errors"][0]["message"].as_str().unwrap().contains("another major version"), "{response}");
    // The rest of what a cluster was created with stays too, each named.
    let body = json!({
        "topology": "gcp_gke",
        "environment": "prod",
        "network": { "vpcCidr": "10.1.0.0/16" },
        "gcp": { "zones": ["europe-west1-b"] },
        "name": "renamed",
        "runtimeInput": { "name": "renamed" },
    });
    let answer = app.patch(&path, &body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let fields = error_fields(&answer.json());
    let expected = ["environment", "gcp", "name", "network", "runtimeInput", "topology"];
    assert_eq!(fields, expected.map(|field| format!("clusterConfig.{field}")), "{}", answer.text);

    // GraphQL itself refuses a field the input type does not have, naming it, before anything runs.
    let document = json!({ "query": UPGRADE, "variables": { "id": runtime_id, "config": { "region": "eu-west-1" } } });
    let answer = app.request("POST", "/graphql", Some(&document), &[]).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    assert!(answer.text.contains(r#"unknown field \"region\""#), "{}", answer.text);

    // Nothing was queued by any of them.
    assert_eq!(app.get(&path).await.json()["operation"], "provision");

    // A body that is not JSON is named as the body.
    let answer = app.request("PATCH", &path, None, &[("content-type", "application/json")]).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let refused = &answer.json()["errors"][0];
    assert_eq!((&refused["field"], &refused["reason"]), (&json!("body"), &json!("format")), "{}", answer.text);
}

async fn only_a_provisioned_live_runtime_can_be_upgraded(backend: Backend) {
    let app = spawn_app(backend).await;
    let upgrade = json!({ "workerPool": { "maxSize": 4 } });

    let queued = app.post_provision(&provision_body("upgrade-d")).await.json()["id"].as_str().unwrap().to_owned();
    let answer = app.patch(&format!("/api/v1/provisions/{queued}"), &upgrade).await;
    assert_eq!(answer.json()["code"], "operation_in_progress", "{}", answer.text);

    app.run_queued_operation(&[], OperationState::Failed).await;
    let answer = app.patch(&format!("/api/v1/provisions/{queued}"), &upgrade).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.text);
    assert_eq!(answer.json()["code"], "not_ready");

    let runtime_id = app.provisioned(&eks_body("upgrade-e")).await;
    assert_eq!(app.delete(&format!("/api/v1/provisions/{runtime_id}")).await.status, StatusCode::ACCEPTED);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let answer = app.patch(&format!("/api/v1/provisions/{runtime_id}"), &upgrade).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.text);
    assert_eq!(answer.json()["code"], "already_deprovisioned");

    let unknown = uuid::Uuid::now_v7();
    assert_eq!(app.patch(&format!("/api/v1/provisions/{unknown}"), &upgrade).await.status, StatusCode::NOT_FOUND);
}

async fn a_vanilla_cluster_changes_its_control_plane_too_but_not_its_size(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&provision_body("vanilla-a")).await;
    let path = format!("/api/v1/provisions/{runtime_id}");
    for (change, field) in [
        (json!({ "count": 5 }), "clusterConfig.controlPlane.count"),
        (json!({ "machineType": "bad type" }), "clusterConfig.controlPlane.machineType"),
    ] {
        let answer = app.patch(&path, &json!({ "controlPlane": change })).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
        assert_eq!(error_fields(&answer.json()), [field]);
    }
    let body = json!({
        "kubernetesVersion": "1.35",
        "controlPlane": { "machineType": "m6i.xlarge" },
        "workerPool": { "maxSize": 6, "machineType": "m6i.large" },
    });
    let accepted = app.patch(&path, &body).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
}

async fn a_dry_run_provisioning_is_a_preview_that_keeps_the_name_free(backend: Backend) {
    let app = spawn_app(backend).await;
    let preview = app.request("POST", "/api/v1/provisions?dryRun=true", Some(&provision_body("preview-a")), &[]).await;
    assert_eq!(preview.status, StatusCode::ACCEPTED, "{}", preview.text);
    let preview = preview.json();
    assert_eq!((preview["operation"].as_str(), preview["dryRun"].as_bool()), (Some("provision"), Some(true)));
    let preview_id = preview["id"].as_str().unwrap();

    // The name stays free for the real cluster, from either API.
    let real = app.post_provision(&provision_body("preview-a")).await;
    assert_eq!(real.status, StatusCode::ACCEPTED, "{}", real.text);
    let mutation = "mutation($config: ProvisionRuntimeInput!) { provisionRuntime(config: $config, dryRun: true) { runtimeID dryRun } }";
    let response = app.graphql(mutation, json!({ "config": provision_input("preview-a") })).await;
    assert_eq!(response["data"]["provisionRuntime"]["dryRun"], true, "{response}");

    // A preview has no cluster: nothing to upgrade, deprovision or connect to, even once its plan succeeded.
    let path = format!("/api/v1/provisions/{preview_id}");
    let operation_id = preview["operationId"].as_str().unwrap();
    app.database.set_operation_columns(operation_id, [("state", "Succeeded".into()), ("stage", "Done".into())]).await;
    let answer = app.patch(&path, &json!({ "workerPool": { "maxSize": 4 } })).await;
    assert_eq!(
        (answer.status, answer.json()["code"].clone()),
        (StatusCode::CONFLICT, json!("preview")),
        "{}",
        answer.text
    );
    assert_eq!(app.delete(&path).await.json()["code"], "preview");
    assert_eq!(app.get(&format!("{path}/kubeconfig")).await.json()["code"], "not_ready");

    // The same Idempotency-Key for a dry run and a real request is a different request.
    let key = [("idempotency-key", "preview-b-1")];
    let first = app.request("POST", "/api/v1/provisions?dryRun=true", Some(&provision_body("preview-b")), &key).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    let again = app.request("POST", "/api/v1/provisions", Some(&provision_body("preview-b")), &key).await;
    assert_eq!(again.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", again.text);
}

async fn every_invalid_field_of_a_provisioning_is_listed_in_both_apis(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut body = provision_body("Bad Name");
    body["clusterConfig"]["region"] = json!("nowhere");
    body["clusterConfig"]["workerPool"]["diskSizeGb"] = json!(1);
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let answer = answer.json();
    let fields = ["runtimeInput.name", "clusterConfig.region", "clusterConfig.workerPool.diskSizeGb"];
    assert_eq!(error_fields(&answer), fields);
    assert_eq!(answer["field"], fields[0]);

    let mut input = provision_input("Bad Name");
    input["clusterConfig"]["region"] = json!("nowhere");
    input["clusterConfig"]["workerPool"]["diskSizeGb"] = json!(1);
    let response = app.graphql(documents::PROVISION, json!({ "config": input })).await;
    let extensions = &response["errors"][0]["extensions"];
    assert_eq!(extensions["field"], fields[0], "{response}");
    let listed: Vec<&str> =
        extensions["errors"].as_array().unwrap().iter().map(|error| error["field"].as_str().unwrap()).collect();
    assert_eq!(listed, fields);
    assert_eq!(extensions["errors"], answer["errors"]);
}

async fn a_hibernated_runtime_refuses_upgrades_until_it_is_woken_up(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&provision_body("sleepy-a")).await;
    let path = format!("/api/v1/provisions/{runtime_id}");
    assert_eq!(hibernation(&app, &runtime_id).await, json!({ "hibernated": false, "hibernationPossible": true }));
    // Awake already: a wake-up is answered with the last operation, and nothing is queued.
    let wake = app.request("POST", &format!("{path}/wake"), None, &[]).await;
    assert_eq!((wake.status, wake.json()["operation"].clone()), (StatusCode::OK, json!("provision")), "{}", wake.text);

    let accepted = app.request("POST", &format!("{path}/hibernate"), None, &[]).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    assert_eq!(accepted.json()["operation"], "hibernate");
    // Until the hibernation succeeded the runtime is awake, and busy.
    assert_eq!(hibernation(&app, &runtime_id).await, json!({ "hibernated": false, "hibernationPossible": false }));
    // A repeated hibernation gets the same one.
    let again = app.request("POST", &format!("{path}/hibernate"), None, &[]).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert_eq!(again.json()["operationId"], accepted.json()["operationId"], "{}", again.text);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    assert_eq!(hibernation(&app, &runtime_id).await, json!({ "hibernated": true, "hibernationPossible": false }));

    // Asleep: no upgrade (from either API); a second hibernation gets the first; the kubeconfig is still the
    // runtime's.
    let upgrade = app.patch(&path, &json!({ "workerPool": { "maxSize": 4 } })).await;
    assert_eq!((upgrade.status, upgrade.json()["code"].clone()), (StatusCode::CONFLICT, json!("hibernated")));
    let response =
        app.graphql(UPGRADE, json!({ "id": runtime_id, "config": { "workerPool": { "maxSize": 4 } } })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "hibernated", "{response}");
    assert_eq!(response["errors"][0]["extensions"]["code"], "CONFLICT");
    let response =
        app.graphql("mutation($id: String!) { hibernateRuntime(id: $id) { id } }", json!({ "id": runtime_id })).await;
    assert_eq!(response["data"]["hibernateRuntime"]["id"], accepted.json()["operationId"], "{response}");
    let kubeconfig = app.get(&format!("{path}/kubeconfig")).await;
    assert_ne!(kubeconfig.json()["code"], "not_ready", "{}", kubeconfig.text);

    // A failed wake-up leaves it asleep; a successful one wakes it, and upgrades are accepted again.
    let response = app
        .graphql("mutation($id: String!) { wakeUpRuntime(id: $id) { operation state } }", json!({ "id": runtime_id }))
        .await;
    assert_eq!(response["data"]["wakeUpRuntime"], json!({ "operation": "WakeUp", "state": "Pending" }), "{response}");
    app.run_queued_operation(&[], OperationState::Failed).await;
    assert_eq!(hibernation(&app, &runtime_id).await["hibernated"], true);
    let accepted = app.request("POST", &format!("{path}/wake"), None, &[]).await;
    assert_eq!((accepted.status, accepted.json()["operation"].clone()), (StatusCode::ACCEPTED, json!("wake_up")));
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    assert_eq!(hibernation(&app, &runtime_id).await, json!({ "hibernated": false, "hibernationPossible": true }));
    assert_eq!(app.patch(&path, &json!({ "workerPool": { "maxSize": 4 } })).await.status, StatusCode::ACCEPTED);
}

async fn a_hibernated_runtime_can_be_deprovisioned_and_only_a_cluster_can_sleep(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&eks_body("sleepy-b")).await;
    let path = format!("/api/v1/provisions/{runtime_id}");
    assert_eq!(app.request("POST", &format!("{path}/hibernate"), None, &[]).await.status, StatusCode::ACCEPTED);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let deprovision = app.delete(&path).await;
    assert_eq!(deprovision.status, StatusCode::ACCEPTED, "{}", deprovision.text);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let hibernate = app.request("POST", &format!("{path}/hibernate"), None, &[]).await;
    assert_eq!(hibernate.json()["code"], "already_deprovisioned", "{}", hibernate.text);
    assert_eq!(hibernation(&app, &runtime_id).await["hibernationPossible"], false);

    // A runtime whose provisioning failed has no cluster to put to sleep; a preview neither.
    let failed = app.post_provision(&provision_body("sleepy-c")).await.json()["id"].as_str().unwrap().to_owned();
    app.run_queued_operation(&[], OperationState::Failed).await;
    assert_eq!(hibernation(&app, &failed).await, json!({ "hibernated": false, "hibernationPossible": false }));
    let hibernate = app.request("POST", &format!("/api/v1/provisions/{failed}/hibernate"), None, &[]).await;
    assert_eq!((hibernate.status, hibernate.json()["code"].clone()), (StatusCode::CONFLICT, json!("not_ready")));
    let preview = app.request("POST", "/api/v1/provisions?dryRun=true", Some(&provision_body("sleepy-d")), &[]).await;
    let preview = preview.json()["id"].as_str().unwrap().to_owned();
    let hibernate = app.request("POST", &format!("/api/v1/provisions/{preview}/hibernate"), None, &[]).await;
    assert_eq!(hibernate.json()["code"], "preview", "{}", hibernate.text);
    let unknown = uuid::Uuid::now_v7();
    let wake = app.request("POST", &format!("/api/v1/provisions/{unknown}/wake"), None, &[]).await;
    assert_eq!(wake.status, StatusCode::NOT_FOUND, "{}", wake.text);
}

on_both_databases!(
    a_hibernated_runtime_refuses_upgrades_until_it_is_woken_up,
    a_hibernated_runtime_can_be_deprovisioned_and_only_a_cluster_can_sleep,
    an_upgrade_changes_the_configuration_only_once_it_succeeded,
    a_dry_run_upgrade_plans_and_leaves_the_configuration,
    upgrades_name_every_field_they_may_not_change,
    only_a_provisioned_live_runtime_can_be_upgraded,
    a_vanilla_cluster_changes_its_control_plane_too_but_not_its_size,
    a_dry_run_provisioning_is_a_preview_that_keeps_the_name_free,
    every_invalid_field_of_a_provisioning_is_listed_in_both_apis,
);
