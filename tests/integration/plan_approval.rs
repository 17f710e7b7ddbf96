//! Plans approved by their hash: a runtime's approval policy holds plans back (`AwaitingApproval`, with the plan's
//! digest and expiry in both APIs); only an approval naming that digest queues the run that applies it; a
//! rejection or an approval time that ran out ends the operation with nothing applied. On both databases, and on
//! the test control plane with the real worker, where the approved plan runs in a Job of its own.

use std::time::Duration;

use axum::http::StatusCode;
use provisioner::api::audit::AuditEvent;
use serde_json::{Value, json};
use test_support::engine::{Engine, RUNNER_PLAN_SUMMARY};
use test_support::{Backend, TestApp, on_both_databases, provision_body, spawn_app_with};

const WAIT: Duration = Duration::from_secs(60);
/// Who the test app's requests come from.
const CALLER: &str = "system:anonymous";
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";
const APPROVE: &str = "mutation($id: String!, $sha: String!) { approveOperation(id: $id, planSha256: $sha) { id state stage approvedBy } }";
const REJECT: &str = "mutation($id: String!) { rejectOperation(id: $id) { id state lastError { reason } } }";
const POLICY: &str = "mutation($id: String!, $policy: ApprovalPolicy!) { setApprovalPolicy(id: $id, policy: $policy) { id approvalPolicy } }";
const OPERATION: &str =
    "query($id: String!) { runtimeOperationStatus(id: $id) { state stage planSha256 approvalExpiresAt } }";

fn digest(fill: char) -> String {
    fill.to_string().repeat(64)
}

async fn approve(app: &TestApp, operation_id: &str, plan_sha256: &str) -> (StatusCode, Value) {
    let body = json!({ "planSha256": plan_sha256 });
    let answer = app.request("POST", &format!("/api/v1/operations/{operation_id}/approve"), Some(&body), &[]).await;
    (answer.status, answer.json())
}

/// A provisioning body whose runtime holds back every plan.
fn manual(name: &str) -> Value {
    let mut body = provision_body(name);
    body["runtimeInput"]["approvalPolicy"] = json!("manual");
    body
}

