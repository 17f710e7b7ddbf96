//! Runs the test control plane in the foreground for local development, until Ctrl-C.
//!
//! Usage: `dev-cluster [KUBECONFIG_PATH]` with TEST_CONTROL_PLANE_BIN_DIR set (`make dev-cluster`).
//! The admin kubeconfig goes to the argument, else $DEV_CLUSTER_KUBECONFIG, else
//! `data/dev-cluster/kubeconfig`; it is removed again on exit, as is all cluster state.

use std::path::PathBuf;
use std::process::ExitCode;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use test_control_plane::{ControlPlane, Result};
use tokio::signal::unix::{SignalKind, signal};

const KUBECONFIG_ENV: &str = "DEV_CLUSTER_KUBECONFIG";
const DEFAULT_KUBECONFIG: &str = "data/dev-cluster/kubeconfig";
/// The namespace the service provisions into by default.
const NAMESPACE: &str = "kubeopera-provisioning";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("dev-cluster: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let kubeconfig = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os(KUBECONFIG_ENV))
        .map_or_else(|| PathBuf::from(DEFAULT_KUBECONFIG), PathBuf::from);
    let kubeconfig = std::path::absolute(kubeconfig)?;

    eprintln!("starting etcd, kube-apiserver and kube-controller-manager...");
    let control_plane = ControlPlane::start().await?;
    if let Some(parent) = kubeconfig.parent() {
        std::fs::create_dir_all(parent)?;
    }
    control_plane.write_kubeconfig(&kubeconfig)?;
    let namespace = Namespace {
        metadata: ObjectMeta { name: Some(NAMESPACE.into()), ..ObjectMeta::default() },
        ..Namespace::default()
    };
    Api::<Namespace>::all(control_plane.admin_client()?).create(&PostParams::default(), &namespace).await?;

    println!(
        "Kubernetes API server at {} (admin kubeconfig: {path}), namespace {NAMESPACE} created.\n\
         Point the service at it with:\n\n    KUBECONFIG={path} make run\n\n\
         Press Ctrl-C to stop; all cluster state is discarded.",
        control_plane.server_url(),
        path = kubeconfig.display(),
    );

    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result?,
        _ = terminate.recv() => {}
    }
    eprintln!("stopping...");
    drop(control_plane);
    std::fs::remove_file(&kubeconfig)?;
    Ok(())
}
