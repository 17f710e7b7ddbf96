//! The whole path with the real terraform-runner in the Job: a request to the REST API, the engine's credentials
//! Secret, rendered ConfigMap and Job on the test control plane, then the Job's pod run by a kubelet stand-in that
//! starts the real `terraform-runner` binary exactly as the pod spec says (its command, arguments, environment,
//! volumes and ServiceAccount), against moto with OpenTofu; then the service reads the published kubeconfig, an
//! upgrade is planned (dry run) and applied, a hibernation and a wake-up are applied, and deprovisioning destroys and removes the state bucket. This is where the service's side of the contract (Job
//! spec, file names, runner.json, credential files, RBAC) meets the runner's.
//!
//! Nothing is substituted: the stand-in plays the init container by putting the repository's modules where it
//! clones them (`/workspace/modules`), and the runner runs the rendered EKS configuration with the real AWS
//! provider from the test mirror (its lock file, `init -lockfile=readonly`) on moto.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use provisioner::domain::state_bucket::state_bucket_name;
use provisioner::executor::RUNNER_CONTAINER;
use runner_contract::environment::mount;
use serde_json::Value;
use test_support::engine::Engine;
use test_support::moto::MotoServer;
use test_support::terraform::test_providers;
use test_support::{Backend, eks_body};

const WAIT: Duration = Duration::from_secs(60);

/// What happened to the pod.
struct PodRun {
    exit_code: i32,
    output: String,
    termination_message: String,
}

/// Runs the Job's pod the way a kubelet would, with the real runner, then reports its end to the API server.
/// `extra_env` is what a node operator could add to the pod (here: shorter waits).
async fn run_job_pod(engine: &Engine, moto: &MotoServer, job: &str, extra_env: &[(&str, &str)]) -> PodRun {
    let namespace = &engine.namespace;
    let pod = engine.control_plane.wait_for_job_pod(namespace, job).await.expect("the Job's pod");
    let pod_name = pod.metadata.name.clone().unwrap();
    let spec = pod.spec.clone().unwrap();
    let container = spec.containers.iter().find(|container| container.name == "terraform-runner").unwrap();
    let root = tempfile::tempdir().unwrap();

    // Volumes: the ConfigMap and Secret projected as files, the emptyDir as a folder; mount paths map to them.
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let folder = root.path().join(&mount.name);
        std::fs::create_dir_all(&folder).unwrap();
        let volume = spec.volumes.iter().flatten().find(|volume| volume.name == mount.name).unwrap();
        if let Some(source) = &volume.config_map {
            let config_map =
                Api::<ConfigMap>::namespaced(engine.admin.clone(), namespace).get(&source.name).await.unwrap();
            for (name, content) in config_map.data.unwrap_or_default() {
                std::fs::write(folder.join(name), content).unwrap();
            }
        }
        if let Some(source) = &volume.secret {
            let name = source.secret_name.as_deref().unwrap();
            let secret = Api::<Secret>::namespaced(engine.admin.clone(), namespace).get(name).await.unwrap();
            for (name, content) in secret.data.unwrap_or_default() {
                std::fs::write(folder.join(name), content.0).unwrap();
            }
        }
        mounts.push((mount.mount_path.clone(), folder));
    }
    let local = |value: &str| -> String {
        mounts
            .iter()
            .find_map(|(mount_path, folder)| {
                value.strip_prefix(mount_path.as_str()).map(|rest| format!("{}{rest}", folder.display()))
            })
            .unwrap_or_else(|| value.to_owned())
    };
    let config_dir = PathBuf::from(local(mount::CONFIG_DIR));
    assert!(config_dir.join("runner.json").is_file(), "the ConfigMap is mounted where the runner looks");
    // The init container's clone of the modules.
    std::os::unix::fs::symlink(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("resources/terraform/modules"),
        local(mount::MODULES_DIR),
    )
    .unwrap();

    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for variable in container.env.iter().flatten() {
        let value = match (&variable.value, &variable.value_from) {
            (Some(value), _) => local(value),
            (None, Some(from)) => {
                // The downward API, for the fields the Job uses.
                let field = from.field_ref.as_ref().expect("only fieldRef is used").field_path.as_str();
                let labels = pod.metadata.labels.clone().unwrap_or_default();
                match field.strip_prefix("metadata.labels['").and_then(|rest| rest.strip_suffix("']")) {
                    Some(label) => labels.get(label).cloned().expect("the pod has the label"),
                    None if field == "metadata.namespace" => namespace.clone(),
                    None if field == "metadata.name" => pod_name.clone(),
                    None => panic!("the stand-in does not fill {field}"),
                }
            }
            (None, None) => String::new(),
        };
        env.insert(variable.name.clone(), value);
    }
    // What the node and the image provide: its identity (the pod's ServiceAccount), the termination log, the tools
    // and providers in the image (here the test mirror with its lock files), and the cloud (moto,
    // reached through AWS_ENDPOINT_URL as the image would reach AWS).
    let service_account = spec.service_account_name.as_deref().unwrap();
    let kubeconfig = root.path().join("kubeconfig");
    engine.control_plane.write_service_account_kubeconfig(namespace, service_account, &kubeconfig).await.unwrap();
    let termination_log = root.path().join("termination-log");
    let tofu = test_support::terraform::tofu_bin().display().to_string();
    env.extend([
        ("KUBECONFIG".to_owned(), kubeconfig.display().to_string()),
        ("RUNNER_TERMINATION_LOG".to_owned(), termination_log.display().to_string()),
        ("RUNNER_TERRAFORM_BINARY".to_owned(), tofu),
        ("RUNNER_KUBECONFIG_POLL_INTERVAL".to_owned(), "1s".to_owned()),
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), root.path().display().to_string()),
        ("TF_CLI_CONFIG_FILE".to_owned(), test_providers().cli_config.display().to_string()),
        ("RUNNER_PROVIDER_LOCK_DIR".to_owned(), test_providers().lock_dir.display().to_string()),
    ]);
    env.extend(
        moto.env().into_iter().filter(|(name, _)| !name.starts_with("AWS_ACCESS") && !name.starts_with("AWS_SECRET")),
    );
    env.extend(extra_env.iter().map(|(name, value)| (name.to_string(), value.to_string())));

    let command = container.command.as_ref().unwrap();
    assert_eq!(command, &["terraform-runner"], "the Job starts the runner binary of the image");
    // Scheduled onto the test node: the API server serves the pod's logs from what the runner prints here.
    let control_plane = engine.control_plane;
    control_plane.bind_pod(namespace, &pod_name).await.expect("bind the pod to the test node");
    control_plane.end_log(namespace, &pod_name, "init");
    let mut child = tokio::process::Command::new(test_support::terraform_runner_bin())
        .args(container.args.iter().flatten())
        .env_clear()
        .envs(&env)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start terraform-runner");
    let pid = child.id().expect("running") as libc::pid_t;
    let printed = tokio::spawn(print_to_node_log(
        (child.stdout.take().unwrap(), child.stderr.take().unwrap()),
        control_plane,
        namespace.clone(),
        pod_name.clone(),
    ));
    // The kubelet's part of a pod's deletion (a stopped Job): SIGTERM to the container, then its grace period.
    let pods = Api::<Pod>::namespaced(engine.admin.clone(), namespace);
    let deleted = async {
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            match pods.get_opt(&pod_name).await {
                Ok(Some(pod)) if pod.metadata.deletion_timestamp.is_none() => {}
                Ok(_) => return,
                Err(error) => eprintln!("the kubelet stand-in could not read pod {pod_name}: {error}"),
            }
        }
    };
    let (status, stopped) = tokio::select! {
        status = child.wait() => (status, false),
        () = deleted => {
            unsafe { libc::kill(pid, libc::SIGTERM) };
            (child.wait().await, true)
        }
    };
    let exit_code = status.expect("run terraform-runner").code().expect("exited");
    let output = printed.await.expect("the runner's output");
    control_plane.end_log(namespace, &pod_name, RUNNER_CONTAINER);
    let termination_message = std::fs::read_to_string(&termination_log).unwrap_or_default();
    if stopped {
        // Its containers have stopped: the pod being deleted goes.
        control_plane.remove_pod(namespace, &pod_name).await.expect("remove the stopped pod");
    } else {
        control_plane
            .terminate_pod(namespace, &pod_name, RUNNER_CONTAINER, exit_code, &termination_message)
            .await
            .expect("report the pod's end");
    }
    PodRun { exit_code, output, termination_message }
}

