//! The whole path with the real terraform-runner in the Job: a request to the REST API, the engine's credentials
//! Secret, rendered ConfigMap and Job on the test control plane, then the Job's pod run by a kubelet stand-in that
//! starts the real `terraform-runner` binary exactly as the pod spec says (its command, arguments, environment,
//! volumes and ServiceAccount), against moto with OpenTofu; then the service reads the published kubeconfig, and
//! deprovisioning destroys and removes the state bucket. This is where the service's side of the contract (Job
//! spec, file names, runner.json, credential files, RBAC) meets the runner's.
//!
//! One substitution: the rendered `main.tf` needs the AWS provider and the modules, which cannot be downloaded
//! here, so the stand-in swaps it for built-in resources with the same state bucket (from the rendered
//! runner.json) on moto. Everything else the runner reads is what the service wrote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use serde_json::Value;
use test_support::engine::Engine;
use test_support::moto::MotoServer;
use test_support::{Backend, provision_body};

const WAIT: Duration = Duration::from_secs(60);
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n# published by the cluster\n";

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
    let config_dir = PathBuf::from(local("/etc/provisioner/config"));
    assert!(config_dir.join("runner.json").is_file(), "the ConfigMap is mounted where the runner looks");
    replace_main_tf(&config_dir, moto);

    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for variable in container.env.iter().flatten() {
        let value = match (&variable.value, &variable.value_from) {
            (Some(value), _) => local(value),
            (None, Some(from)) => {
                let field = from.field_ref.as_ref().expect("only fieldRef is used").field_path.as_str();
                assert_eq!(field, "metadata.namespace");
                namespace.clone()
            }
            (None, None) => String::new(),
        };
        env.insert(variable.name.clone(), value);
    }
    // What the node provides: its identity (the pod's ServiceAccount), the termination log, the tools in the
    // image, and the cloud (moto, reached through AWS_ENDPOINT_URL as the image would reach AWS).
    let service_account = spec.service_account_name.as_deref().unwrap();
    let kubeconfig = root.path().join("kubeconfig");
    engine.control_plane.write_service_account_kubeconfig(namespace, service_account, &kubeconfig).await.unwrap();
    let termination_log = root.path().join("termination-log");
    let tofu = std::env::var("TEST_TOFU_BIN").expect("TEST_TOFU_BIN: run `make tofu`");
    env.extend([
        ("KUBECONFIG".to_owned(), kubeconfig.display().to_string()),
        ("RUNNER_TERMINATION_LOG".to_owned(), termination_log.display().to_string()),
        ("RUNNER_TERRAFORM_BINARY".to_owned(), tofu),
        ("RUNNER_KUBECONFIG_POLL_INTERVAL".to_owned(), "1s".to_owned()),
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), root.path().display().to_string()),
    ]);
    env.extend(
        moto.env().into_iter().filter(|(name, _)| !name.starts_with("AWS_ACCESS") && !name.starts_with("AWS_SECRET")),
    );
    env.extend(extra_env.iter().map(|(name, value)| (name.to_string(), value.to_string())));

    let command = container.command.as_ref().unwrap();
    assert_eq!(command, &["terraform-runner"], "the Job starts the runner binary of the image");
    let output = tokio::process::Command::new(test_support::terraform_runner_bin())
        .args(container.args.iter().flatten())
        .env_clear()
        .envs(&env)
        .output()
        .await
        .expect("run terraform-runner");
    let exit_code = output.status.code().expect("exited");
    let termination_message = std::fs::read_to_string(&termination_log).unwrap_or_default();
    engine
        .control_plane
        .terminate_pod(namespace, &pod_name, "terraform-runner", exit_code, &termination_message)
        .await
        .expect("report the pod's end");
    PodRun {
        exit_code,
        output: format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        termination_message,
    }
}

/// Built-in resources with the rendered run's state bucket and region on moto, and the output a vanilla
/// configuration has, pointing under the SSM prefix the service rendered.
fn replace_main_tf(config_dir: &Path, moto: &MotoServer) {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(config_dir.join("runner.json")).unwrap()).unwrap();
    let backend = moto.s3_backend(manifest["stateBucket"].as_str().unwrap(), manifest["region"].as_str().unwrap());
    let main_tf = format!(
        r#"{backend}
resource "terraform_data" "cluster" {{
  input = "{name}"
}}

output "kubeconfig_ssm_parameter" {{
  value = "{prefix}generation-1/kubeconfig"
}}
"#,
        name = manifest["runtimeName"].as_str().unwrap(),
        prefix = manifest["ssmParameterPrefix"].as_str().expect("a vanilla run names its SSM prefix"),
    );
    std::fs::write(config_dir.join("main.tf"), main_tf).unwrap();
}

