//! The engine end to end on the real test control plane: the service runs as the `cluster-provisioner`
//! ServiceAccount with the production Role, the test plays kubelet and terraform-runner.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::auth_service::{AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY};
use common::engine::{Engine, MODULES_REPO_URL};
use common::{Backend, provision_body};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use sea_orm::{ConnectionTrait, Database};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";

async fn provisioning_succeeds_and_serves_the_kubeconfig(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-ok")).await;
    let job_name = format!("provision-{runtime_id}");
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;

    // The Job as the engine created it.
    let jobs = engine.jobs_of_operation(&operation_id).await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job.metadata.name.as_deref(), Some(job_name.as_str()));
    let labels = job.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "cluster-provisioner");
    assert_eq!(labels["kubeopera.io/runtime-id"], runtime_id);
    let spec = job.spec.as_ref().unwrap();
    assert_eq!(spec.backoff_limit, Some(0));
    assert!(spec.active_deadline_seconds.unwrap() > 0);
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("terraform-runner"));
    assert_eq!(pod.init_containers.as_ref().unwrap()[0].name, "init");
    assert!(pod.init_containers.as_ref().unwrap()[0].command.as_ref().unwrap().contains(&MODULES_REPO_URL.to_owned()));
    assert_eq!(pod.containers[0].name, "terraform-runner");
    let job_json = serde_json::to_string(job).unwrap();
    assert!(
        !job_json.contains(AWS_SECRET_ACCESS_KEY) && !job_json.contains(AWS_ACCESS_KEY_ID),
        "credentials in the Job"
    );

    // Its inputs, owned by the Job so that they are collected with it.
    let config_map: ConfigMap =
        Api::namespaced(engine.admin.clone(), &engine.namespace).get(&format!("{job_name}-config")).await.unwrap();
    let credentials = engine.secret(&format!("{job_name}-credentials")).await.expect("credentials Secret");
    let job_uid = job.metadata.uid.clone().unwrap();
    for owners in [&config_map.metadata.owner_references, &credentials.metadata.owner_references] {
        assert_eq!(owners.as_ref().unwrap()[0].uid, job_uid);
    }
    assert!(config_map.data.as_ref().unwrap().contains_key("main.tf"));
    assert!(!serde_json::to_string(&config_map).unwrap().contains(AWS_SECRET_ACCESS_KEY));
    let files = credentials.data.unwrap();
    assert_eq!(files["aws_secret_access_key"].0, AWS_SECRET_ACCESS_KEY.as_bytes());

    let running = engine.status(&runtime_id).await;
    assert_eq!(running["status"], "running");
    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.text);

    engine.runner_succeeds(&job_name, Some((&format!("provision-{runtime_id}-outputs"), KUBECONFIG))).await;
    // The runner's identity may only write Secrets: it cannot read the credentials back.
    let runner = engine.control_plane.client_for_service_account(&engine.namespace, "terraform-runner").await.unwrap();
    let denied = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(runner, &engine.namespace)
        .get(&format!("{job_name}-credentials"))
        .await
        .expect_err("terraform-runner must not read Secrets");
    assert!(matches!(denied, kube::Error::Api(ref status) if status.code == 403), "{denied}");
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["stage"], "Done");

    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.text, KUBECONFIG);
    let query = "query($id: String!) { runtimeStatus(id: $id) { runtimeConfiguration { kubeconfig } } }";
    let response = engine.app.graphql(query, json!({ "id": runtime_id })).await;
    assert_eq!(response["data"]["runtimeStatus"]["runtimeConfiguration"]["kubeconfig"], KUBECONFIG, "{response}");
    assert!(engine.secret(&format!("{job_name}-credentials")).await.is_none(), "credentials removed after the run");
    assert_eq!(engine.jobs_of_operation(&operation_id).await.len(), 1);

    let metrics = engine.app.metrics().await;
    assert!(
        metrics.contains(
            r#"provisioner_operations_finished_total{type="Provision",state="Succeeded",reason="succeeded"} 1"#
        ),
        "{metrics}"
    );
    process.stop().await;
}

async fn a_failing_runner_fails_the_operation_with_its_redacted_message(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-fail")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let message = format!("Error: creating VPC: UnauthorizedOperation for key {AWS_SECRET_ACCESS_KEY}");
    engine.runner_fails(&format!("provision-{runtime_id}"), &message).await;

    // The worker records the runner's own termination message once it has handled the Job.
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    let error = &failed["lastError"];
    assert_eq!(error["component"], "terraform-runner", "{failed}");
    assert_eq!(error["reason"], "job_failed");
    let text = error["errMessage"].as_str().unwrap();
    assert!(text.contains("UnauthorizedOperation"), "{text}");
    assert!(!text.contains(AWS_SECRET_ACCESS_KEY), "secret leaked into the status: {text}");
    assert!(text.contains("[REDACTED]"), "{text}");

    // The run is cleaned up, and a failed provisioning can be deprovisioned.
    assert!(engine.secret(&format!("provision-{runtime_id}-credentials")).await.is_none());
    let answer = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    process.stop().await;
}