async fn a_waiting_plan_is_approved_only_by_its_digest_and_in_time(backend: Backend) {
    let app = spawn_app_with(backend, &[], None).await;
    let created = app.request("POST", "/api/v1/runtimes", Some(&manual("approve-me")), &[]).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text);
    let runtime_id = created.json()["runtimeId"].as_str().unwrap().to_owned();
    let runtime = app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(runtime["approvalPolicy"], "manual", "{runtime}");
    let waiting = app.hold_queued_operation_for_approval(&digest('a'), Duration::from_secs(3600)).await;

    let shown = app.get(&format!("/api/v1/operations/{waiting}")).await.json();
    assert_eq!(
        (&shown["status"], &shown["stage"], &shown["planSha256"]),
        (&json!("awaiting_approval"), &json!("AwaitingApproval"), &json!(digest('a'))),
        "{shown}"
    );
    assert!(shown["approvalExpiresAt"].is_string() && shown["done"] == json!(false), "{shown}");
    assert_eq!(shown["planSummary"]["risk"], "risky", "{shown}");
    let response = app.graphql(OPERATION, json!({ "id": waiting })).await;
    assert_eq!(response["data"]["runtimeOperationStatus"]["state"], "AwaitingApproval", "{response}");
    // On-call sees what waits for a person.
    let metrics = app.metrics().await;
    assert!(metrics.contains("provisioner_operations_awaiting_approval 1\n"), "{metrics}");
    // The runtime's one operation at a time: another change waits for the decision.
    let busy = app.request("POST", &format!("/api/v1/runtimes/{runtime_id}/hibernate"), None, &[]).await;
    assert_eq!(busy.status, StatusCode::CONFLICT, "{}", busy.text);

    let (status, malformed) = approve(&app, &waiting, "A1").await;
    assert_eq!((status, &malformed["field"]), (StatusCode::BAD_REQUEST, &json!("planSha256")), "{malformed}");
    let (status, other) = approve(&app, &waiting, &digest('b')).await;
    assert_eq!((status, &other["code"]), (StatusCode::CONFLICT, &json!("plan_mismatch")), "{other}");
    assert_eq!(app.get(&format!("/api/v1/operations/{waiting}")).await.json()["status"], "awaiting_approval");

    let response = app.graphql(APPROVE, json!({ "id": waiting, "sha": digest('a') })).await;
    assert_eq!(
        response["data"]["approveOperation"],
        json!({ "id": waiting, "state": "Pending", "stage": "Approved", "approvedBy": CALLER }),
        "{response}"
    );
    // A repeated approval gets the queued operation; a rejection comes too late.
    let (status, again) = approve(&app, &waiting, &digest('a')).await;
    assert_eq!(
        (status, &again["status"], &again["approvedBy"]),
        (StatusCode::ACCEPTED, &json!("queued"), &json!(CALLER))
    );
    let response = app.graphql(REJECT, json!({ "id": waiting })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "not_awaiting_approval", "{response}");
    let events: Vec<AuditEvent> = app.audit.entries().iter().map(|entry| entry.event).collect();
    assert_eq!(events.iter().filter(|event| **event == AuditEvent::PlanApproved).count(), 1, "{events:?}");

    // An approval after the expiry is refused and ends the operation, which frees the runtime.
    app.run_queued_operation(&[], provisioner::domain::OperationState::Succeeded).await;
    let upgrade =
        app.patch(&format!("/api/v1/runtimes/{runtime_id}"), &json!({ "workerPool": { "maxSize": 9 } })).await;
    assert_eq!(upgrade.status, StatusCode::ACCEPTED, "{}", upgrade.text);
    let late = app.hold_queued_operation_for_approval(&digest('c'), Duration::from_millis(200)).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, expired) = approve(&app, &late, &digest('c')).await;
    assert_eq!((status, &expired["code"]), (StatusCode::CONFLICT, &json!("approval_expired")), "{expired}");
    let ended = app.get(&format!("/api/v1/operations/{late}")).await.json();
    assert_eq!(
        (&ended["status"], &ended["lastError"]["reason"]),
        (&json!("failed"), &json!("approval_expired")),
        "{ended}"
    );
}

async fn a_rejected_plan_ends_its_operation_and_the_policy_is_changed_alone(backend: Backend) {
    let app = spawn_app_with(backend, &[], None).await;
    let runtime_id = app.provisioned(&provision_body("reject-me")).await;
    let resource = format!("/api/v1/runtimes/{runtime_id}");
    assert_eq!(app.get(&resource).await.json()["approvalPolicy"], "auto");
    let mixed = app.patch(&resource, &json!({ "approvalPolicy": "manual", "kubernetesVersion": "1.35" })).await;
    assert_eq!((mixed.status, mixed.json()["field"].clone()), (StatusCode::BAD_REQUEST, json!("approvalPolicy")));
    let changed = app.patch(&resource, &json!({ "approvalPolicy": "safeOnly" })).await;
    assert_eq!((changed.status, changed.json()["approvalPolicy"].clone()), (StatusCode::OK, json!("safeOnly")));
    let response = app.graphql(POLICY, json!({ "id": runtime_id, "policy": "Manual" })).await;
    assert_eq!(
        response["data"]["setApprovalPolicy"],
        json!({ "id": runtime_id, "approvalPolicy": "Manual" }),
        "{response}"
    );
    let events: Vec<AuditEvent> = app.audit.entries().iter().map(|entry| entry.event).collect();
    assert_eq!(events.iter().filter(|event| **event == AuditEvent::ApprovalPolicyChanged).count(), 2, "{events:?}");

    let upgrade = app.patch(&resource, &json!({ "workerPool": { "maxSize": 8 } })).await;
    assert_eq!(upgrade.status, StatusCode::ACCEPTED, "{}", upgrade.text);
    let waiting = app.hold_queued_operation_for_approval(&digest('d'), Duration::from_secs(3600)).await;
    let rejected = app.request("POST", &format!("/api/v1/operations/{waiting}/reject"), None, &[]).await;
    assert_eq!(rejected.status, StatusCode::ACCEPTED, "{}", rejected.text);
    let rejected = rejected.json();
    assert_eq!(
        (&rejected["status"], &rejected["lastError"]["reason"]),
        (&json!("failed"), &json!("plan_rejected")),
        "{rejected}"
    );
    assert!(rejected["lastError"]["errMessage"].as_str().unwrap().contains(CALLER), "{rejected}");
    let again = app.request("POST", &format!("/api/v1/operations/{waiting}/reject"), None, &[]).await;
    assert_eq!(again.status, StatusCode::OK, "a repeated rejection changes nothing");
    let (status, refused) = approve(&app, &waiting, &digest('d')).await;
    assert_eq!((status, &refused["code"]), (StatusCode::CONFLICT, &json!("not_awaiting_approval")), "{refused}");
    // The configuration stays as it was; a retry plans again.
    let runtime = app.get(&resource).await.json();
    assert_eq!(
        runtime["clusterConfig"]["workerPool"]["maxSize"],
        provision_body("x")["clusterConfig"]["workerPool"]["maxSize"]
    );
    let retry = app.request("POST", &format!("/api/v1/operations/{waiting}/retry"), None, &[]).await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "{}", retry.text);
}

