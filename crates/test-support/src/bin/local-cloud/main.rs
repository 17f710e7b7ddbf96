//! `make run`: the service on the embedded SQLite database and, unless `KUBECONFIG` names a cluster already, a
//! cluster and a cloud on this machine for its Jobs: the test control plane with the real node (kubelet,
//! containerd, runc), the image, moto as AWS and a git server with the modules.
//!
//! The API answers at once: the service starts without a cluster (operations wait in the queue) and shows the
//! set-up on `/readyz`. What the cluster and cloud need is built by the project's scripts on the first run (cached
//! in ~/.cache/kubeopera-provisioner and shared with `make test-really-local`, so later runs start in seconds),
//! then they start and the service is restarted pointed at them; queued operations then run. Ctrl-C stops
//! everything: the cluster and the cloud are discarded, the database is kept. The cluster needs root, as the real
//! node does; without it the service runs alone, as it does with a cluster of the user's.

mod cloud;
mod service;
mod setup;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use test_control_plane::{ControlPlane, RealNode};

use self::cloud::LocalCloud;
use self::service::ServiceProcess;
use self::setup::{Built, Progress, Timings};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The folder, under the repository, of what one run keeps: the kubeconfig and the set-up's progress.
const STATE_DIR: &str = "data/local-cloud";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("make run: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The builds run before any thread starts, so that their results can be put into this process's environment,
/// where the control plane, the node and moto look for their programs.
fn run() -> Result<(), Error> {
    let repository = std::env::current_dir()?;
    let bin_dir = std::env::current_exe()?.parent().ok_or("the program has no folder")?.to_owned();
    let provisioner = bin_dir.join("provisioner");
    if std::env::var_os("KUBECONFIG").is_some() {
        eprintln!("make run: KUBECONFIG is set: the service drives that cluster");
        return ServiceProcess::start(&provisioner, &[])?.wait();
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "make run: the local cluster's node needs root (kubelet, containerd, runc): the service runs without a \
             cluster and operations wait in the queue; set KUBECONFIG to use a cluster of your own"
        );
        return ServiceProcess::start(&provisioner, &[])?.wait();
    }
    let state = repository.join(STATE_DIR);
    std::fs::create_dir_all(&state)?;
    let progress = Progress::new(state.join("setup.json"), Timings::load());
    let service = ServiceProcess::start(&provisioner, &[("APP_SETUP_PROGRESS_FILE", progress.file().into())])?;
    let built = match setup::build(&repository, &bin_dir, &progress, &service) {
        Ok(built) => built,
        Err(error) => {
            eprintln!("make run: {error}; the service keeps running without a cluster (Ctrl-C stops it)");
            return service.wait();
        }
    };
    for (name, value) in &built.variables {
        // SAFETY: no other thread runs yet (the runtime is built below), so nothing reads the environment now.
        unsafe { std::env::set_var(name, value) };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve_with_the_local_cloud(&repository, &state, &provisioner, service, &built, &progress))
}

/// Starts the cluster and the cloud, restarts the service pointed at them, and keeps everything up until Ctrl-C or
/// until the service ends.
async fn serve_with_the_local_cloud(
    repository: &Path,
    state: &Path,
    provisioner: &Path,
    service: ServiceProcess,
    built: &Built,
    progress: &Progress,
) -> Result<(), Error> {
    progress.start_step(setup::START)?;
    let control_plane = ControlPlane::start().await?;
    let node = RealNode::start(&control_plane).await?;
    let _scheduler = node.schedule_pods()?;
    node.import_image(&built.image).await?;
    let cloud = LocalCloud::start(&control_plane, repository, &state.join("kubeconfig")).await?;
    progress.finish()?;
    service.stop();
    let service = ServiceProcess::start(provisioner, &cloud.service_variables())?;
    eprintln!(
        "make run: ready in {}: Jobs run on the node {} of the cluster at {} (kubeconfig {}), AWS is moto at {}; \
         Ctrl-C stops everything",
        humantime::format_duration(Duration::from_secs(progress.elapsed_seconds())),
        node.name(),
        control_plane.server_url(),
        cloud.kubeconfig().display(),
        cloud.aws_endpoint(),
    );
    wait_until_stopped(&service).await?;
    service.stop();
    drop(cloud);
    let _ = std::fs::remove_file(state.join("kubeconfig"));
    Ok(())
}

/// Until Ctrl-C or SIGTERM, or until the service ends on its own (an error: it is logged above).
async fn wait_until_stopped(service: &ServiceProcess) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut exited = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            result = tokio::signal::ctrl_c() => return Ok(result?),
            _ = terminate.recv() => return Ok(()),
            _ = exited.tick() => {
                if let Some(status) = service.exit_status() {
                    return Err(format!("the service ended ({status})").into());
                }
            }
        }
    }
}
