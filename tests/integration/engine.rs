//! The engine end to end on the real test control plane: the service runs as the `cluster-provisioner`
//! ServiceAccount with the production Role, the test plays kubelet and terraform-runner.

use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use provisioner::api::audit::{ApiKind, AuditEvent};
use provisioner::domain::{Cloud, ProviderVersion};
use serde_json::{Value, json};
use test_support::auth_service::{AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, gcp_credential};
use test_support::documents;
use test_support::engine::{Engine, MODULES_REPO_COMMIT, MODULES_REPO_URL, RUNNER_PLAN_SUMMARY, RunLog};
use test_support::fault_proxy::{FaultProxy, socket_address};
use test_support::subscriber::Subscriber;
use test_support::{Backend, eks_body, gke_body, on_both_databases, provision_body};

const WAIT: Duration = Duration::from_secs(60);
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";
/// The previous release's Jobs' shared ServiceAccount, which the chart keeps for one release.
const PREVIOUS_RUNNER: &str = "terraform-runner";

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
    assert_eq!(pod.service_account_name.as_deref(), Some(job_name.as_str()), "the run's own identity");
    assert_eq!(pod.init_containers.as_ref().unwrap()[0].name, "init");
    let init_env = pod.init_containers.as_ref().unwrap()[0].env.clone().unwrap_or_default();
    let variable = |name: &str| init_env.iter().find(|var| var.name == name).and_then(|var| var.value.clone());
    assert_eq!(variable("MODULES_REPO_URL").as_deref(), Some(MODULES_REPO_URL));
    assert_eq!(variable("MODULES_REPO_COMMIT").as_deref(), Some(MODULES_REPO_COMMIT));
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

    // The runner's identity may only update its outputs Secret: it cannot read the credentials back.
    let runner = engine.control_plane.client_for_service_account(&engine.namespace, &job_name).await.unwrap();
    let denied = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(runner, &engine.namespace)
        .get(&format!("{job_name}-credentials"))
        .await
        .expect_err("terraform-runner must not read Secrets");
    assert!(matches!(denied, kube::Error::Api(ref status) if status.code == 403), "{denied}");
    engine.runner_succeeds(&job_name, Some((&format!("provision-{runtime_id}-outputs"), KUBECONFIG))).await;
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["stage"], "Done");
    // What the runner's plan changed, from its termination message, on both APIs.
    let summary: Value = serde_json::from_str(RUNNER_PLAN_SUMMARY).unwrap();
    assert_eq!(done["planSummary"], summary, "{done}");
    let query = "query($id: String!) { runtimeStatus(id: $id) { lastOperationStatus { planSummary { add change destroy replaced destroyed risk risky destructive swept orphans foreign } } } }";
    let response = engine.app.graphql(query, json!({ "id": runtime_id })).await;
    // GraphQL spells the risk as Kyma spells enums.
    let mut graphql_summary = summary.clone();
    graphql_summary["risk"] = json!("Risky");
    assert_eq!(response["data"]["runtimeStatus"]["lastOperationStatus"]["planSummary"], graphql_summary, "{response}");

    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.text, KUBECONFIG);
    let query = documents::KUBECONFIG;
    let response = engine.app.graphql(query, json!({ "id": runtime_id })).await;
    assert_eq!(response["data"]["runtimeStatus"]["runtimeConfiguration"]["kubeconfig"], KUBECONFIG, "{response}");
    assert!(engine.secret(&format!("{job_name}-credentials")).await.is_none(), "credentials removed after the run");
    assert_eq!(engine.jobs_of_operation(&operation_id).await.len(), 1);
    // Both reads of the kubeconfig are in the audit trail, naming the runtime.
    let reads: Vec<_> =
        engine.app.audit.entries().into_iter().filter(|entry| entry.event == AuditEvent::KubeconfigRead).collect();
    let apis: Vec<_> = reads.iter().map(|entry| entry.api).collect();
    assert_eq!(apis, [ApiKind::Rest, ApiKind::Graphql], "{reads:?}");
    assert!(
        reads.iter().all(|entry| entry.runtime_id.map(|id| id.to_string()) == Some(runtime_id.clone())),
        "{reads:?}"
    );

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

async fn an_upgrade_whose_plan_is_destructive_fails_and_keeps_the_configuration(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let body = eks_body("engine-destructive");
    let runtime_id = engine.provisioned(&body, KUBECONFIG).await;

    let max_size = body["clusterConfig"]["workerPool"]["maxSize"].as_i64().unwrap();
    let upgrade = json!({ "workerPool": { "maxSize": max_size + 1 } });
    let accepted = engine.app.patch(&format!("/api/v1/provisions/{runtime_id}"), &upgrade).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let operation_id = accepted.json()["operationId"].as_str().unwrap().to_owned();
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    // What terraform-runner ends with when the saved plan replaces a protected resource (exit code 3).
    let refusal = "the plan would destroy or replace protected resources (module.eks.aws_eks_cluster.this); \
                   nothing was changed";
    engine.runner_exits(&format!("upgrade-{runtime_id}"), 3, refusal).await;

    // The first failed status (the live one, from the cached Job: its pod failure policy names the refusal) and
    // the recorded one (from the runner's exit code and message) give the same reason.
    let live = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    let cause = |status: &Value| {
        let error = &status["lastError"];
        (error["reason"].as_str().map(str::to_owned), error["component"].as_str().map(str::to_owned))
    };
    let expected = (Some("destructive_plan".to_owned()), Some("terraform-runner".to_owned()));
    assert_eq!(cause(&live), expected, "{live}");
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(cause(&failed), expected, "{failed}");
    let error = &failed["lastError"];
    assert_eq!((error["errMessage"].as_str(), failed["operation"].as_str()), (Some(refusal), Some("upgrade")));
    let query = documents::WORKER_MAX_SIZE;
    let response = engine.app.graphql(query, json!({ "id": runtime_id })).await;
    let kept = &response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"]["workerPool"]["maxSize"];
    assert_eq!(kept.as_i64(), Some(max_size), "the configuration last applied stays: {response}");
    // The same plan would be refused again: a retry is refused, naming the reason.
    let retry = engine.app.request("POST", &format!("/api/v1/operations/{operation_id}/retry"), None, &[]).await;
    assert_eq!((retry.status, retry.json()["code"].clone()), (StatusCode::CONFLICT, json!("not_retryable")));
    process.stop().await;
}

