//! The whole path with the real terraform-runner in the Job: a request to the REST API, the engine's credentials
//! Secret, rendered ConfigMap and Job on the test control plane, then the Job's pod run by the kubelet stand-in
//! (`test_support::kubelet_stand_in`: the real `terraform-runner` binary exactly as the pod spec says, against moto
//! with OpenTofu); then the service reads the published kubeconfig, an upgrade is planned (dry run) and applied, a
//! hibernation and a wake-up are applied, and deprovisioning destroys and removes the state bucket. This is where
//! the service's side of the contract (Job spec, file names, runner.json, credential files, RBAC) meets the
//! runner's; `end_to_end.rs` runs the same in containers on the real node.
//!
//! Nothing is substituted: the stand-in plays the init container by putting the repository's modules where it
//! clones them (`/workspace/modules`), and the runner runs the rendered EKS configuration with the real AWS
//! provider from the test mirror (its lock file, `init -lockfile=readonly`) on moto.

use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use provisioner::domain::state_bucket::state_bucket_name;
use provisioner::executor::RUNNER_CONTAINER;
use serde_json::Value;
use test_support::engine::Engine;
use test_support::kubelet_stand_in::run_job_pod;
use test_support::moto::MotoServer;
use test_support::{Backend, eks_body};

const WAIT: Duration = Duration::from_secs(60);

