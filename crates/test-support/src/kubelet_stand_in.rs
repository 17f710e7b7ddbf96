//! A kubelet stand-in for the Job's pod: it starts the real `terraform-runner` binary exactly as the pod spec says
//! (its command, arguments, environment, volumes and ServiceAccount) as a process of this machine, against moto with
//! OpenTofu, and reports the pod's end to the API server. It plays the init container by putting the repository's
//! modules where it clones them. The engine tests use it where a pod must be held or stopped at a chosen moment;
//! `tests/integration/end_to_end.rs` runs the same pods in containers on the real node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use provisioner::executor::RUNNER_CONTAINER;
use runner_contract::environment::mount;

use crate::engine::Engine;
use crate::moto::MotoServer;
use crate::terraform::test_providers;

/// What happened to the pod.
pub struct PodRun {
    pub exit_code: i32,
    pub output: String,
    pub termination_message: String,
}

/// Runs the Job's pod the way a kubelet would, with the real runner, then reports its end to the API server.
/// `extra_env` is what a node operator could add to the pod (here: shorter waits).
pub async fn run_job_pod(engine: &Engine, moto: &MotoServer, job: &str, extra_env: &[(&str, &str)]) -> PodRun {
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
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../resources/terraform/modules")),
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
    let tofu = crate::terraform::tofu_bin().display().to_string();
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
    let mut child = tokio::process::Command::new(crate::terraform_runner_bin())
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
