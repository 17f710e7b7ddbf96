//! Retrying a failed operation (`POST /api/v1/operations/{id}/retry`, `retryOperation`): a new operation of the
//! same type and target on both APIs and databases, refused when it cannot help; and, on the test control plane,
//! a failed provisioning retried by the real worker until its cluster exists.

use std::time::Duration;

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use serde_json::{Value, json};
use test_support::auth_service::aws_credential;
use test_support::engine::Engine;
use test_support::{Backend, TestApp, documents, eks_body, on_both_databases, provision_body, spawn_app};

const WAIT: Duration = Duration::from_secs(60);
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";
const RETRY: &str = "mutation($id: String!) { retryOperation(id: $id) { id operation state retryOf } }";

async fn retry(app: &TestApp, operation_id: &str) -> (StatusCode, Value) {
    let answer = app.request("POST", &format!("/api/v1/operations/{operation_id}/retry"), None, &[]).await;
    (answer.status, answer.json())
}

/// The id of the operation a change request queued.
async fn upgrade(app: &TestApp, runtime_id: &str, max_size: i64) -> String {
    let body = json!({ "workerPool": { "maxSize": max_size } });
    let answer = app.patch(&format!("/api/v1/provisions/{runtime_id}"), &body).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    answer.json()["operationId"].as_str().unwrap().to_owned()
}

async fn a_failed_operation_is_retried_with_its_type_and_target(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&provision_body("retry-upgrade")).await;
    let failed = upgrade(&app, &runtime_id, 7).await;
    app.fail_operation(&failed, "job_failed").await;

    let (status, queued) = retry(&app, &failed).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    assert_eq!(
        (&queued["operation"], &queued["status"], &queued["retryOf"]),
        (&json!("upgrade"), &json!("queued"), &json!(failed))
    );
    assert_eq!(queued["runtimeId"], json!(runtime_id));
    let retry_id = queued["id"].as_str().unwrap().to_owned();
    assert_ne!(retry_id, failed);
    // A repeated request, from either API, gets the retry that is queued: nothing is queued twice.
    assert_eq!(retry(&app, &failed).await, (StatusCode::ACCEPTED, queued.clone()));
    let response = app.graphql(RETRY, json!({ "id": failed })).await;
    assert_eq!(
        response["data"]["retryOperation"],
        json!({ "id": retry_id, "operation": "Upgrade", "state": "Pending", "retryOf": failed }),
        "{response}"
    );

    // The retry applies the failed upgrade's target: once it succeeded, the runtime has it.
    assert_eq!(app.run_queued_operation(&[], OperationState::Succeeded).await, retry_id);
    let response = app.graphql(documents::WORKER_MAX_SIZE, json!({ "id": runtime_id })).await;
    assert_eq!(response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"]["workerPool"]["maxSize"], 7);
    let (status, done) = retry(&app, &failed).await;
    assert_eq!((status, &done["id"], &done["status"]), (StatusCode::OK, &json!(retry_id), &json!("succeeded")));
    let (status, refused) = retry(&app, &retry_id).await;
    assert_eq!((status, &refused["code"]), (StatusCode::CONFLICT, &json!("not_retryable")), "{refused}");
    assert!(refused["detail"].as_str().unwrap().contains("only a failed operation"), "{refused}");

    // A cancelled provisioning and a failed deprovisioning are retried as what they were.
    let cancelled = app.post_provision(&provision_body("retry-cancelled")).await.json();
    let cancelled_id = cancelled["operationId"].as_str().unwrap();
    app.request("POST", &format!("/api/v1/operations/{cancelled_id}/cancel"), None, &[]).await;
    let (status, queued) = retry(&app, cancelled_id).await;
    assert_eq!((status, &queued["operation"]), (StatusCode::ACCEPTED, &json!("provision")), "{queued}");
    let deprovisioning = app.delete(&format!("/api/v1/provisions/{runtime_id}")).await.json();
    let deprovisioning = deprovisioning["operationId"].as_str().unwrap();
    app.fail_operation(deprovisioning, "timeout").await;
    let (status, queued) = retry(&app, deprovisioning).await;
    assert_eq!((status, &queued["operation"]), (StatusCode::ACCEPTED, &json!("deprovision")), "{queued}");

    let unknown = uuid::Uuid::now_v7();
    assert_eq!(retry(&app, &unknown.to_string()).await.0, StatusCode::NOT_FOUND);
}

on_both_databases!(a_failed_operation_is_retried_with_its_type_and_target);

