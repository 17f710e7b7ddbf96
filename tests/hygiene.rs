//! Secret hygiene: distinctive fake credential values flow through a full provision (with a failing first
//! attempt) and deprovision; afterwards none of them is found in the database, the captured logs, the Job specs,
//! the ConfigMaps (the rendered configuration), the operation messages or the API answers.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use provisioner::api::audit::AuditEntry;
use sea_orm::{ConnectionTrait, Database, Statement};
use serde_json::json;
use test_support::auth_service::{AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, CLIENT_SECRET, GCP_PRIVATE_KEY};
use test_support::engine::Engine;
use test_support::{Backend, CapturedLogs, provision_body};

const WAIT: Duration = Duration::from_secs(60);

/// Every log line of this test binary, at debug level.
fn captured_logs() -> &'static CapturedLogs {
    static LOGS: OnceLock<CapturedLogs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = CapturedLogs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt().with_env_filter("debug").with_writer(move || writer.clone()).json().init();
        logs
    })
}

fn assert_clean(place: &str, text: &str) {
    for secret in [AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID, GCP_PRIVATE_KEY, CLIENT_SECRET] {
        assert!(!text.contains(secret), "{place} contains the secret {secret:?}");
    }
}

#[tokio::test]
async fn credentials_never_leave_the_credentials_secret() {
    let logs = captured_logs();
    let (engine, process) = Engine::start(Backend::Postgres, &[]).await;
    let mut answers = String::new();

    // A provisioning whose runner fails and prints the secret, then a deprovisioning of it, then a successful
    // provisioning and its deprovisioning.
    let (failed_id, failed_operation) = engine.provision(&provision_body("hygiene-a")).await;
    engine.wait_for_stage(&failed_operation, "WaitForJob", WAIT).await;
    let leak = format!("aws: invalid key {AWS_SECRET_ACCESS_KEY} for {AWS_ACCESS_KEY_ID}");
    engine.runner_fails(&format!("provision-{failed_id}"), &leak).await;
    engine.wait_for_stage(&failed_operation, "Done", WAIT).await;
    answers.push_str(&engine.app.get(&format!("/api/v1/provisions/{failed_id}")).await.text);

    let (runtime_id, _) = engine.provision(&provision_body("hygiene-b")).await;
    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&format!("provision-{runtime_id}"), Some((&outputs, "kind: Config\n"))).await;
    engine.wait_for_status(&runtime_id, &["succeeded"], WAIT).await;
    for id in [&failed_id, &runtime_id] {
        let deprovision = engine.app.delete(&format!("/api/v1/provisions/{id}")).await;
        answers.push_str(&deprovision.text);
        engine.runner_succeeds(&format!("deprovision-{id}"), None).await;
        answers.push_str(&engine.wait_for_status(id, &["succeeded"], WAIT).await.to_string());
    }
    for path in [format!("/api/v1/provisions/{runtime_id}"), format!("/api/v1/provisions/{failed_id}/logs")] {
        answers.push_str(&engine.app.get(&path).await.text);
    }
    let query = "query($id: String!) { runtimeStatus(id: $id) { lastOperationStatus { message lastError { errMessage } } \
                 runtimeConfiguration { clusterConfig { credentialId } } } }";
    for id in [&failed_id, &runtime_id] {
        answers.push_str(&engine.app.graphql(query, json!({ "id": id })).await.to_string());
    }
    answers.push_str(
        &engine
            .app
            .graphql("{ runtimes { edges { node { id status { lastOperationStatus { message } } } } } }", json!({}))
            .await
            .to_string(),
    );
    assert!(answers.contains("[REDACTED]") || !answers.contains("invalid key"), "the runner message is redacted");
    assert_clean("the API answers", &answers);
    process.stop().await;

    let failed = engine.operation(&failed_operation).await;
    let message = failed.last_error.expect("the failed run has a last error").err_message;
    assert!(message.contains("[REDACTED]"), "{message}");
    assert_clean("the operation message", &message);

    let db = Database::connect(&engine.app.database.url).await.unwrap();
    let mut rows = String::new();
    for table in ["runtime", "operation", "idempotency_key"] {
        let statement = Statement::from_string(
            db.get_database_backend(),
            format!("SELECT row_to_json(t)::text AS row FROM {table} t"),
        );
        for row in db.query_all_raw(statement).await.unwrap() {
            rows.push_str(&row.try_get::<String>("", "row").unwrap());
        }
    }
    assert!(rows.contains("cred-aws-1"), "the credential reference is stored: {rows}");
    assert_clean("the database", &rows);

    let jobs: Api<Job> = Api::namespaced(engine.admin.clone(), &engine.namespace);
    let jobs = serde_json::to_string(&jobs.list(&Default::default()).await.unwrap().items).unwrap();
    assert!(jobs.contains("deprovision-"), "all four Jobs are still there to inspect");
    assert_clean("the Job specs", &jobs);
    let pods: Api<Pod> = Api::namespaced(engine.admin.clone(), &engine.namespace);
    let pod_specs: Vec<_> =
        pods.list(&Default::default()).await.unwrap().items.into_iter().map(|pod| pod.spec).collect();
    assert_clean("the pod specs", &serde_json::to_string(&pod_specs).unwrap());
    let config_maps: Api<ConfigMap> = Api::namespaced(engine.admin.clone(), &engine.namespace);
    let config_maps = serde_json::to_string(&config_maps.list(&Default::default()).await.unwrap().items).unwrap();
    assert!(config_maps.contains("main.tf"), "the rendered configurations are checked");
    assert_clean("the ConfigMaps", &config_maps);

    let logs = logs.text();
    assert!(logs.contains("provisioning queued"), "logs were captured");
    assert_clean("the logs", &logs);
    assert_audit_logged(&logs, &engine.app.audit.entries());
}

/// Every audit entry is also a JSON line at target `audit` naming the caller, the API and what it is about (this
/// binary's subscriber is its only, global one, so every line of its one test is captured).
fn assert_audit_logged(logs: &str, entries: &[AuditEntry]) {
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["target"] == "audit")
        .collect();
    assert_eq!(lines.len(), entries.len(), "{lines:?}");
    assert_eq!(entries.len(), 5, "two provisionings, two deprovisionings and a read of logs: {entries:?}");
    for (line, entry) in lines.iter().zip(entries) {
        let fields = &line["fields"];
        assert_eq!(fields["message"], entry.event.as_str(), "{line}");
        assert_eq!(fields["user"], entry.user.as_str(), "{line}");
        assert_eq!(fields["api"], entry.api.as_str(), "{line}");
        let id = |id: Option<uuid::Uuid>| serde_json::json!(id.map(|id| id.to_string()));
        assert_eq!(fields["operation_id"], id(entry.operation_id), "{line}");
        assert_eq!(fields["runtime_id"], id(entry.runtime_id), "{line}");
    }
}