on_both_databases!(
    a_waiting_plan_is_approved_only_by_its_digest_and_in_time,
    a_rejected_plan_ends_its_operation_and_the_policy_is_changed_alone
);

/// The real worker: the runner's report holds the plan back, the operation waits with its digest (the plan's Job
/// stays as it ended), the approval starts a Job of its own whose `runner.json` names the approved digest, and a
/// plan the state moved past fails as `stale_plan`; a retry plans again. Unapproved plans expire.
#[tokio::test]
async fn the_worker_holds_a_plan_back_and_runs_the_approved_one_in_a_job_of_its_own() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[("APP_PLAN_APPROVAL_TTL", "2s")]).await;
    let (runtime_id, operation) = engine.provision(&manual("approve-engine")).await;
    let job = format!("provision-{runtime_id}");
    engine.wait_for_stage(&operation, "WaitForJob", WAIT).await;
    let waiting_report = |sha: &str| {
        let mut report: Value = serde_json::from_str(RUNNER_PLAN_SUMMARY).unwrap();
        report["savedPlanSha256"] = json!(sha);
        report.to_string()
    };
    engine.runner_exits(&job, 0, &waiting_report(&digest('e'))).await;
    engine.wait_for_stage(&operation, "AwaitingApproval", WAIT).await;
    let shown = engine.app.get(&format!("/api/v1/operations/{operation}")).await.json();
    assert_eq!((&shown["status"], &shown["planSha256"]), (&json!("awaiting_approval"), &json!(digest('e'))), "{shown}");
    assert!(engine.credentials_secrets().await.is_empty(), "the waiting run cleaned up its credentials");

    let (status, approved) = approve(&engine.app, &operation, &digest('e')).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{approved}");
    let approved_job = format!("{job}-approved");
    engine.wait_for_stage(&operation, "WaitForJob", WAIT).await;
    let jobs: Vec<String> =
        engine.jobs_of_operation(&operation).await.into_iter().filter_map(|job| job.metadata.name).collect();
    assert!(jobs.contains(&job) && jobs.contains(&approved_job), "{jobs:?}");
    let manifest = engine.config_map_file(&format!("{approved_job}-config"), "runner.json").await;
    let manifest: Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        (&manifest["approvedPlanSha256"], &manifest["approvalPolicy"]),
        (&json!(digest('e')), &json!("manual")),
        "{manifest}"
    );
    engine.runner_succeeds(&approved_job, Some((&format!("{job}-outputs"), KUBECONFIG))).await;
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");

    // An upgrade waits; its approved plan is stale by the time it runs.
    let upgrade =
        engine.app.patch(&format!("/api/v1/runtimes/{runtime_id}"), &json!({ "workerPool": { "maxSize": 9 } })).await;
    assert_eq!(upgrade.status, StatusCode::ACCEPTED, "{}", upgrade.text);
    let upgrading = upgrade.json()["id"].as_str().unwrap().to_owned();
    let upgrade_job = format!("upgrade-{runtime_id}");
    engine.wait_for_stage(&upgrading, "WaitForJob", WAIT).await;
    engine.runner_exits(&upgrade_job, 0, &waiting_report(&digest('f'))).await;
    engine.wait_for_stage(&upgrading, "AwaitingApproval", WAIT).await;
    assert_eq!(approve(&engine.app, &upgrading, &digest('f')).await.0, StatusCode::ACCEPTED);
    let stale = "the approved plan cannot be applied: the state changed since the plan was made; nothing was changed, plan again";
    engine.wait_for_stage(&upgrading, "WaitForJob", WAIT).await;
    engine.runner_exits(&format!("{upgrade_job}-approved"), 4, stale).await;
    // The Job alone already says why (its rule of the pod failure policy); the worker records the runner's words.
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(failed["lastError"]["reason"], "stale_plan", "{failed}");
    engine.wait_for_stage(&upgrading, "Done", WAIT).await;
    let ended = engine.app.get(&format!("/api/v1/operations/{upgrading}")).await.json();
    assert_eq!(
        (&ended["lastError"]["reason"], &ended["lastError"]["errMessage"]),
        (&json!("stale_plan"), &json!(stale)),
        "{ended}"
    );

    // A retry plans again; nobody approves it in time.
    let retry = engine.app.request("POST", &format!("/api/v1/operations/{upgrading}/retry"), None, &[]).await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "{}", retry.text);
    let retried = retry.json()["id"].as_str().unwrap().to_owned();
    engine.wait_for_stage(&retried, "WaitForJob", WAIT).await;
    engine.runner_exits(&upgrade_job, 0, &waiting_report(&digest('0'))).await;
    let expired = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(
        (&expired["operationId"], &expired["lastError"]["reason"]),
        (&json!(retried), &json!("approval_expired")),
        "{expired}"
    );
    process.stop().await;
}