/// Plays the TTL controller a week after a run: the Job and its pods go.
async fn delete_job_and_pods(engine: &Engine, job: &str) {
    let jobs: Api<Job> = Api::namespaced(engine.admin.clone(), &engine.namespace);
    jobs.delete(job, &DeleteParams::background()).await.expect("delete the Job");
    let pods: Api<Pod> = Api::namespaced(engine.admin.clone(), &engine.namespace);
    let selector = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    pods.delete_collection(&DeleteParams::default(), &selector).await.expect("delete the pods");
    for _ in 0..100 {
        if pods.list(&selector).await.unwrap().items.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the pods of Job {job} did not go");
}

async fn a_runs_logs_are_kept_redacted_and_capped_after_its_pod_is_gone(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[("APP_RUN_LOG_MAX_BYTES", "65536")]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-logs")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let job = format!("provision-{runtime_id}");
    // The live pod's logs while it runs; a credential value that slipped through the runner's own redaction.
    let init_log = "Cloning into '/modules'...\n";
    let progress = "module.vpc.aws_subnet.private[0]: Still creating... [10s elapsed]\n".repeat(2000);
    let runner_log = format!(
        "Initializing the backend...\n{progress}Error: creating VPC: UnauthorizedOperation for key {AWS_SECRET_ACCESS_KEY}\n"
    );
    engine
        .runner_prints_and_exits(&job, &[("init", init_log), ("terraform-runner", &runner_log)], 1, "apply failed")
        .await;
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    delete_job_and_pods(&engine, &job).await;

    // Kept: both containers, redacted again, the runner's log cut to its head and tail within the cap.
    let answer = engine.app.get(&format!("/api/v1/operations/{operation_id}/logs")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let text = &answer.text;
    assert!(
        text.starts_with(
            "==> init <==\nCloning into '/modules'...\n==> terraform-runner <==\nInitializing the backend...\n"
        ),
        "{}",
        &text[..300]
    );
    assert!(text.contains("bytes left out"), "capped");
    assert!(
        text.trim_end().ends_with("Error: creating VPC: UnauthorizedOperation for key [REDACTED]"),
        "{}",
        &text[text.len() - 300..]
    );
    assert!(!text.contains(AWS_SECRET_ACCESS_KEY), "a credential value in the kept log");
    assert!(text.len() <= 65536 + 100, "{} bytes kept", text.len());

    // The same through the runtime (its last operation, or that one by id) and GraphQL, with a tail.
    let tail = engine.app.get(&format!("/api/v1/operations/{operation_id}/logs?tailLines=1")).await.text;
    let expected_tail = "==> init <==\nCloning into '/modules'...\n==> terraform-runner <==\n\
                         Error: creating VPC: UnauthorizedOperation for key [REDACTED]\n";
    assert_eq!(tail, expected_tail);
    let by_runtime = format!("/api/v1/provisions/{runtime_id}/logs");
    assert_eq!(engine.app.get(&format!("{by_runtime}?tailLines=1")).await.text, expected_tail);
    assert_eq!(
        engine.app.get(&format!("{by_runtime}?operationId={operation_id}&tailLines=1")).await.text,
        expected_tail
    );
    let query = "query($id: String!) { runtimeOperationStatus(id: $id) { logs(tailLines: 1) { container log } } }";
    let response = engine.app.graphql(query, json!({ "id": operation_id })).await;
    let logs = &response["data"]["runtimeOperationStatus"]["logs"];
    assert_eq!(logs[1]["container"], "terraform-runner", "{response}");
    // Every read of the logs is in the audit trail, naming what the request named.
    let reads: Vec<_> =
        engine.app.audit.entries().into_iter().filter(|entry| entry.event == AuditEvent::LogsRead).collect();
    let operation = Some(uuid::Uuid::parse_str(&operation_id).unwrap());
    assert!(reads.iter().any(|entry| entry.api == ApiKind::Rest && entry.operation_id == operation), "{reads:?}");
    assert!(reads.iter().any(|entry| entry.api == ApiKind::Graphql && entry.operation_id == operation), "{reads:?}");
    let runtime = Some(uuid::Uuid::parse_str(&runtime_id).unwrap());
    assert!(reads.iter().any(|entry| entry.runtime_id == runtime), "{reads:?}");
    assert_eq!(logs[1]["log"], "Error: creating VPC: UnauthorizedOperation for key [REDACTED]\n", "{response}");

    // An operation of another runtime is not this runtime's; an unknown one is not found.
    let (other_runtime, _) = engine.provision(&provision_body("engine-logs-other")).await;
    let other = engine.app.get(&format!("/api/v1/provisions/{other_runtime}/logs?operationId={operation_id}")).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.text);
    let unknown = engine.app.get(&format!("/api/v1/operations/{}/logs", uuid::Uuid::now_v7())).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
    let zero = engine.app.get(&format!("/api/v1/operations/{operation_id}/logs?tailLines=0")).await;
    assert_eq!((zero.status, zero.json()["field"].clone()), (StatusCode::BAD_REQUEST, json!("tailLines")));
    process.stop().await;
}

async fn a_clean_up_that_runs_again_after_a_crash_keeps_the_first_archive(backend: Backend) {
    let (mut engine, process) = Engine::start(backend, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-rearchive")).await;
    let job = format!("provision-{runtime_id}");
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    engine
        .runner_prints_and_exits(&job, &[("init", "cloned\n"), ("terraform-runner", "applying\n")], 1, "failed")
        .await;
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let path = format!("/api/v1/operations/{operation_id}/logs");
    let archived = engine.app.get(&path).await.text;
    assert!(archived.contains("applying"), "{archived}");

    // The database as a crash right after the archive left it: the run still in its clean-up, and by the time a
    // new process resumes it, the pod is gone.
    process.crash();
    delete_job_and_pods(&engine, &job).await;
    let in_cleanup: [(&str, sea_orm::Value); 4] = [
        ("state", "InProgress".into()),
        ("stage", "Cleanup".into()),
        ("finished_at", sea_orm::Value::ChronoDateTimeUtc(None)),
        ("lease_expires_at", chrono::Utc::now().into()),
    ];
    engine.app.database.set_operation_columns(&operation_id, in_cleanup).await;
    let process = engine.start_process(&[]).await;
    engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    assert_eq!(engine.app.get(&path).await.text, archived, "the first archive stays");
    process.stop().await;
}

/// The next piece of a streamed body, as text; `None` once it ended.
async fn next_chunk(body: &mut axum::body::Body) -> Option<String> {
    use http_body_util::BodyExt as _;
    loop {
        let frame = tokio::time::timeout(WAIT, body.frame()).await.expect("a chunk or the end within a minute")?;
        if let Ok(data) = frame.expect("the stream goes on").into_data() {
            return Some(String::from_utf8(data.to_vec()).unwrap());
        }
    }
}

async fn a_running_operations_log_is_streamed_until_its_container_ends(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-follow")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    // Followed from the moment the Job exists: its pod may not yet, and its container has not started.
    let path = format!("/api/v1/operations/{operation_id}/logs?follow=true");
    let response = engine.app.stream(&path).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/plain; charset=utf-8");
    let mut body = response.into_body();
    let pod = engine.runner_starts(&format!("provision-{runtime_id}")).await;
    let (control_plane, namespace) = (engine.control_plane, engine.namespace.as_str());
    control_plane.write_log(namespace, &pod, "terraform-runner", "Initializing the backend...\n");

    assert_eq!(next_chunk(&mut body).await.as_deref(), Some("Initializing the backend...\n"));
    control_plane.write_log(namespace, &pod, "terraform-runner", "Plan: 3 to add, 0 to change, 0 to destroy.\n");
    assert_eq!(next_chunk(&mut body).await.as_deref(), Some("Plan: 3 to add, 0 to change, 0 to destroy.\n"));
    // A dropped connection to the node: the stream resumes after what it sent, with nothing twice.
    control_plane.break_log_streams();
    control_plane.write_log(namespace, &pod, "terraform-runner", "Apply complete!\n");
    assert_eq!(next_chunk(&mut body).await.as_deref(), Some("Apply complete!\n"));
    // The container ends: so does the stream.
    control_plane.end_log(namespace, &pod, "terraform-runner");
    control_plane.terminate_pod(namespace, &pod, "terraform-runner", 1, "failed").await.unwrap();
    assert_eq!(next_chunk(&mut body).await, None);

    // Once the run ended, a follower gets the kept log at once.
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let kept = engine.app.get(&path).await;
    assert_eq!(kept.text, "Initializing the backend...\nPlan: 3 to add, 0 to change, 0 to destroy.\nApply complete!\n");
    let both = engine.app.get(&format!("{path}&tailLines=2")).await;
    assert_eq!((both.status, both.json()["field"].clone()), (StatusCode::BAD_REQUEST, json!("tailLines")));
    process.stop().await;
}

/// The subscription on a running operation: its status, the runner's lines as the node prints them (read before the
/// run ends), and its final state last, then the end; a second subscriber, without logs, shares the operation's
/// watch and gets the same states.
#[tokio::test]
async fn a_subscription_follows_a_running_operation_with_its_runners_lines() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-events")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let query = "subscription($id: String!, $logs: Boolean!) { operationEvents(id: $id, logs: $logs) { \
                 status { state stage lastError { reason } } logLine } }";
    let subscribe =
        |logs: bool| Subscriber::subscribed(&engine.app, json!({}), query, json!({ "id": operation_id, "logs": logs }));
    let (mut with_logs, mut without_logs) = (subscribe(true).await, subscribe(false).await);
    let event = |message: Value| message["payload"]["data"]["operationEvents"].clone();
    for subscriber in [&mut with_logs, &mut without_logs] {
        let status = event(subscriber.next().await)["status"].clone();
        assert_eq!((status["state"].as_str(), status["stage"].as_str()), (Some("InProgress"), Some("WaitForJob")));
    }

    let pod = engine.runner_starts(&format!("provision-{runtime_id}")).await;
    let (control_plane, namespace) = (engine.control_plane, engine.namespace.as_str());
    for line in ["Initializing the backend...", "Plan: 3 to add, 0 to change, 0 to destroy."] {
        control_plane.write_log(namespace, &pod, "terraform-runner", &format!("{line}\n"));
        assert_eq!(event(with_logs.next().await), json!({ "status": null, "logLine": line }));
    }

    control_plane.end_log(namespace, &pod, "terraform-runner");
    control_plane.terminate_pod(namespace, &pod, "terraform-runner", 1, "Error: creating VPC").await.unwrap();
    for subscriber in [&mut with_logs, &mut without_logs] {
        let mut last = Value::Null;
        loop {
            let message = subscriber.next().await;
            if message["type"] == "complete" {
                break;
            }
            let event = event(message);
            assert!(event["logLine"].is_null(), "no line after the container ended: {event}");
            last = event["status"].clone();
        }
        assert_eq!(
            (last["state"].as_str(), last["lastError"]["reason"].as_str()),
            (Some("Failed"), Some("job_failed"))
        );
    }
    process.stop().await;
}

/// Everyone who follows one run reads it through one follower: three followed logs and a subscription with
/// logs cost the API server one log stream, and one who joins late gets the lines printed before.
#[tokio::test]
async fn the_followers_of_a_run_share_one_log_stream() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-shared-follow")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let pod = engine.runner_starts(&format!("provision-{runtime_id}")).await;
    let (control_plane, namespace) = (engine.control_plane, engine.namespace.as_str());
    let path = format!("/api/v1/operations/{operation_id}/logs?follow=true");
    let mut first = engine.app.stream(&path).await.into_body();
    control_plane.write_log(namespace, &pod, "terraform-runner", "Initializing the backend...\n");
    assert_eq!(next_chunk(&mut first).await.as_deref(), Some("Initializing the backend...\n"));

    let query = "subscription($id: String!) { operationEvents(id: $id, logs: true) { logLine } }";
    let mut subscriber = Subscriber::subscribed(&engine.app, json!({}), query, json!({ "id": operation_id })).await;
    let mut late = Vec::new();
    for _ in 0..2 {
        let mut body = engine.app.stream(&path).await.into_body();
        assert_eq!(next_chunk(&mut body).await.as_deref(), Some("Initializing the backend...\n"), "a late joiner");
        late.push(body);
    }
    assert_eq!(next_log_line(&mut subscriber).await, "Initializing the backend...");

    control_plane.write_log(namespace, &pod, "terraform-runner", "Plan: 3 to add, 0 to change, 0 to destroy.\n");
    for body in late.iter_mut().chain([&mut first]) {
        assert_eq!(next_chunk(body).await.as_deref(), Some("Plan: 3 to add, 0 to change, 0 to destroy.\n"));
    }
    assert_eq!(next_log_line(&mut subscriber).await, "Plan: 3 to add, 0 to change, 0 to destroy.");
    assert_eq!(
        control_plane.log_follows(namespace, &pod, "terraform-runner"),
        1,
        "four followers of one run, one log stream from the API server"
    );
    process.stop().await;
}