async fn a_retry_that_cannot_help_is_refused_naming_why(backend: Backend) {
    let app = spawn_app(backend).await;
    let runtime_id = app.provisioned(&provision_body("retry-refused")).await;

    // A plan that destroys a protected resource plans the same way again.
    let destructive = upgrade(&app, &runtime_id, 8).await;
    app.fail_operation(&destructive, "destructive_plan").await;
    let (status, refused) = retry(&app, &destructive).await;
    assert_eq!((status, &refused["code"]), (StatusCode::CONFLICT, &json!("not_retryable")), "{refused}");
    assert!(refused["detail"].as_str().unwrap().contains("destructive_plan"), "{refused}");
    let response = app.graphql(RETRY, json!({ "id": destructive })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "not_retryable", "{response}");

    // Only the runtime's last operation: an older failure is not run again over what came after it.
    let later = upgrade(&app, &runtime_id, 9).await;
    app.fail_operation(&later, "job_failed").await;
    let (status, refused) = retry(&app, &destructive).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused["detail"].as_str().unwrap().contains(&format!("{later} came after it")), "{refused}");
    // A retry that failed too is retried in its own right, not through the operation it retried.
    let (_, first_retry) = retry(&app, &later).await;
    let first_retry = first_retry["id"].as_str().unwrap().to_owned();
    app.fail_operation(&first_retry, "job_failed").await;
    assert_eq!(retry(&app, &later).await.0, StatusCode::CONFLICT);
    assert_eq!(retry(&app, &first_retry).await.0, StatusCode::ACCEPTED);
    app.fail_operation(&app.run_queued_operation(&[], OperationState::Failed).await, "job_failed").await;

    // A credential that was the cause is checked again: refused while auth-service still refuses it.
    let body = eks_body("retry-credential");
    let provisioning = app.post_provision(&body).await.json()["operationId"].as_str().unwrap().to_owned();
    app.fail_operation(&provisioning, "credential_mismatch").await;
    let credential = body["clusterConfig"]["credentialId"].as_str().unwrap();
    app.auth.add_credential(
        credential,
        json!({ "type": "gcp_service_account", "projectId": "p-1", "serviceAccountKey": {} }),
    );
    let (status, refused) = retry(&app, &provisioning).await;
    assert_eq!((status, &refused["code"]), (StatusCode::CONFLICT, &json!("not_retryable")), "{refused}");
    assert!(refused["detail"].as_str().unwrap().contains("credential is still refused"), "{refused}");
    app.auth.add_credential(
        credential,
        json!({ "type": "aws_access_key", "accessKeyId": "AKIAFIXED0000000001", "secretAccessKey": "fixed-secret" }),
    );
    let (status, queued) = retry(&app, &provisioning).await;
    assert_eq!((status, &queued["operation"]), (StatusCode::ACCEPTED, &json!("provision")), "{queued}");
}

/// A retry checks the credential within the runtime's tenant, as the worker will resolve it, whoever asks: a
/// caller without a tenant (who sees every runtime) retries a tenant's runtime whose credential is the tenant's.
async fn a_retry_checks_the_credential_within_the_runtimes_tenant(backend: Backend) {
    let app = spawn_app(backend).await;
    app.auth.add_tenant_credential("tenant-a", "cred-aws-a", aws_credential());
    let mut body = eks_body("retry-tenant");
    body["clusterConfig"]["credentialId"] = json!("cred-aws-a");
    let accepted = app.request("POST", "/api/v1/provisions", Some(&body), &[("Tenant", "tenant-a")]).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let provisioning = accepted.json()["operationId"].as_str().unwrap().to_owned();
    app.fail_operation(&provisioning, "credential_not_found").await;

    let (status, queued) = retry(&app, &provisioning).await;
    assert_eq!((status, &queued["operation"]), (StatusCode::ACCEPTED, &json!("provision")), "{queued}");
    assert_eq!(app.auth.tenants(), vec![Some("tenant-a".to_owned()); 2], "the request's check, then the retry's");
}

on_both_databases!(
    a_retry_that_cannot_help_is_refused_naming_why,
    a_retry_checks_the_credential_within_the_runtimes_tenant
);

/// The real worker runs the retry of a failed provisioning: a new Job replaces the failed one, and the cluster
/// exists once it succeeds.
#[tokio::test]
async fn a_failed_provisioning_retried_by_the_worker_provisions_the_cluster() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, failed) = engine.provision(&provision_body("retry-engine")).await;
    let job = format!("provision-{runtime_id}");
    engine.wait_for_stage(&failed, "WaitForJob", WAIT).await;
    engine.runner_fails(&job, "Error: creating VPC: RequestLimitExceeded").await;
    let status = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(status["lastError"]["reason"], "job_failed", "{status}");
    engine.wait_for_stage(&failed, "Done", WAIT).await;

    let (status, queued) = retry(&engine.app, &failed).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let retry_id = queued["id"].as_str().unwrap().to_owned();
    engine.wait_for_stage(&retry_id, "WaitForJob", WAIT).await;
    let jobs = engine.jobs_of_operation(&retry_id).await;
    assert_eq!(jobs.len(), 1, "the retry runs its own Job");
    engine.runner_succeeds(&job, Some((&format!("provision-{runtime_id}-outputs"), KUBECONFIG))).await;
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!((&done["status"], &done["operationId"]), (&json!("succeeded"), &json!(retry_id)), "{done}");
    let runtime = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(runtime["state"], "Ready", "{runtime}");
    process.stop().await;
}