/// The runner's log the service kept for `operation_id` (a kept log is served before the pod's), with how large it
/// is printed and as stored, compressed.
async fn kept_runner_log(engine: &Engine, operation_id: &str) -> String {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let answer = engine.app.get(&format!("/api/v1/operations/{operation_id}/logs")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let db = Database::connect(&engine.app.database.url).await.unwrap();
    // The pipeline runs on SQLite.
    let sql =
        "SELECT printed_bytes, length(content) AS stored FROM operation_log WHERE operation_id = ? AND container = ?";
    let values = [uuid::Uuid::parse_str(operation_id).unwrap().into(), RUNNER_CONTAINER.into()];
    let sizes = db
        .query_one_raw(Statement::from_sql_and_values(db.get_database_backend(), sql, values))
        .await
        .unwrap()
        .expect("the runner's kept log");
    let (printed, stored): (i64, i64) =
        (sizes.try_get("", "printed_bytes").unwrap(), sizes.try_get("", "stored").unwrap());
    eprintln!("kept runner log of operation {operation_id}: {printed} bytes printed, {stored} bytes stored (gzip)");
    answer.text.split("==> terraform-runner <==\n").nth(1).expect("the runner's part").to_owned()
}

#[tokio::test]
async fn an_eks_cluster_is_provisioned_upgraded_hibernated_woken_and_deprovisioned_by_the_real_runner_and_provider() {
    let moto = MotoServer::start().await;
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, provisioning) = engine.provision(&eks_body("pipeline")).await;
    let bucket = &state_bucket_name("dev", "pipeline", runtime_id.parse().unwrap());
    let bucket_exists =
        || moto.aws_command().args(["s3api", "head-bucket", "--bucket", bucket]).output().unwrap().status.success();

    let applied = run_job_pod(&engine, &moto, &format!("provision-{runtime_id}"), &[]).await;
    assert_eq!(applied.exit_code, 0, "the runner failed: {}\n{}", applied.termination_message, applied.output);
    assert!(applied.output.contains("Apply complete! Resources: 31 added"), "{}", applied.output);
    let summary: runner_contract::plan::PlanSummary = serde_json::from_str(&applied.termination_message).unwrap();
    assert_eq!((summary.add, summary.change, summary.destroy), (31, 0, 0), "the apply plan's summary: {summary:?}");
    // Everything the modules tagged is known to the state, under its ARN or its id.
    assert_eq!(summary.orphans, Vec::<String>::new(), "no orphans");
    let outputs = engine.secret(&format!("provision-{runtime_id}-outputs")).await.expect("the outputs Secret");
    let inventory = runner_contract::inventory::parse(&outputs.data.unwrap()["resources"].0).unwrap();
    assert!(inventory.iter().any(|entry| entry.contains(":cluster/")), "the EKS cluster is recorded: {inventory:?}");
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["planSummary"]["add"], 31, "the status shows what the plan created: {done}");
    // What the real runner printed is kept once the run ended, whole (far under the cap).
    engine.wait_for_stage(&provisioning, "Done", WAIT).await;
    let kept = kept_runner_log(&engine, &provisioning).await;
    assert_eq!(kept.trim_end(), applied.output.trim_end(), "the kept log is what the runner printed");
    // The kubeconfig the runner built from the EKS cluster moto made: its endpoint and the `aws eks get-token`
    // exec plugin, no secret.
    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert!(answer.text.contains("eks") && answer.text.contains("get-token"), "{}", answer.text);
    assert!(answer.text.contains("--cluster-name") && answer.text.contains("pipeline"), "{}", answer.text);
    assert!(bucket_exists(), "the state bucket the service named exists");

    // An upgrade, first as a dry run: planned by the same Job, nothing applied, the configuration kept.
    let path = format!("/api/v1/provisions/{runtime_id}");
    let upgrade = serde_json::json!({ "kubernetesVersion": "1.35", "workerPool": { "maxSize": 5 } });
    let config = || async {
        let query = "query($id: String!) { runtimeStatus(id: $id) { runtimeConfiguration { clusterConfig { kubernetesVersion workerPool { maxSize } } } } }";
        let response = engine.app.graphql(query, serde_json::json!({ "id": runtime_id })).await;
        response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"].clone()
    };
    let before = config().await;
    let accepted = engine.app.request("PATCH", &format!("{path}?dryRun=true"), Some(&upgrade), &[]).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let planned = run_job_pod(&engine, &moto, &format!("upgrade-{runtime_id}"), &[]).await;
    assert_eq!(planned.exit_code, 0, "the runner failed: {}\n{}", planned.termination_message, planned.output);
    assert!(!planned.output.contains("Apply complete!"), "{}", planned.output);
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!((done["operation"].as_str(), done["status"].as_str()), (Some("upgrade"), Some("succeeded")), "{done}");
    assert_eq!(done["dryRun"], true);
    let change = done["planSummary"]["change"].as_u64().unwrap();
    assert!(change >= 2, "the cluster's version and the node group change in place: {done}");
    assert_eq!(
        (done["planSummary"]["add"].as_u64(), done["planSummary"]["destroy"].as_u64()),
        (Some(0), Some(0)),
        "{done}"
    );
    assert_eq!(config().await, before, "a dry run keeps the configuration");

    // The upgrade itself: the same plan, applied; the runtime then shows the new configuration.
    let accepted = engine.app.patch(&path, &upgrade).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let upgraded = run_job_pod(&engine, &moto, &format!("upgrade-{runtime_id}"), &[]).await;
    assert_eq!(upgraded.exit_code, 0, "the runner failed: {}\n{}", upgraded.termination_message, upgraded.output);
    assert!(
        upgraded.output.contains(&format!("Apply complete! Resources: 0 added, {change} changed, 0 destroyed")),
        "{}",
        upgraded.output
    );
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!((done["operation"].as_str(), done["status"].as_str()), (Some("upgrade"), Some("succeeded")), "{done}");
    assert_eq!(config().await, serde_json::json!({ "kubernetesVersion": "1.35", "workerPool": { "maxSize": 5 } }));
    let cluster =
        moto.aws(&["eks", "describe-cluster", "--name", "pipeline", "--region", "eu-central-1", "--output", "json"]);
    assert_eq!(serde_json::from_str::<Value>(&cluster).unwrap()["cluster"]["version"], "1.35", "{cluster}");
    // The node group followed the control plane, and took the new size.
    let node_group = || {
        let group = moto.aws(&[
            "eks",
            "describe-nodegroup",
            "--cluster-name",
            "pipeline",
            "--nodegroup-name",
            "workers",
            "--region",
            "eu-central-1",
            "--output",
            "json",
        ]);
        serde_json::from_str::<Value>(&group).unwrap()["nodegroup"].clone()
    };
    let group = node_group();
    assert_eq!(
        (group["version"].as_str(), group["scalingConfig"]["maxSize"].as_i64()),
        (Some("1.35"), Some(5)),
        "{group}"
    );
    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::OK, "the kubeconfig stays available after an upgrade: {}", answer.text);

    // Hibernation and wake-up through REST, each its own Job with the real runner: the node group goes to zero
    // (its maximum kept) and comes back at the recorded minimum; the kubeconfig stays available while asleep.
    let minimum = eks_body("pipeline")["clusterConfig"]["workerPool"]["minSize"].as_i64().unwrap();
    for (path_action, job, operation, hibernated, wanted) in
        [("hibernate", "hibernate", "hibernate", true, 0), ("wake", "wake-up", "wake_up", false, minimum)]
    {
        let accepted = engine.app.request("POST", &format!("{path}/{path_action}"), None, &[]).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
        let run = run_job_pod(&engine, &moto, &format!("{job}-{runtime_id}"), &[]).await;
        assert_eq!(run.exit_code, 0, "the runner failed: {}\n{}", run.termination_message, run.output);
        let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
        assert_eq!(
            (done["operation"].as_str(), done["status"].as_str()),
            (Some(operation), Some("succeeded")),
            "{done}"
        );
        assert_eq!(done["hibernation"]["hibernated"], hibernated, "{done}");
        let scaling = &node_group()["scalingConfig"];
        assert_eq!(
            (scaling["minSize"].as_i64(), scaling["desiredSize"].as_i64(), scaling["maxSize"].as_i64()),
            (Some(wanted), Some(wanted), Some(5)),
            "{operation}: {scaling}"
        );
        let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
        assert_eq!(answer.status, StatusCode::OK, "{operation}: {}", answer.text);
    }

    let accepted = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let destroyed = run_job_pod(&engine, &moto, &format!("deprovision-{runtime_id}"), &[]).await;
    assert_eq!(destroyed.exit_code, 0, "the runner failed: {}\n{}", destroyed.termination_message, destroyed.output);
    assert!(destroyed.output.contains(" destroyed."), "{}", destroyed.output);
    let summary: runner_contract::plan::PlanSummary = serde_json::from_str(&destroyed.termination_message).unwrap();
    assert_eq!((summary.add, summary.destroy), (0, 31), "the destroy plan's summary: {summary:?}");
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(
        (done["operation"].as_str(), done["status"].as_str()),
        (Some("deprovision"), Some("succeeded")),
        "{done}"
    );
    assert!(!bucket_exists(), "the state bucket is removed");
    let clusters = moto.aws(&["eks", "list-clusters", "--region", "eu-central-1", "--output", "json"]);
    assert_eq!(serde_json::from_str::<Value>(&clusters).unwrap()["clusters"], serde_json::json!([]));
    let pods = Api::<Pod>::namespaced(engine.admin.clone(), &engine.namespace);
    // The upgrade's Job replaced its dry run's (they share the name `upgrade-<id>`), and its pod went with it.
    assert_eq!(pods.list(&Default::default()).await.unwrap().items.len(), 5, "every Job ran a pod");
    process.stop().await;
}