/// Appends each line the runner prints (stdout and stderr, as they come) to its container's log on the test node,
/// as a container runtime does; returns all of it.
async fn print_to_node_log(
    (stdout, stderr): (tokio::process::ChildStdout, tokio::process::ChildStderr),
    control_plane: &'static test_control_plane::ControlPlane,
    namespace: String,
    pod: String,
) -> String {
    use tokio::io::AsyncBufReadExt as _;
    let (mut stdout, mut stderr) =
        (tokio::io::BufReader::new(stdout).lines(), tokio::io::BufReader::new(stderr).lines());
    let (mut stdout_open, mut stderr_open) = (true, true);
    let mut output = String::new();
    while stdout_open || stderr_open {
        let line = tokio::select! {
            line = stdout.next_line(), if stdout_open => line.ok().flatten().or_else(|| { stdout_open = false; None }),
            line = stderr.next_line(), if stderr_open => line.ok().flatten().or_else(|| { stderr_open = false; None }),
        };
        if let Some(line) = line {
            let line = format!("{line}\n");
            control_plane.write_log(&namespace, &pod, RUNNER_CONTAINER, &line);
            output.push_str(&line);
        }
    }
    output
}

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
    assert!(applied.output.contains("Apply complete! Resources: 30 added"), "{}", applied.output);
    let summary: runner_contract::plan::PlanSummary = serde_json::from_str(&applied.termination_message).unwrap();
    assert_eq!((summary.add, summary.change, summary.destroy), (30, 0, 0), "the apply plan's summary: {summary:?}");
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["planSummary"]["add"], 30, "the status shows what the plan created: {done}");
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
    assert_eq!((summary.add, summary.destroy), (0, 30), "the destroy plan's summary: {summary:?}");
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
        serde_json::json!(["terraform.tfstate", "terraform.tfstate.holder.json"]),
        "the lock is released, the state kept (with the record of the run that held the lock)"
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
