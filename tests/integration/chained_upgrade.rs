//! A chained minor upgrade through the engine on the real test control plane (the test plays kubelet and
//! terraform-runner): 1.34 to 1.36 is one operation of two runs, one Job per minor, each rendered at its minor; the
//! runtime shows each minor once applied; a failure in the second minor leaves it at the first, and a retry runs
//! only what is left.

use std::time::Duration;

use axum::http::StatusCode;
use provisioner::domain::{ProvisionRequest, Topology};
use serde_json::{Value, json};
use test_support::engine::Engine;
use test_support::{Backend, on_both_databases};

const WAIT: Duration = Duration::from_secs(60);
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";

/// The operation as REST shows it.
async fn operation(engine: &Engine, operation_id: &str) -> Value {
    let answer = engine.app.get(&format!("/api/v1/operations/{operation_id}")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    answer.json()
}

/// The runtime's configuration last applied, as REST shows it.
async fn applied_version(engine: &Engine, runtime_id: &str) -> (String, i64) {
    let status = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    let config = &status["clusterConfig"];
    let version = config["kubernetesVersion"].as_str().unwrap_or_else(|| panic!("no version: {status}")).to_owned();
    (version, config["workerPool"]["maxSize"].as_i64().unwrap())
}

/// What the run of `job` was rendered for: the version in main.tf and the control-plane upgrade of runner.json.
async fn rendered_version(engine: &Engine, job: &str) -> (bool, String) {
    let main_tf = engine.config_map_file(&format!("{job}-config"), "main.tf").await;
    let manifest: Value = serde_json::from_str(&engine.config_map_file(&format!("{job}-config"), "runner.json").await)
        .expect("runner.json");
    let version = manifest["controlPlaneUpgrade"]["version"].as_str().expect("a vanilla upgrade").to_owned();
    (main_tf.contains(&format!("kubernetes_version = \"{version}\"")), version)
}

/// The versions of an operation's `minors`.
fn minors(operation: &Value) -> Vec<&str> {
    operation["minors"].as_array().unwrap().iter().map(|minor| minor["version"].as_str().unwrap()).collect()
}

async fn wait_for_version(engine: &Engine, runtime_id: &str, version: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while applied_version(engine, runtime_id).await.0 != version {
        assert!(tokio::time::Instant::now() < deadline, "the runtime never showed {version}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_chained_upgrade_runs_each_minor_and_a_retry_resumes_after_the_last_good_one(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let request = ProvisionRequest::example_named(Topology::VanillaKubeadm, "chain");
    assert_eq!(request.cluster_config.kubernetes_version, "1.34");
    let runtime_id = engine.provisioned(&serde_json::to_value(&request).unwrap(), KUBECONFIG).await;
    let (_, max_size) = applied_version(&engine, &runtime_id).await;

    // Two minors ahead, with a pool change: accepted as one operation, queued for its first minor.
    let path = format!("/api/v1/provisions/{runtime_id}");
    let body = json!({ "kubernetesVersion": "1.36", "workerPool": { "maxSize": max_size + 1 } });
    let accepted = engine.app.patch(&path, &body).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let chain_id = accepted.json()["operationId"].as_str().unwrap().to_owned();

    // The first minor: its own Job, rendered at 1.35 with the pool change; the status names the minor.
    let first_job = format!("upgrade-{runtime_id}-1-35");
    engine.wait_for_stage(&chain_id, "WaitForJob", WAIT).await;
    assert_eq!(rendered_version(&engine, &first_job).await, (true, "1.35".to_owned()));
    let running = operation(&engine, &chain_id).await;
    assert_eq!(minors(&running), ["1.35"], "{running}");
    assert!(
        running["message"].as_str().unwrap().ends_with("(minor 1.35 of the upgrade to 1.36)"),
        "{}",
        running["message"]
    );
    assert_eq!(applied_version(&engine, &runtime_id).await, ("1.34".to_owned(), max_size), "nothing shown yet");
    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&first_job, Some((&outputs, KUBECONFIG))).await;

    // Applied: the runtime shows 1.35 (and the pool change), and the second minor runs under its own Job.
    wait_for_version(&engine, &runtime_id, "1.35").await;
    assert_eq!(applied_version(&engine, &runtime_id).await.1, max_size + 1);
    let second_job = format!("upgrade-{runtime_id}-1-36");
    engine.wait_for_stage(&chain_id, "WaitForJob", WAIT).await;
    assert_eq!(rendered_version(&engine, &second_job).await, (true, "1.36".to_owned()));
    let second = operation(&engine, &chain_id).await;
    assert_eq!(minors(&second), ["1.35", "1.36"], "{second}");
    let started = |minor: &Value| chrono::DateTime::parse_from_rfc3339(minor["startedAt"].as_str().unwrap()).unwrap();
    assert!(started(&second["minors"][1]) > started(&second["minors"][0]), "{second}");

    // The second minor fails: the operation fails, the runtime stays at its last good minor.
    let failure = "the cluster did not publish that its control plane runs 1.36 within 1h0m0s";
    engine.runner_fails(&second_job, failure).await;
    engine.wait_for_stage(&chain_id, "Done", WAIT).await;
    let failed = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(failed["lastError"]["errMessage"], failure, "{failed}");
    assert_eq!(applied_version(&engine, &runtime_id).await, ("1.35".to_owned(), max_size + 1));
    // Queued at the stage a replica of the previous release does not claim.
    let chain = operation(&engine, &chain_id).await;
    let queued = chain["stages"].as_array().unwrap().iter().find(|entry| entry["stage"] == "NextMinor");
    assert_eq!(queued.map(|entry| &entry["enteredAt"]), Some(&chain["createdAt"]), "{chain}");

    // The retry runs what is left: one minor, as a plain upgrade to the same target.
    let retry = engine.app.request("POST", &format!("/api/v1/operations/{chain_id}/retry"), None, &[]).await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "{}", retry.text);
    let retry_id = retry.json()["id"].as_str().unwrap().to_owned();
    assert!(minors(&operation(&engine, &retry_id).await).is_empty(), "one minor left: not a chain");
    let retry_job = format!("upgrade-{runtime_id}");
    engine.wait_for_stage(&retry_id, "WaitForJob", WAIT).await;
    assert_eq!(rendered_version(&engine, &retry_job).await, (true, "1.36".to_owned()));
    engine.runner_succeeds(&retry_job, Some((&outputs, KUBECONFIG))).await;
    engine.wait_for_status(&runtime_id, &["succeeded"], WAIT).await;
    assert_eq!(applied_version(&engine, &runtime_id).await, ("1.36".to_owned(), max_size + 1));
    // One Job per minor, kept as it ended.
    let jobs = engine.jobs_of_operation(&chain_id).await.into_iter().chain(engine.jobs_of_operation(&retry_id).await);
    let mut ended: Vec<(String, bool)> =
        jobs.map(|job| (job.metadata.name.unwrap(), job.status.unwrap_or_default().succeeded == Some(1))).collect();
    ended.sort();
    assert_eq!(ended, [(retry_job, true), (first_job, true), (second_job, false)]);
    process.stop().await;
}

on_both_databases!(a_chained_upgrade_runs_each_minor_and_a_retry_resumes_after_the_last_good_one);