/// The next log line a subscriber of `operationEvents` gets, passing over status events.
async fn next_log_line(subscriber: &mut Subscriber) -> String {
    loop {
        let event = subscriber.next().await["payload"]["data"]["operationEvents"].clone();
        if let Some(line) = event["logLine"].as_str() {
            return line.to_owned();
        }
    }
}

async fn kept_logs_go_after_their_retention(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[("APP_RUN_LOG_RETENTION", "2s")]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-retention")).await;
    let job = format!("provision-{runtime_id}");
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    engine.runner_prints_and_exits(&job, &[("init", "cloned\n"), ("terraform-runner", "planned\n")], 1, "failed").await;
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    delete_job_and_pods(&engine, &job).await;
    let path = format!("/api/v1/operations/{operation_id}/logs");
    let kept = engine.app.get(&path).await;
    assert!(kept.status == StatusCode::OK && kept.text.contains("planned"), "{}", kept.text);
    for _ in 0..100 {
        let answer = engine.app.get(&path).await;
        if answer.status == StatusCode::CONFLICT {
            assert_eq!(answer.json()["code"], "no_runner_pod", "{}", answer.text);
            process.stop().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the kept logs are still there long after their retention of 2s");
}

async fn a_resumed_run_redacts_its_secrets_and_only_them(backend: Backend) {
    let lease = [("APP_WORKER_LEASE", "2s")];
    let (mut engine, process) = Engine::start(backend, &lease).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-resumed-redact")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    // The new process reads the values to redact back from the credentials Secret, which also names the
    // credential's type: only the secrets are redacted.
    process.crash();
    let process = engine.start_process(&lease).await;
    let message =
        format!("Error: the aws_access_key credential {AWS_ACCESS_KEY_ID} was refused ({AWS_SECRET_ACCESS_KEY})");
    let job = format!("provision-{runtime_id}");
    engine
        .runner_prints_and_exits(
            &job,
            &[("init", "cloned\n"), ("terraform-runner", &format!("{message}\n"))],
            1,
            &message,
        )
        .await;
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let expected = "Error: the aws_access_key credential [REDACTED] was refused ([REDACTED])";
    let failed = engine.app.get(&format!("/api/v1/provisions/{runtime_id}")).await.json();
    assert_eq!(failed["lastError"]["errMessage"], expected, "{failed}");
    let kept = engine.app.get(&format!("/api/v1/operations/{operation_id}/logs?tailLines=1")).await.text;
    assert!(kept.ends_with(&format!("==> terraform-runner <==\n{expected}\n")), "{kept}");
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
    let stored = engine.operation(&operation_id).await;
    assert_eq!(stored.stage.as_str(), "WaitForJob", "the reconciled status comes from the Job, not from the worker");
    reader.stop().await;
}

async fn a_run_past_its_timeout_fails_with_reason_timeout(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[("APP_PROVISIONING_TIMEOUT", "4s")]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-slow")).await;
    // The live status may show the Job's own deadline first; the recorded end is the worker's.
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(failed["lastError"]["reason"], "timeout", "{failed}");
    assert!(failed["lastError"]["errMessage"].as_str().unwrap().contains("4s"), "{failed}");
    process.stop().await;
}

async fn deprovisioning_cleans_everything_up(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let runtime_id = engine.provisioned(&provision_body("engine-gone"), KUBECONFIG).await;
    let outputs = format!("provision-{runtime_id}-outputs");

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
    // A repeated deprovisioning is answered with the one that ran.
    let again = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!((again.status, again.json()["operation"].clone()), (StatusCode::OK, json!("deprovision")));
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

/// A credential that auth-service changed to carry an injected value after the request was accepted fails the
/// run at its first step with reason `invalid_credential`, naming the field; no credentials Secret is written.
async fn an_injected_credential_value_fails_the_run_before_anything_is_written(backend: Backend) {
    let (mut engine, api) = Engine::start_api_only(backend, &[]).await;
    let (runtime_id, _) = engine.provision(&provision_body("engine-injected")).await;
    engine.app.auth.add_credential(
        "cred-aws-1",
        json!({"type": "aws_access_key", "accessKeyId": "AKIAEXAMPLE\ncredential_process = /bin/sh", "secretAccessKey": "s"}),
    );
    let worker = engine.start_process(&[]).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(failed["lastError"]["reason"], "invalid_credential", "{failed}");
    assert_eq!(failed["lastError"]["component"], "auth-service", "{failed}");
    let message = failed["lastError"]["errMessage"].as_str().unwrap();
    assert!(message.contains("has an invalid accessKeyId"), "{message}");
    assert!(!message.contains("credential_process"), "{message}");
    assert!(engine.secret(&format!("provision-{runtime_id}-credentials")).await.is_none(), "nothing written");
    worker.stop().await;
    api.stop().await;
}

/// A tenant's run resolves its credential within the tenant, as its request did; and a GCP credential that
/// auth-service moved to another project after the request was accepted fails the run at its first step with
/// reason `credential_mismatch`, naming both projects. No credentials Secret is written.
async fn a_tenants_credential_moved_to_another_project_fails_the_run_before_anything_is_written(backend: Backend) {
    let (mut engine, api) = Engine::start_api_only(backend, &[]).await;
    engine.app.auth.add_tenant_credential("tenant-a", "cred-gcp-a", gcp_credential("my-project-1"));
    let mut body = gke_body("engine-moved");
    body["clusterConfig"]["credentialId"] = json!("cred-gcp-a");
    let accepted = engine.app.request("POST", "/api/v1/provisions", Some(&body), &[("Tenant", "tenant-a")]).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let runtime_id = accepted.json()["id"].as_str().unwrap().to_owned();
    engine.app.auth.add_tenant_credential("tenant-a", "cred-gcp-a", gcp_credential("other-project-9"));
    let worker = engine.start_process(&[]).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    let error = &failed["lastError"];
    assert_eq!((&error["reason"], &error["component"]), (&json!("credential_mismatch"), &json!("auth-service")));
    let message = error["errMessage"].as_str().unwrap();
    assert!(message.contains(r#"is for GCP project "other-project-9" and does not list "my-project-1""#), "{message}");
    assert!(engine.secret(&format!("provision-{runtime_id}-credentials")).await.is_none(), "nothing written");
    let asked = engine.app.auth.tenants();
    assert_eq!(asked, vec![Some("tenant-a".to_owned()); 2], "the request's check, then the run's");
    worker.stop().await;
    api.stop().await;
}

on_both_databases!(
    a_tenants_credential_moved_to_another_project_fails_the_run_before_anything_is_written,
    an_injected_credential_value_fails_the_run_before_anything_is_written,
    provisioning_succeeds_and_serves_the_kubeconfig,
    a_failing_runner_fails_the_operation_with_its_redacted_message,
    an_upgrade_whose_plan_is_destructive_fails_and_keeps_the_configuration,
    a_runs_logs_are_kept_redacted_and_capped_after_its_pod_is_gone,
    kept_logs_go_after_their_retention,
    a_running_operations_log_is_streamed_until_its_container_ends,
    a_clean_up_that_runs_again_after_a_crash_keeps_the_first_archive,
    a_resumed_run_redacts_its_secrets_and_only_them,
    deprovisioning_cleans_everything_up,
);

/// What a runner's pod prints reaches callers redacted by the service too, whatever the runner let through: a
/// credential value encoded (base64, also inside an encoded file, hex, JSON-escaped) or split across two lines
/// is redacted in the live log, the followed log, the failure status, the kept log and the service's own log.
#[tokio::test]
async fn every_form_of_a_credential_value_is_redacted_wherever_a_runs_output_is_shown() {
    use base64::Engine as _;
    let (engine, api) = Engine::start_api_only(Backend::Postgres, &[]).await;
    let service = engine.start_service_process(&[]).await;
    let secret = AWS_SECRET_ACCESS_KEY;
    let standard = base64::engine::general_purpose::STANDARD;
    let hex: String = secret.bytes().map(|byte| format!("{byte:02x}")).collect();
    let forms = [
        standard.encode(secret),
        standard.encode(format!("key={secret}\nregion=eu-west-1\n")),
        hex.clone(),
        hex.to_uppercase(),
        serde_json::to_string(&json!({ "key": secret })).unwrap(),
        secret[..12].to_owned(),
        secret[12..].to_owned(),
    ];
    let printed: String = [
        format!("base64: {}", forms[0]),
        format!("file: {}", forms[1]),
        format!("hex: {}", forms[2]),
        format!("HEX: {}", forms[3]),
        format!("json: {}", forms[4]),
        format!("module.vpc (local-exec): {}", forms[5]),
        format!("module.vpc (local-exec): {}", forms[6]),
        "done".to_owned(),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect();
    let unredacted = |text: &str| forms.iter().find(|form| text.contains(form.as_str())).cloned();

    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-redact-forms")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let follow = format!("/api/v1/operations/{operation_id}/logs?follow=true");
    let mut followed = engine.app.stream(&follow).await.into_body();
    let pod = engine.runner_starts(&format!("provision-{runtime_id}")).await;
    engine.control_plane.write_log(&engine.namespace, &pod, "terraform-runner", &printed);
    let mut streamed = String::new();
    while !streamed.contains("done\n") {
        streamed.push_str(&next_chunk(&mut followed).await.expect("the followed log goes on"));
    }
    assert_eq!(unredacted(&streamed), None, "followed:\n{streamed}");
    assert!(streamed.contains("base64: [REDACTED]"), "{streamed}");
    let live = engine.app.get(&format!("/api/v1/operations/{operation_id}/logs")).await.text;
    assert!(live.contains("done"), "{live}");
    assert_eq!(unredacted(&live), None, "live:\n{live}");

    engine.control_plane.end_log(&engine.namespace, &pod, "terraform-runner");
    let message = format!("Error: refused {} ({})", forms[0], forms[2]);
    engine.control_plane.terminate_pod(&engine.namespace, &pod, "terraform-runner", 1, &message).await.unwrap();
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(unredacted(&failed.to_string()), None, "{failed}");
    assert_eq!(failed["lastError"]["errMessage"], "Error: refused [REDACTED]= ([REDACTED])", "{failed}");
    let kept = engine.app.get(&format!("/api/v1/operations/{operation_id}/logs")).await.text;
    assert!(kept.contains("done"), "{kept}");
    assert_eq!(unredacted(&kept), None, "kept:\n{kept}");
    assert_eq!(unredacted(&service.log()), None, "service log:\n{}", service.log());
    api.stop().await;
}

/// Another writer of an outputs Secret cannot get its kubeconfig served. A run's own identity may update only its
/// runtime's Secret (`runner_identity.rs`), but the previous release's shared runner identity, which the chart keeps
/// for one release, may still write every Secret of the namespace, and so may whoever holds Secret rights there.
/// Written after the run, it is refused instead of served; written while the run ends (after its runner published
/// and before the worker checks), the run fails naming the Secret.
#[tokio::test]
async fn a_kubeconfig_another_runner_wrote_is_never_served() {
    let (engine, process) = Engine::start(Backend::Postgres, &[]).await;
    let planted = "apiVersion: v1\nkind: Config\nusers:\n- name: x\n  user:\n    exec:\n      command: /bin/sh\n";
    let runtime_id = engine.provisioned(&provision_body("engine-provenance"), KUBECONFIG).await;
    let outputs = format!("provision-{runtime_id}-outputs");
    let kubeconfig = format!("/api/v1/provisions/{runtime_id}/kubeconfig");
    assert_eq!(engine.app.get(&kubeconfig).await.text, KUBECONFIG);

    // The previous release's shared runner identity replaces it.
    engine.publish_outputs_as(PREVIOUS_RUNNER, &outputs, planted).await.expect("the shared identity writes it");
    let refused = engine.app.get(&kubeconfig).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert_eq!(refused.json()["code"], "untrusted_outputs", "{}", refused.text);
    assert!(!refused.text.contains("exec"), "{}", refused.text);
    let query = documents::KUBECONFIG;
    let response = engine.app.graphql(query, json!({ "id": runtime_id })).await;
    assert!(response["data"]["runtimeStatus"]["runtimeConfiguration"]["kubeconfig"].is_null(), "{response}");
    assert!(!response.to_string().contains("/bin/sh"), "{response}");

    // The race: the run's runner published and reported its kubeconfig, another one replaced it meanwhile.
    let (raced_id, raced_operation) = engine.provision(&provision_body("engine-provenance-raced")).await;
    let raced_outputs = format!("provision-{raced_id}-outputs");
    engine.wait_for_stage(&raced_operation, "WaitForJob", WAIT).await;
    engine.publish_outputs(&raced_outputs, KUBECONFIG).await;
    engine.publish_outputs_as(PREVIOUS_RUNNER, &raced_outputs, planted).await.expect("the shared identity writes it");
    let report = test_support::engine::runner_report(Some(KUBECONFIG));
    engine.runner_exits(&format!("provision-{raced_id}"), 0, &report).await;
    let failed = engine.wait_for_status(&raced_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["lastError"]["reason"], "untrusted_outputs", "{failed}");
    assert!(failed["lastError"]["errMessage"].as_str().unwrap().contains(&raced_outputs), "{failed}");
    let refused = engine.app.get(&format!("/api/v1/provisions/{raced_id}/kubeconfig")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    process.stop().await;
}

/// A new runtime's state bucket ends with a part of its own id (bucket names are global: nobody can take it
/// first); a runtime recorded before buckets were recorded keeps the name it was given.
#[tokio::test]
async fn a_runtime_keeps_the_state_bucket_it_was_given() {
    let (engine, process) = Engine::start(Backend::Postgres, &[]).await;
    let bucket_of = |engine: &Engine, job: String| {
        let configs: Api<ConfigMap> = Api::namespaced(engine.admin.clone(), &engine.namespace);
        async move {
            let config = configs.get(&format!("{job}-config")).await.expect("the run's ConfigMap");
            let manifest: Value = serde_json::from_str(&config.data.unwrap()["runner.json"]).unwrap();
            manifest["stateBucket"].as_str().unwrap().to_owned()
        }
    };
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-bucket")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let bucket = bucket_of(&engine, format!("provision-{runtime_id}")).await;
    let id = uuid::Uuid::parse_str(&runtime_id).unwrap();
    assert_eq!(bucket, provisioner::domain::state_bucket::state_bucket_name("dev", "engine-bucket", id));
    assert!(bucket.starts_with("kubeopera-state-dev-engine-bucket-"), "{bucket}");
    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&format!("provision-{runtime_id}"), Some((&outputs, KUBECONFIG))).await;
    engine.wait_for_status(&runtime_id, &["succeeded"], WAIT).await;

    // As a runtime recorded by the release before: no bucket in its row.
    engine.app.database.set_columns("runtime", &runtime_id, [("state_bucket", Option::<String>::None.into())]).await;
    let accepted = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let deprovisioning = accepted.json()["operationId"].as_str().unwrap().to_owned();
    engine.wait_for_stage(&deprovisioning, "WaitForJob", WAIT).await;
    assert_eq!(
        bucket_of(&engine, format!("deprovision-{runtime_id}")).await,
        "kubeopera-terraform-state-dev-engine-bucket"
    );
    process.stop().await;
}

/// A destroy installs the provider version that last wrote the cluster's state, not this release's pin: the
/// operation records it, the rendered `main.tf` requires exactly it and `runner.json` names it.
#[tokio::test]
async fn a_deprovisioning_runs_the_provider_version_of_the_apply() {
    let (engine, process) = Engine::start(Backend::Postgres, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("engine-provider")).await;
    let pinned = ProviderVersion::pinned(Cloud::Aws);
    assert_eq!(engine.operation(&operation_id).await.terraform_provider, Some(pinned));
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&format!("provision-{runtime_id}"), Some((&outputs, "kind: Config\n"))).await;
    engine.wait_for_status(&runtime_id, &["succeeded"], WAIT).await;
    // As if an earlier release, with an older pin, had applied the cluster.
    engine
        .app
        .database
        .set_operation_columns(&operation_id, [("terraform_provider", "hashicorp/aws 6.40.1".into())])
        .await;

    let answer = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    let deprovision = answer.json()["operationId"].as_str().unwrap().to_owned();
    let older = ProviderVersion { source: "hashicorp/aws".into(), version: "6.40.1".into() };
    assert_eq!(engine.operation(&deprovision).await.terraform_provider, Some(older));
    engine.wait_for_stage(&deprovision, "WaitForJob", WAIT).await;
    let config_map: ConfigMap = Api::namespaced(engine.admin.clone(), &engine.namespace)
        .get(&format!("deprovision-{runtime_id}-config"))
        .await
        .unwrap();
    let files = config_map.data.unwrap();
    assert!(files["main.tf"].contains("version = \"6.40.1\""), "{}", files["main.tf"]);
    let manifest: Value = serde_json::from_str(&files["runner.json"]).unwrap();
    assert_eq!(manifest["provider"], json!({"source": "hashicorp/aws", "version": "6.40.1"}));
    process.stop().await;
}

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
    engine
        .app
        .database
        .set_operation_columns(operation_id, [("stage", stage.into()), ("lease_expires_at", chrono::Utc::now().into())])
        .await;
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
        let operation = engine.operation(&operation_id).await;
        assert_eq!(operation.claims, 2, "claimed once by each process (at {stage})");
        // The first process had recorded progress before it died: the resume uses no attempt.
        assert_eq!(operation.attempts, 1, "resumed at {stage}");
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
        let operation = engine.operation(operation_id).await;
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

/// The service restarts 15 times while a provisioning Job runs, alternately stopped gracefully (SIGTERM) and
/// killed (SIGKILL): the run resumes each time, only waiting for its Job again, so no restart uses an attempt,
/// and the operation ends Succeeded with its one Job.
async fn a_run_survives_fifteen_restarts_while_its_job_runs(backend: Backend) {
    let worker = [("APP_WORKER_LEASE", "2s"), ("APP_WORKER_POLL_INTERVAL", "100ms")];
    let (engine, api) = Engine::start_api_only(backend, &worker).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("restarts")).await;
    let job_name = format!("provision-{runtime_id}");
    let mut service = engine.start_service_process(&[]).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let job_uid = engine.jobs_of_operation(&operation_id).await[0].metadata.uid.clone();
    let attempts = engine.operation(&operation_id).await.attempts;
    let mut claims = engine.operation(&operation_id).await.claims;

    for restart in 1..=15 {
        if restart % 2 == 1 {
            let status = service.terminate(Duration::from_secs(40)).await.expect("the service stops on SIGTERM");
            assert!(status.success(), "restart {restart}: exit {status}\n{}", service.log_tail(20));
        } else {
            service.kill();
        }
        let runs = RunLog::read(&service.log());
        runs.assert_no_overlap();
        assert_eq!(runs.started, 1, "restart {restart}");
        service = engine.start_service_process(&[]).await;
        // The new process claims the operation again (after the lease expired, when the last one was killed).
        let deadline = tokio::time::Instant::now() + WAIT;
        while engine.operation(&operation_id).await.claims == claims {
            assert!(tokio::time::Instant::now() < deadline, "restart {restart}: the operation was not resumed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Its claim is recorded before its run says so: the next restart waits for both, or a kill between the two
        // would leave a log without the run.
        while RunLog::read(&service.log()).started == 0 {
            assert!(tokio::time::Instant::now() < deadline, "restart {restart}: the run did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let operation = engine.operation(&operation_id).await;
        claims = operation.claims;
        assert_eq!(operation.state, provisioner::domain::OperationState::InProgress, "restart {restart}");
        assert_eq!(operation.attempts, attempts, "restart {restart} used an attempt");
        assert!(engine.secret(&format!("{job_name}-credentials")).await.is_some(), "restart {restart}");
    }

    engine.runner_succeeds(&job_name, Some((&format!("provision-{runtime_id}-outputs"), KUBECONFIG))).await;
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let operation = engine.operation(&operation_id).await;
    assert_eq!(operation.attempts, attempts, "the restarts used no attempt");
    assert_eq!(operation.claims, 16);
    let jobs = engine.jobs_of_operation(&operation_id).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].metadata.uid, job_uid, "the Job was recreated");
    assert_eq!(engine.pods_of_operation(&operation_id).await.len(), 1);
    RunLog::read(&service.log()).assert_no_overlap();
    println!("15 restarts (8 SIGTERM, 7 SIGKILL): succeeded, attempts {attempts}, 16 claims, 1 Job, 1 pod");
    service.terminate(Duration::from_secs(40)).await;
    api.stop().await;
}

on_both_databases!(a_run_survives_fifteen_restarts_while_its_job_runs);

/// A run that times out while its pod is still running stops the Job and waits for the pod (held here by a
/// finalizer, as a runner interrupting Terraform would hold it) before it removes the credentials and ends.
#[tokio::test]
async fn a_timed_out_run_ends_only_after_its_pods_are_gone() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[("APP_PROVISIONING_TIMEOUT", "8s")]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("stopped")).await;
    let job_name = format!("provision-{runtime_id}");
    let credentials = format!("{job_name}-credentials");
    let pod = engine.control_plane.wait_for_job_pod(&engine.namespace, &job_name).await.expect("job pod");
    let pod_name = pod.metadata.name.clone().unwrap();
    let pods: Api<Pod> = Api::namespaced(engine.admin.clone(), &engine.namespace);
    let hold = json!({"metadata": {"finalizers": ["kubeopera.io/test-hold"]}});
    pods.patch(&pod_name, &PatchParams::default(), &Patch::Merge(&hold)).await.expect("hold the pod");

    // The deadline passes: the worker deletes the Job; its pod is terminating but still there.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pod = pods.get(&pod_name).await.expect("the held pod exists");
        if pod.metadata.deletion_timestamp.is_some() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the timed-out run's pod was never deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let jobs = Api::<Job>::namespaced(engine.admin.clone(), &engine.namespace);
    let deadline = tokio::time::Instant::now() + WAIT;
    while jobs.get_opt(&job_name).await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "the timed-out run's Job was never deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let operation = engine.operation(&operation_id).await;
    assert_eq!(operation.state, provisioner::domain::OperationState::InProgress, "{operation:?}");
    assert_eq!(operation.stage.as_str(), "Cleanup");
    assert!(engine.secret(&credentials).await.is_some(), "the credentials went while the pod still runs");

    // The pod goes: now the run ends, Failed with reason timeout, and the credentials are removed.
    let release = json!({"metadata": {"finalizers": null}});
    pods.patch(&pod_name, &PatchParams::default(), &Patch::Merge(&release)).await.expect("release the pod");
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(failed["lastError"]["reason"], "timeout", "{failed}");
    assert!(pods.get_opt(&pod_name).await.unwrap().is_none());
    assert!(engine.secret(&credentials).await.is_none());
    process.stop().await;
}

/// A worker that fails (here: it claims an operation whose stored record is corrupt) takes its process down: /healthz
/// answers 503 with the worker stopped, then the process exits non-zero, its log naming the worker and why.
#[tokio::test]
async fn a_failing_worker_takes_the_process_down() {
    let (engine, api) = Engine::start_api_only(Backend::Sqlite, &[("APP_WORKER_POLL_INTERVAL", "100ms")]).await;
    let (_, operation_id) = engine.provision(&provision_body("unreadable")).await;
    engine.app.database.set_operation_columns(&operation_id, [("plan_summary", "not a plan summary".into())]).await;

    let mut service = engine.start_service_process(&[]).await;
    let health_url = format!("http://127.0.0.1:{}/healthz", service.port());
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut reported_stopped = false;
    let status = loop {
        if let Some(status) = service.exited() {
            break status;
        }
        if let Ok(response) = http.get(&health_url).send().await
            && response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE
        {
            let body: serde_json::Value = response.json().await.unwrap();
            reported_stopped |= body["worker"] == "stopped";
        }
        assert!(tokio::time::Instant::now() < deadline, "the process did not exit:\n{}", service.log_tail(20));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status.code(), Some(1), "{}", service.log_tail(20));
    assert!(reported_stopped, "/healthz never said the worker stopped");
    let log = service.log();
    assert!(log.contains("the worker stopped: cannot read a claimed operation"), "{}", service.log_tail(20));
    assert!(log.contains("unknown plan summary"), "{}", service.log_tail(20));
    api.stop().await;
}

/// Marks an operation Failed directly in the database, as a run of an earlier version could leave it while its
/// Job still ran.
async fn fail_in_database(engine: &Engine, operation_id: &str) {
    let columns = [
        ("state", "Failed".into()),
        ("owner", Option::<String>::None.into()),
        ("claim_token", Option::<uuid::Uuid>::None.into()),
    ];
    engine.app.database.set_operation_columns(operation_id, columns).await;
}

/// One Terraform per runtime, enforced twice: while the Job of a failed provisioning still runs, DELETE answers
/// 409 `job_still_running`, and a deprovisioning queued anyway (past the service) waits at CreateJob until that
/// Job has ended.
async fn no_second_job_starts_while_one_of_the_runtime_runs(backend: Backend) {
    let (mut engine, process) = Engine::start(backend, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("one-terraform")).await;
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    process.stop().await;
    fail_in_database(&engine, &operation_id).await;
    let api = engine.start_process(&[("MODULES_REPO_URL", "")]).await;

    let provision_job = format!("provision-{runtime_id}");
    // A process that just started waits for its Job cache's first list before it answers.
    let refused = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    let error = &refused.json();
    assert_eq!(error["code"], "job_still_running", "{error}");
    assert!(error["detail"].as_str().unwrap().contains(&provision_job), "{error}");
    let query = documents::DEPROVISION;
    let response = engine.app.graphql(query, json!({ "id": runtime_id })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "job_still_running", "{response}");
    api.stop().await;

    // Past the service: a deprovisioning recorded directly waits for the provisioning Job to end.
    let store = provisioner::store::Store::connect(&engine.app.database.url, 2, Duration::from_secs(3)).await.unwrap();
    let runtime = uuid::Uuid::parse_str(&runtime_id).unwrap();
    let deprovision = provisioner::domain::Operation::queued(
        runtime,
        provisioner::domain::OperationType::Deprovision,
        provisioner::domain::ProviderVersion::pinned(provisioner::domain::Cloud::Aws),
        provisioner::store::now(),
    );
    store.insert_operation(&deprovision).await.unwrap();
    let deprovision_id = deprovision.id.to_string();
    let worker = engine.start_process(&[]).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let operation = engine.operation(&deprovision_id).await;
        if operation.last_error.as_ref().is_some_and(|error| error.reason.as_str() == "job_still_running") {
            assert_eq!(operation.stage.as_str(), "CreateJob");
            assert!(operation.last_error.unwrap().err_message.contains(&provision_job));
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the deprovisioning did not wait: {operation:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(engine.jobs_of_operation(&deprovision_id).await.is_empty(), "a second Job started beside the first");

    engine.runner_succeeds(&provision_job, Some((&format!("provision-{runtime_id}-outputs"), KUBECONFIG))).await;
    engine.wait_for_stage(&deprovision_id, "WaitForJob", WAIT).await;
    engine.runner_succeeds(&format!("deprovision-{runtime_id}"), None).await;
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["operation"], "deprovision");
    worker.stop().await;
}

on_both_databases!(no_second_job_starts_while_one_of_the_runtime_runs);

/// 20 operations while the service is SIGKILLed 20 times at random moments (fixed seed), the test playing
/// kubelet and runner throughout: every operation ends Succeeded with one Job and one pod, and no credentials
/// Secret is left.
#[tokio::test]
async fn twenty_operations_survive_twenty_kills() {
    const OPERATIONS: usize = 20;
    let worker = [("APP_WORKER_LEASE", "2s"), ("APP_WORKER_POLL_INTERVAL", "100ms")];
    let (engine, api) = Engine::start_api_only(Backend::Postgres, &worker).await;
    let mut operations = Vec::new();
    for index in 0..OPERATIONS {
        operations.push(engine.provision(&provision_body(&format!("crash-{index}"))).await);
    }
    let mut random = test_support::Seeded(0x5eed_cafe_f00d);
    let mut finished_pods = 0;
    for _ in 0..20 {
        let mut service = engine.start_service_process(&[]).await;
        let lifetime = Duration::from_millis(200 + random.below(2500));
        let until = tokio::time::Instant::now() + lifetime;
        while tokio::time::Instant::now() < until {
            finished_pods += engine.finish_running_pods().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        service.kill();
        RunLog::read(&service.log()).assert_no_overlap();
    }
    let service = engine.start_service_process(&[]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        finished_pods += engine.finish_running_pods().await;
        let mut done = 0;
        for (_, operation_id) in &operations {
            done += usize::from(!engine.operation(operation_id).await.state.is_active());
        }
        if done == OPERATIONS {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "only {done} of {OPERATIONS} operations ended");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (mut attempts, mut claims) = (0, 0);
    for (runtime_id, operation_id) in &operations {
        let operation = engine.operation(operation_id).await;
        assert_eq!(operation.state, provisioner::domain::OperationState::Succeeded, "{runtime_id}: {operation:?}");
        assert_eq!(engine.jobs_of_operation(operation_id).await.len(), 1, "{runtime_id}");
        assert_eq!(engine.pods_of_operation(operation_id).await.len(), 1, "{runtime_id}");
        attempts += operation.attempts;
        claims += operation.claims;
    }
    assert_eq!(engine.credentials_secrets().await, Vec::<String>::new());
    RunLog::read(&service.log()).assert_no_overlap();
    println!(
        "crash cycle: {OPERATIONS} operations, 20 SIGKILLs: {OPERATIONS} succeeded, {OPERATIONS} Jobs, {finished_pods} \
         pods, {claims} claims, {attempts} attempts, 0 credentials Secrets left"
    );
    drop(service);
    api.stop().await;
}

/// A GET to a service child process: the status, the JSON body and how long it took.
async fn timed_get(http: &reqwest::Client, url: &str) -> (StatusCode, serde_json::Value, Duration) {
    let started = tokio::time::Instant::now();
    let response = http.get(url).send().await.unwrap_or_else(|error| panic!("GET {url}: {error}"));
    let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
    let body = response.json().await.unwrap_or(serde_json::Value::Null);
    (status, body, started.elapsed())
}

/// The in-flight gauge of a service child process.
async fn runs_in_flight(http: &reqwest::Client, metrics_url: &str) -> i64 {
    let metrics = http.get(metrics_url).send().await.unwrap().text().await.unwrap();
    let line = metrics.lines().find(|line| line.starts_with("provisioner_operations_in_flight ")).expect("gauge");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Runs in flight while the database is cut for 15 s and for 40 s and the API server for 20 s, each through a
/// fault-injecting proxy in front of the service (a child process): no operation runs twice, requests answer 503
/// fast while the database is away, /healthz tells which dependency is missing, and everything recovers by
/// itself; every run ends Succeeded, the outages having used no attempt.
#[tokio::test]
async fn runs_survive_database_and_api_server_outages() {
    const RUNS: usize = 10;
    let worker = [("APP_WORKER_LEASE", "3s"), ("APP_WORKER_POLL_INTERVAL", "200ms")];
    let (engine, api) = Engine::start_api_only(Backend::Postgres, &worker).await;
    let direct = provisioner::store::Store::connect(&engine.app.database.url, 2, Duration::from_secs(3)).await.unwrap();
    let (database, proxied_url) = FaultProxy::in_front_of(&engine.app.database.url).await;
    let api_server = FaultProxy::start(socket_address(engine.control_plane.server_url())).await;
    let metrics_address = format!("127.0.0.1:{}", test_control_plane::free_port());
    let settings = [
        ("DATABASE_URL", proxied_url.as_str()),
        ("APP_DATABASE_ACQUIRE_TIMEOUT", "1s"),
        ("APP_METRICS_ADDRESS", metrics_address.as_str()),
    ];
    let mut service = engine.start_service_process_via(&settings, &format!("https://{}", api_server.address())).await;
    let base = format!("http://127.0.0.1:{}", service.port());
    let metrics_url = format!("http://{metrics_address}/metrics");
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().unwrap();

    let mut operations = Vec::new();
    for index in 0..RUNS {
        operations.push(engine.provision(&provision_body(&format!("outage-{index}"))).await);
    }
    for (_, operation_id) in &operations {
        engine.wait_for_stage(operation_id, "WaitForJob", WAIT).await;
    }
    let in_progress = async || {
        let mut count = 0;
        for (_, operation_id) in &operations {
            let operation = direct.find_operation(operation_id.parse().unwrap()).await.unwrap().unwrap();
            count += i64::from(operation.state == provisioner::domain::OperationState::InProgress);
        }
        count
    };
    let status_url = format!("{base}/api/v1/provisions/{}", operations[0].0);
    let health_url = format!("{base}/healthz");
    // The acquire timeout (1 s) plus a margin.
    let limit = Duration::from_millis(2500);
    let mut most_in_flight = 0;

    for outage in [Duration::from_secs(15), Duration::from_secs(40)] {
        database.cut();
        let restore_at = tokio::time::Instant::now() + outage;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut checks = 0;
        while tokio::time::Instant::now() + limit * 2 < restore_at {
            let (status, body, took) = timed_get(&http, &status_url).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            assert!(took < limit, "a status read took {took:?} to answer 503");
            assert_eq!(body["code"], "unavailable", "{body}");
            assert_eq!(body["component"], "database", "{body}");
            let message = body["detail"].as_str().unwrap();
            assert!(!message.contains("127.0.0.1") && !message.contains("os error"), "internal detail: {message}");
            let (status, body, took) = timed_get(&http, &health_url).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            assert!(took < limit, "/healthz took {took:?} to answer 503");
            assert_eq!(body["database"], "unavailable", "{body}");
            let in_flight = runs_in_flight(&http, &metrics_url).await;
            most_in_flight = most_in_flight.max(in_flight);
            assert!(in_flight <= in_progress().await, "more runs than operations in progress");
            checks += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        tokio::time::sleep_until(restore_at).await;
        database.restore();
        let recovered = tokio::time::Instant::now() + WAIT;
        while timed_get(&http, &health_url).await.0 != StatusCode::OK {
            assert!(tokio::time::Instant::now() < recovered, "/healthz did not recover after the database outage");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        println!("database cut for {outage:?}: {checks} rounds of reads answered 503 within {limit:?}; recovered");
    }

    // Every run is followed again once its lease has expired and the worker claimed it anew.
    let resumed = tokio::time::Instant::now() + WAIT;
    while runs_in_flight(&http, &metrics_url).await < RUNS as i64 {
        assert!(tokio::time::Instant::now() < resumed, "the runs were not resumed after the outages");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    api_server.cut();
    let restore_at = tokio::time::Instant::now() + Duration::from_secs(20);
    tokio::time::sleep(Duration::from_millis(500)).await;
    while tokio::time::Instant::now() + limit < restore_at {
        let (status, body, took) = timed_get(&http, &health_url).await;
        assert!(took < limit, "/healthz took {took:?}");
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["kubernetes"], "unavailable", "{body}");
        assert_eq!(body["database"], "ok", "{body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep_until(restore_at).await;
    api_server.restore();
    let recovered = tokio::time::Instant::now() + WAIT;
    while timed_get(&http, &health_url).await.1["kubernetes"] != "ok" {
        assert!(tokio::time::Instant::now() < recovered, "/healthz did not recover after the API server outage");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("API server cut for 20s: /healthz said kubernetes unavailable; recovered");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        engine.finish_running_pods().await;
        if in_progress().await == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "runs did not finish after the outages");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (mut claims, mut attempts) = (0, 0);
    for (runtime_id, operation_id) in &operations {
        let operation = direct.find_operation(operation_id.parse().unwrap()).await.unwrap().unwrap();
        assert_eq!(operation.state, provisioner::domain::OperationState::Succeeded, "{runtime_id}: {operation:?}");
        assert_eq!(operation.attempts, 1, "{runtime_id}: the outages used an attempt");
        assert_eq!(engine.jobs_of_operation(operation_id).await.len(), 1, "{runtime_id}");
        assert_eq!(engine.pods_of_operation(operation_id).await.len(), 1, "{runtime_id}");
        claims += operation.claims;
        attempts += operation.attempts;
    }
    let status = service.terminate(Duration::from_secs(40)).await.expect("the service stops");
    assert!(status.success(), "{status}");
    let runs = RunLog::read(&service.log());
    runs.assert_no_overlap();
    assert!(runs.started >= RUNS * 2, "the runs were not stopped by the database outages: {runs:?}");
    println!(
        "outages: {RUNS} runs, all Succeeded with 1 Job and 1 pod each; {} runs started, {claims} claims, \
         {attempts} attempts; at most {most_in_flight} runs in flight during the database outages, never more than \
         the operations in progress; never two runs of one operation at once",
        runs.started
    );
    api.stop().await;
}