/// An image that does not carry the provider version a run needs: the runner fails before Terraform starts,
/// and the operation says which version is missing.
#[tokio::test]
async fn a_runner_without_the_runs_provider_version_fails_through_the_api() {
    let moto = MotoServer::start().await;
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&eks_body("pipeline-no-provider")).await;
    let no_locks = tempfile::tempdir().unwrap();
    let lock_dir = no_locks.path().display().to_string();
    let job = format!("provision-{runtime_id}");
    let failed = run_job_pod(&engine, &moto, &job, &[("RUNNER_PROVIDER_LOCK_DIR", &lock_dir)]).await;
    assert_eq!(failed.exit_code, 1, "{}", failed.output);
    let missing = format!("carries no provider hashicorp/aws {}", runner_contract::providers::AWS_VERSION);
    assert!(failed.termination_message.contains(&missing), "{}", failed.termination_message);
    assert!(!failed.output.contains("Initializing"), "Terraform never started: {}", failed.output);
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let done = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    assert_eq!(done["lastError"]["component"], "terraform-runner", "{done}");
    let text = done["lastError"]["errMessage"].as_str().unwrap();
    assert!(text.contains(&missing), "the operation names the missing version: {text}");
    process.stop().await;
}

/// A provisioning cancelled while Terraform applies: the worker deletes the Job, the pod's SIGTERM reaches the
/// real runner, which interrupts Terraform: it stops at a safe point, writes what it created to the state and
/// releases the lock. The operation ends `Failed` with reason `cancelled`; a deprovisioning then destroys what was
/// created.
#[tokio::test]
async fn a_cancelled_provisioning_stops_terraform_and_a_deprovisioning_destroys_what_it_created() {
    let moto = MotoServer::start().await;
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&eks_body("cancelled")).await;
    let vpcs = || {
        let found = moto.aws(&[
            "ec2",
            "describe-vpcs",
            "--region",
            "eu-central-1",
            "--output",
            "json",
            "--query",
            "Vpcs[?IsDefault==`false`].VpcId",
        ]);
        serde_json::from_str::<Value>(&found).unwrap().as_array().map_or(0, Vec::len)
    };
    let cancel = async {
        // Once Terraform has begun creating (the VPC exists), cancel.
        let deadline = tokio::time::Instant::now() + WAIT * 2;
        while vpcs() == 0 {
            assert!(tokio::time::Instant::now() < deadline, "the apply never created the VPC");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let answer = engine.app.request("POST", &format!("/api/v1/operations/{operation_id}/cancel"), None, &[]).await;
        assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
        tokio::time::Instant::now()
    };
    let job = format!("provision-{runtime_id}");
    let (run, asked) = tokio::join!(run_job_pod(&engine, &moto, &job, &[]), cancel);
    assert_ne!(run.exit_code, 0, "the interrupted run succeeded:\n{}", run.output);
    assert!(run.output.contains("stopped by a signal") || run.output.contains("Interrupt received"), "{}", run.output);
    let failed = engine.wait_for_status(&runtime_id, &["failed", "succeeded"], WAIT).await;
    eprintln!("cancel to the operation's end with the real runner: {:?}", asked.elapsed());
    // The log was followed while the Job was stopped: its last lines (the interrupt) are kept.
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let kept = kept_runner_log(&engine, &operation_id).await;
    assert_eq!(kept.trim_end(), run.output.trim_end(), "the stopped run's whole log is kept");
    assert_eq!(
        (failed["status"].as_str(), failed["lastError"]["reason"].as_str()),
        (Some("failed"), Some("cancelled")),
        "{failed}"
    );
    // Terraform released its lock and kept what it created in the state.
    let bucket = &state_bucket_name("dev", "cancelled", runtime_id.parse().unwrap());
    let objects =
        moto.aws(&["s3api", "list-objects-v2", "--bucket", bucket, "--output", "json", "--query", "Contents[].Key"]);
    let objects: Value = serde_json::from_str(&objects).unwrap();
    assert_eq!(
        objects,
        serde_json::json!(["terraform.tfstate", "terraform.tfstate.created.json", "terraform.tfstate.holder.json"]),
        "the lock is released, the state kept (with the records of the run that held the lock and of what it created)"
    );
    assert!(vpcs() > 0, "the interrupted apply's resources stay until the deprovisioning");

    let accepted = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let destroyed = run_job_pod(&engine, &moto, &format!("deprovision-{runtime_id}"), &[]).await;
    assert_eq!(destroyed.exit_code, 0, "the runner failed: {}\n{}", destroyed.termination_message, destroyed.output);
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(
        (done["operation"].as_str(), done["status"].as_str()),
        (Some("deprovision"), Some("succeeded")),
        "{done}"
    );
    assert_eq!(vpcs(), 0, "the deprovisioning destroyed what the cancelled apply created");
    assert_eq!(
        engine.app.post_provision(&eks_body("cancelled")).await.status,
        StatusCode::ACCEPTED,
        "the name is free"
    );
    process.stop().await;
}