async fn live_status_shows_a_failed_job_before_the_worker_handles_it(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-live")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    // Stop the worker; only the Job cache of a new process (without MODULES_REPO_URL: no worker) stays.
    process.stop().await;
    let mut engine = engine;
    let reader = engine.start_process(&[("MODULES_REPO_URL", "")]).await;
    engine.runner_fails(&format!("provision-{runtime_id}"), "apply failed: quota exceeded").await;

    let status = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(status["lastError"]["reason"], "job_failed", "{status}");
    assert_eq!(status["lastError"]["component"], "terraform-runner", "{status}");
    let stored = engine.app.app.service.operation_status(&operation_id).await.unwrap();
    assert_eq!(stored.stage, "WaitForJob", "the reconciled status comes from the Job, not from the worker");
    reader.stop().await;
}

async fn a_run_past_its_timeout_fails_with_reason_timeout(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[("APP_PROVISIONING_TIMEOUT", "4s")]).await;
    let (runtime_id, _) = engine.provision(&provision_body("engine-slow")).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(failed["lastError"]["reason"], "timeout", "{failed}");
    assert!(failed["lastError"]["errMessage"].as_str().unwrap().contains("4s"), "{failed}");
    process.stop().await;
}

async fn deprovisioning_cleans_everything_up(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let (runtime_id, _) = engine.provision(&provision_body("engine-gone")).await;
    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&format!("provision-{runtime_id}"), Some((&outputs, KUBECONFIG))).await;
    engine.wait_for_status(&runtime_id, &["succeeded"], WAIT).await;

    let accepted = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let operation_id = accepted.json()["operationId"].as_str().unwrap().to_owned();
    let job_name = format!("deprovision-{runtime_id}");
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let job = &engine.jobs_of_operation(&operation_id).await[0];
    let args = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].args.clone().unwrap();
    assert!(args.contains(&"destroy".to_owned()), "{args:?}");
    engine.runner_succeeds(&job_name, None).await;

    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["operation"], "deprovision");
    assert!(engine.secret(&outputs).await.is_none(), "outputs removed");
    assert!(engine.secret(&format!("{job_name}-credentials")).await.is_none());
    let again = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.json()["error"]["code"], "already_deprovisioned");
    // The name is free again once the runtime is deleted.
    assert_eq!(engine.app.post_provision(&provision_body("engine-gone")).await.status, StatusCode::ACCEPTED);
    process.stop().await;
}

async fn auth_service_down_retries_then_fails_clearly(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[("APP_PROVISIONING_TIMEOUT", "5s")]).await;
    let (runtime_id, _) = engine.provision(&provision_body("engine-auth")).await;
    engine.app.auth.set_unavailable(true);
    let requests_before = engine.app.auth.credential_requests();
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(failed["lastError"]["component"], "auth-service", "{failed}");
    assert!(failed["lastError"]["errMessage"].as_str().unwrap().contains("unavailable"), "{failed}");
    assert!(engine.app.auth.credential_requests() - requests_before > 1, "retried");
    process.stop().await;
}

on_both_databases!(
    provisioning_succeeds_and_serves_the_kubeconfig,
    a_failing_runner_fails_the_operation_with_its_redacted_message,
    deprovisioning_cleans_everything_up,
);

#[tokio::test]
async fn live_status_reads_the_job_cache() {
    live_status_shows_a_failed_job_before_the_worker_handles_it(Backend::Sqlite).await;
}

#[tokio::test]
async fn timeout() {
    a_run_past_its_timeout_fails_with_reason_timeout(Backend::Postgres).await;
}

#[tokio::test]
async fn auth_service_outage() {
    auth_service_down_retries_then_fails_clearly(Backend::Sqlite).await;
}

/// Rewinds a stored operation to `stage` with an expired lease: what a process that died right after
/// finishing the step before `stage` (and before recording it) leaves behind.
async fn rewind(engine: &Engine, operation_id: &str, stage: &str) {
    let db = Database::connect(&engine.app.database.url).await.unwrap();
    let backend = db.get_database_backend();
    let statement = sea_orm::Statement::from_sql_and_values(
        backend,
        match backend {
            sea_orm::DbBackend::Postgres => "UPDATE operation SET stage = $1, lease_expires_at = $2 WHERE id = $3",
            _ => "UPDATE operation SET stage = ?, lease_expires_at = ? WHERE id = ?",
        },
        [stage.into(), chrono::Utc::now().into(), uuid::Uuid::parse_str(operation_id).unwrap().into()],
    );
    db.execute_raw(statement).await.unwrap();
}