/// An upgrade's own approval policy holds for its run only: its Job's `runner.json` names it, the runtime keeps
/// its own, and an unknown one is refused naming the field, on both APIs.
#[tokio::test]
async fn an_upgrade_carries_its_own_approval_policy_for_its_run_only() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let runtime_id = engine.provisioned(&provision_body("own-policy"), KUBECONFIG).await;

    let resource = format!("/api/v1/runtimes/{runtime_id}");
    let upgrade = json!({ "workerPool": { "maxSize": 8 } });
    let unknown = engine.app.patch(&format!("{resource}?approvalPolicy=lax"), &upgrade).await;
    assert_eq!((unknown.status, unknown.json()["field"].clone()), (StatusCode::BAD_REQUEST, json!("approvalPolicy")));
    let accepted = engine.app.patch(&format!("{resource}?approvalPolicy=manual"), &upgrade).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let operation = accepted.json();
    assert_eq!(operation["approvalPolicy"], "manual", "{operation}");
    let operation = operation["id"].as_str().unwrap().to_owned();
    engine.wait_for_stage(&operation, "WaitForJob", WAIT).await;
    let manifest: Value =
        serde_json::from_str(&engine.config_map_file(&format!("upgrade-{runtime_id}-config"), "runner.json").await)
            .unwrap();
    assert_eq!(manifest["approvalPolicy"], "manual", "{manifest}");
    assert_eq!(engine.app.get(&resource).await.json()["approvalPolicy"], "auto", "the runtime keeps its own");
    let response = engine
        .app
        .graphql(
            "query($id: String!) { runtimeOperationStatus(id: $id) { approvalPolicy } }",
            json!({ "id": operation }),
        )
        .await;
    assert_eq!(response["data"]["runtimeOperationStatus"]["approvalPolicy"], "Manual", "{response}");
    process.stop().await;
}
