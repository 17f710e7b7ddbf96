//! Cancelling operations: through both APIs on SQLite and PostgreSQL a queued operation ends at once and the
//! runtime stays usable; a running one is stopped by its worker (in a separate process, on the test control
//! plane): its Job is deleted, its credentials removed, and it ends `Failed` with reason `cancelled`.

use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use provisioner::domain::OperationState;
use serde_json::json;
use test_support::documents;
use test_support::engine::Engine;
use test_support::{Backend, on_both_databases, provision_body, spawn_app};

const WAIT: Duration = Duration::from_secs(60);

async fn a_queued_operation_ends_at_once_and_the_runtime_stays_usable(backend: Backend) {
    let app = spawn_app(backend).await;
    let accepted = app.post_provision(&provision_body("cancel-a")).await.json();
    let (runtime_id, operation_id) = (accepted["id"].as_str().unwrap(), accepted["operationId"].as_str().unwrap());
    let cancel = format!("/api/v1/operations/{operation_id}/cancel");

    let answer = app.request("POST", &cancel, None, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    assert_eq!(answer.json()["status"], "failed");
    let record = app.get(&format!("/api/v1/operations/{operation_id}")).await.json();
    assert_eq!(
        record["lastError"],
        json!({ "errMessage": "cancelled by system:anonymous", "reason": "cancelled", "component": "provisioner" }),
        "{record}"
    );
    let stages: Vec<&str> =
        record["stages"].as_array().unwrap().iter().map(|entry| entry["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["Queued", "Done"]);
    assert!(record["finishedAt"].is_string(), "{record}");

    // It is cancelled: a second cancel, from either API, is answered with it (a retry changes nothing).
    let again = app.request("POST", &cancel, None, &[]).await;
    assert_eq!((again.status, again.json()["status"].clone()), (StatusCode::OK, json!("failed")), "{}", again.text);
    let response = app
        .graphql("mutation($id: String!) { cancelOperation(id: $id) { id state } }", json!({ "id": operation_id }))
        .await;
    assert_eq!(response["data"]["cancelOperation"], json!({ "id": operation_id, "state": "Failed" }), "{response}");

    // The runtime stays usable: it can be deprovisioned, and then its name provisioned again.
    assert_eq!(app.delete(&format!("/api/v1/provisions/{runtime_id}")).await.status, StatusCode::ACCEPTED);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    assert_eq!(app.post_provision(&provision_body("cancel-a")).await.status, StatusCode::ACCEPTED);

    // A cancelled upgrade leaves the configuration last applied.
    let runtime_id = app.provisioned(&provision_body("cancel-c")).await;
    let path = format!("/api/v1/provisions/{runtime_id}");
    let upgrade = app.patch(&path, &json!({ "workerPool": { "maxSize": 7 } })).await.json();
    let cancelled = app
        .request("POST", &format!("/api/v1/operations/{}/cancel", upgrade["operationId"].as_str().unwrap()), None, &[])
        .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED, "{}", cancelled.text);
    let response = app.graphql(documents::WORKER_MAX_SIZE, json!({ "id": runtime_id })).await;
    assert_eq!(
        response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"]["workerPool"]["maxSize"], 3,
        "{response}"
    );

    // GraphQL cancels a queued operation the same way.
    let queued =
        app.post_provision(&provision_body("cancel-b")).await.json()["operationId"].as_str().unwrap().to_owned();
    let response = app
        .graphql(
            "mutation($id: String!) { cancelOperation(id: $id) { state lastError { reason component errMessage } } }",
            json!({ "id": queued }),
        )
        .await;
    assert_eq!(
        response["data"]["cancelOperation"],
        json!({ "state": "Failed", "lastError": { "reason": "cancelled", "component": "provisioner", "errMessage": "cancelled by system:anonymous" } }),
        "{response}"
    );

    let unknown = uuid::Uuid::now_v7();
    let answer = app.request("POST", &format!("/api/v1/operations/{unknown}/cancel"), None, &[]).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.text);
    let answer = app.request("POST", "/api/v1/operations/nope/cancel", None, &[]).await;
    assert_eq!((answer.status, answer.json()["field"].clone()), (StatusCode::BAD_REQUEST, json!("id")));
}

on_both_databases!(a_queued_operation_ends_at_once_and_the_runtime_stays_usable);

#[tokio::test]
async fn a_running_operation_is_stopped_by_its_worker() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("cancel-running")).await;
    let job_name = format!("provision-{runtime_id}");
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;

    let asked = tokio::time::Instant::now();
    let answer = engine.app.request("POST", &format!("/api/v1/operations/{operation_id}/cancel"), None, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    assert_eq!(answer.json()["status"], "running", "a running operation ends once its worker has stopped it");
    let failed = engine.wait_for_status(&runtime_id, &["failed", "succeeded"], WAIT).await;
    let took = asked.elapsed();
    eprintln!("cancel to the operation's end: {took:?}");
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["lastError"]["reason"], "cancelled", "{failed}");
    assert_eq!(failed["lastError"]["errMessage"], "cancelled by system:anonymous");
    // Its Job is gone (its pods got their grace period), and so are the credentials.
    let jobs = Api::<Job>::namespaced(engine.admin.clone(), &engine.namespace);
    assert!(jobs.get_opt(&job_name).await.unwrap().is_none(), "the cancelled run's Job was left");
    assert!(engine.credentials_secrets().await.is_empty());
    let record = engine.app.get(&format!("/api/v1/operations/{operation_id}")).await.json();
    let stages: Vec<&str> =
        record["stages"].as_array().unwrap().iter().map(|entry| entry["stage"].as_str().unwrap()).collect();
    assert_eq!(stages[stages.len() - 2..], ["Cleanup", "Done"], "{record}");
    let again = engine.app.request("POST", &format!("/api/v1/operations/{operation_id}/cancel"), None, &[]).await;
    assert_eq!(again.status, StatusCode::OK, "a repeated cancel is answered with the cancelled operation");
    process.stop().await;
}