/// A process dies after each step; a new one resumes the operation: it completes, with exactly one Job (never
/// recreated) and no credentials left behind.
async fn a_new_process_resumes_after_every_step_boundary(backend: Backend) {
    let lease = [("APP_WORKER_LEASE", "2s")];
    let (mut engine, mut process) = Engine::start(backend, &lease).await;
    let stages = ["ResolveCredential", "RenderConfig", "CreateJob", "WaitForJob", "Finalize", "Cleanup"];
    for (index, stage) in stages.iter().enumerate() {
        let (runtime_id, operation_id) = engine.provision(&provision_body(&format!("resume-{index}"))).await;
        let job_name = format!("provision-{runtime_id}");
        engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
        let first_uid = engine.jobs_of_operation(&operation_id).await[0].metadata.uid.clone();
        let job_done_before_crash = matches!(*stage, "Finalize" | "Cleanup");
        if job_done_before_crash {
            let outputs = format!("provision-{runtime_id}-outputs");
            process.crash();
            engine.runner_succeeds(&job_name, Some((&outputs, KUBECONFIG))).await;
            engine.control_plane.wait_for_job_condition(&engine.namespace, &job_name, "Complete").await.unwrap();
        } else {
            process.crash();
        }
        rewind(&engine, &operation_id, stage).await;
        process = engine.start_process(&lease).await;
        if !job_done_before_crash {
            let outputs = format!("provision-{runtime_id}-outputs");
            engine.runner_succeeds(&job_name, Some((&outputs, KUBECONFIG))).await;
        }
        let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
        assert_eq!(done["status"], "succeeded", "resumed at {stage}: {done}");
        let jobs = engine.jobs_of_operation(&operation_id).await;
        assert_eq!(jobs.len(), 1, "resumed at {stage}");
        assert_eq!(jobs[0].metadata.uid, first_uid, "resumed at {stage}: the Job was recreated");
        assert!(engine.secret(&format!("{job_name}-credentials")).await.is_none(), "resumed at {stage}");
        let operation = engine.app.app.service.operation_status(&operation_id).await.unwrap();
        assert_eq!(operation.attempts, 2, "claimed once by each process (at {stage})");
        println!("resumed at {stage}: succeeded with 1 Job");
    }
    process.stop().await;
}

on_both_databases!(a_new_process_resumes_after_every_step_boundary);

/// Two processes on one PostgreSQL race for 100 operations: each runs exactly once, none is lost.
#[tokio::test]
async fn two_workers_on_postgres_run_each_operation_exactly_once() {
    const OPERATIONS: usize = 100;
    let settings = [("APP_WORKER_CONCURRENCY", "8"), ("APP_WORKER_POLL_INTERVAL", "100ms")];
    let (mut engine, first) = Engine::start(Backend::Postgres, &settings).await;
    let second = engine.start_process(&settings).await;
    let mut runtimes = Vec::new();
    for index in 0..OPERATIONS {
        runtimes.push(engine.provision(&provision_body(&format!("race-{index}"))).await);
    }

    // Play kubelet and runner for every Job as it appears, until all operations ended.
    let jobs: Api<Job> = Api::namespaced(engine.admin.clone(), &engine.namespace);
    let mut finished = std::collections::HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while finished.len() < OPERATIONS {
        assert!(tokio::time::Instant::now() < deadline, "only {} of {OPERATIONS} Jobs finished", finished.len());
        for job in jobs.list(&Default::default()).await.unwrap().items {
            let name = job.metadata.name.clone().unwrap();
            if finished.contains(&name) {
                continue;
            }
            let runtime_id = name.trim_start_matches("provision-");
            engine.runner_succeeds(&name, Some((&format!("provision-{runtime_id}-outputs"), KUBECONFIG))).await;
            finished.insert(name);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let mut attempts_total = 0;
    for (runtime_id, operation_id) in &runtimes {
        let done = engine.wait_for_status(runtime_id, &["succeeded", "failed"], WAIT).await;
        assert_eq!(done["status"], "succeeded", "{done}");
        let operation = engine.app.app.service.operation_status(operation_id).await.unwrap();
        assert_eq!(operation.attempts, 1, "operation {operation_id} was claimed more than once");
        attempts_total += operation.attempts;
    }
    let all_jobs = jobs.list(&Default::default()).await.unwrap().items;
    let distinct: std::collections::HashSet<_> = all_jobs.iter().map(|job| job.metadata.name.clone()).collect();
    println!(
        "race: {OPERATIONS} operations, {} Jobs created, {} duplicates, {} lost, {attempts_total} claims",
        all_jobs.len(),
        all_jobs.len() - distinct.len(),
        OPERATIONS - finished.len()
    );
    assert_eq!(all_jobs.len(), OPERATIONS);
    assert_eq!(attempts_total as usize, OPERATIONS);
    first.stop().await;
    second.stop().await;
}