#[tokio::test]
async fn a_vanilla_cluster_is_provisioned_and_deprovisioned_by_the_real_runner() {
    let moto = MotoServer::start().await;
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let body = provision_body("pipeline");
    let region = body["clusterConfig"]["region"].as_str().unwrap().to_owned();
    let (runtime_id, _) = engine.provision(&body).await;
    let bucket = "kubeopera-terraform-state-dev-pipeline";
    let bucket_exists =
        || moto.aws_command().args(["s3api", "head-bucket", "--bucket", bucket]).output().unwrap().status.success();
    // The cluster's control plane publishes its kubeconfig (here: ahead of time, in the cluster's region).
    let parameter = format!("/kubeopera/{runtime_id}/generation-1/kubeconfig");
    moto.aws(&[
        "ssm",
        "put-parameter",
        "--region",
        &region,
        "--name",
        &parameter,
        "--type",
        "SecureString",
        "--value",
        KUBECONFIG,
    ]);

    let applied = run_job_pod(&engine, &moto, &format!("provision-{runtime_id}"), &[]).await;
    assert_eq!(applied.exit_code, 0, "the runner failed: {}\n{}", applied.termination_message, applied.output);
    assert!(applied.output.contains("Apply complete!"), "{}", applied.output);
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.text, KUBECONFIG);
    assert!(bucket_exists(), "the state bucket the service named exists");

    let accepted = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let destroyed = run_job_pod(&engine, &moto, &format!("deprovision-{runtime_id}"), &[]).await;
    assert_eq!(destroyed.exit_code, 0, "the runner failed: {}\n{}", destroyed.termination_message, destroyed.output);
    assert!(destroyed.output.contains("Destroy complete! Resources: 1 destroyed."), "{}", destroyed.output);
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(
        (done["operation"].as_str(), done["status"].as_str()),
        (Some("deprovision"), Some("succeeded")),
        "{done}"
    );
    assert!(!bucket_exists(), "the state bucket is removed");
    let left = moto.aws(&[
        "ssm",
        "get-parameters-by-path",
        "--region",
        &region,
        "--path",
        "/kubeopera",
        "--recursive",
        "--output",
        "json",
    ]);
    assert_eq!(
        serde_json::from_str::<Value>(&left).unwrap()["Parameters"],
        serde_json::json!([]),
        "parameters removed"
    );
    let pods = Api::<Pod>::namespaced(engine.admin.clone(), &engine.namespace);
    assert!(pods.list(&Default::default()).await.unwrap().items.len() >= 2, "both Jobs ran a pod");
    process.stop().await;
}

#[tokio::test]
async fn a_failing_runner_reports_its_message_through_the_api() {
    let moto = MotoServer::start().await;
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, operation_id) = engine.provision(&provision_body("pipeline-fails")).await;
    // The cluster never publishes its kubeconfig: the runner gives up after its (here short) wait.
    let job = format!("provision-{runtime_id}");
    let failed = run_job_pod(&engine, &moto, &job, &[("RUNNER_KUBECONFIG_TIMEOUT", "3s")]).await;
    assert_eq!(failed.exit_code, 1, "{}", failed.output);
    let parameter = format!("/kubeopera/{runtime_id}/generation-1/kubeconfig");
    assert!(failed.termination_message.contains(&parameter), "{}", failed.termination_message);
    // Until the worker has handled the failed Job, the live status can only show the Job's own reason.
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let done = engine.wait_for_status(&runtime_id, &["failed"], WAIT).await;
    let error = &done["lastError"];
    assert_eq!(error["component"], "terraform-runner", "{done}");
    let text = error["errMessage"].as_str().unwrap();
    assert!(text.contains(&parameter), "the operation says which parameter never appeared: {text}");
    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "no kubeconfig after a failure: {}", answer.text);
    process.stop().await;
}
