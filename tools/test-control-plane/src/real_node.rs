//! A real node for the tests that need containers to run: kubelet v1.36, containerd v2 and Debian's runc, built by
//! `tools/build-node.sh` into the folder named by [`NODE_BIN_DIR_ENV`]. It registers with a control plane, runs
//! the pods bound to it ([`RealNode::bind_pod`], as there is no scheduler) and serves their logs to the API
//! server. Images come from archives imported into containerd ([`RealNode::import_image`]), never a registry.
//!
//! Its limits: it needs root (cgroups, mounts, runc), and runs host-network pods only (its one CNI network is
//! loopback), so nothing leaves 127.0.0.1. All its state lives in a folder of its own, outside the control plane's,
//! whose janitor runs the node's teardown (real_node/teardown.sh) when the node is dropped or the test process
//! exits in any way: the control plane's janitor must not remove containerd's socket and runc's state under it.

mod configs;
mod host;
mod scheduler;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus};
use kube::Api;
use kube::api::{Patch, PatchParams};

pub use self::scheduler::Scheduler;
use crate::process::{Processes, unique_suffix};
use crate::{ControlPlane, Result, START_TIMEOUT, free_port, poll_until};

/// The folder holding `kubelet`, `containerd`, `containerd-shim-runc-v2`, `ctr`, `cni/loopback` and the image
/// archives `pause.tar` and `busybox.tar`.
pub const NODE_BIN_DIR_ENV: &str = "TEST_NODE_BIN_DIR";

const NODE_FILES: [&str; 7] =
    ["kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "cni/loopback", "pause.tar", "busybox.tar"];

/// The image in `busybox.tar` (Debian's busybox-static: sh, echo, sleep, cat, ls), for pods with
/// `imagePullPolicy: Never`.
pub const BUSYBOX_IMAGE: &str = "localhost/test-node/busybox:1";

/// The image in `pause.tar`, every pod sandbox's.
const PAUSE_IMAGE: &str = "localhost/test-node/pause:1";

const TEARDOWN: &str = include_str!("real_node/teardown.sh");

/// How long containerd may take to import an image.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(60);

/// A kubelet with its containerd, registered as a Ready Node of the control plane it borrows, which therefore
/// outlives it. Dropping it stops everything of the node and undoes its host changes.
pub struct RealNode<'a> {
    control_plane: &'a ControlPlane,
    name: String,
    bin_dir: PathBuf,
    processes: Processes,
}

impl<'a> RealNode<'a> {
    /// Starts containerd (with the pause image) and the kubelet, gives the registered Node its address, and waits
    /// until it is Ready.
    pub async fn start(control_plane: &'a ControlPlane) -> Result<Self> {
        let bin_dir = node_bin_dir()?;
        let name = format!("real-node-{}", unique_suffix());
        // /tmp, not $TMPDIR: the shims' socket folder (<dir>/s) must be at most 42 characters long.
        let dir = Path::new("/tmp").join(&name);
        // The node's cgroup root is named like its folder: unique on this machine.
        let cgroup = name.as_str();
        let processes = Processes::with_janitor(dir.clone(), TEARDOWN, &[bin_dir.as_os_str(), OsStr::new(cgroup)])?;
        let mut node = Self { control_plane, name: name.clone(), bin_dir, processes };
        node.start_containerd(&dir).await?;
        node.import_image(&node.bin_dir.join("pause.tar")).await?;
        host::create_cgroup_root(cgroup)?;
        host::note_host_state(&dir)?;
        node.start_kubelet(&dir, cgroup)?;
        node.give_address().await?;
        node.wait_until_ready().await?;
        Ok(node)
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `busybox.tar`, holding [`BUSYBOX_IMAGE`].
    pub fn busybox_archive(&self) -> PathBuf {
        self.bin_dir.join("busybox.tar")
    }

    /// Imports an OCI image archive into containerd's Kubernetes namespace, where the kubelet finds it by the name
    /// the archive gives it.
    pub async fn import_image(&self, archive: &Path) -> Result<()> {
        let mut arguments = ["images", "import", "--snapshotter", "overlayfs"].map(OsStr::new).to_vec();
        arguments.push(archive.as_os_str());
        tokio::time::timeout(IMPORT_TIMEOUT, self.ctr(&arguments))
            .await
            .map_err(|_| format!("importing {} took over {IMPORT_TIMEOUT:?}\n{}", archive.display(), self.log_tail()))?
    }

    /// Binds the pod `namespace/pod` to this node through the Binding subresource, as kube-scheduler would.
    pub async fn bind_pod(&self, namespace: &str, pod: &str) -> Result<()> {
        self.control_plane.bind_pod_to_node(namespace, pod, &self.name).await
    }

    /// Binds every pod without a node to this one, as kube-scheduler would, until the returned guard is dropped:
    /// for pods that controllers create (a Deployment's, a Job's).
    pub fn schedule_pods(&self) -> Result<Scheduler> {
        Ok(scheduler::start(self.control_plane.admin_client()?, self.name.clone()))
    }

    /// The last lines of the kubelet's and containerd's logs.
    pub fn log_tail(&self) -> String {
        self.processes.log_tail()
    }

    /// Prints [`Self::log_tail`] to stderr, e.g. when a test fails for unclear reasons.
    pub fn dump_logs(&self) {
        eprintln!("{}", self.log_tail());
    }

    async fn start_containerd(&mut self, dir: &Path) -> Result<()> {
        for folder in ["containerd", "cni/net.d", "kubelet/root", "kubelet/pod-logs"] {
            fs::create_dir_all(dir.join(folder))?;
        }
        fs::write(dir.join("cni/net.d/10-loopback-only.conflist"), configs::CNI_NETWORK)?;
        let config = dir.join("containerd/config.toml");
        fs::write(&config, configs::containerd(dir, &self.bin_dir, PAUSE_IMAGE))?;
        // containerd finds its shim on PATH.
        let path = std::env::join_paths(
            std::iter::once(self.bin_dir.clone())
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )?;
        self.processes.spawn_with_env(
            "containerd",
            &self.bin_dir.join("containerd"),
            &[format!("--config={}", config.display())],
            &[("PATH", path.as_os_str())],
        )?;
        self.wait_until("containerd to serve", async || self.ctr(&[OsStr::new("version")]).await.ok()).await
    }

    fn start_kubelet(&mut self, dir: &Path, cgroup: &str) -> Result<()> {
        let control_plane_dir = self.control_plane.processes.dir();
        let paths = configs::KubeletPaths { dir, control_plane_dir, cgroup, port: free_port() };
        let config = dir.join("kubelet/config.yaml");
        fs::write(&config, configs::kubelet(&paths))?;
        self.processes.spawn(
            "kubelet",
            &self.bin_dir.join("kubelet"),
            &[
                format!("--config={}", config.display()),
                // The control plane's admin identity: the kubelet registers and updates its own Node with it.
                format!("--kubeconfig={}", control_plane_dir.join("admin.kubeconfig").display()),
                format!("--root-dir={}", dir.join("kubelet/root").display()),
                format!("--cert-dir={}", dir.join("kubelet/pki").display()),
                format!("--hostname-override={}", self.name),
                "--node-ip=127.0.0.1".into(),
                "--v=2".into(),
            ],
        )
    }

    /// The kubelet refuses a loopback --node-ip and then sets no address at all, keeping what the Node's status
    /// has; without an InternalIP the API server cannot reach it for logs. So the address is set once, as for the
    /// fake node, after the kubelet has registered the Node.
    async fn give_address(&self) -> Result<()> {
        let nodes = Api::<Node>::all(self.control_plane.admin_client()?);
        self.wait_until("the kubelet to register its Node", async || nodes.get_opt(&self.name).await.ok()?).await?;
        let address = |type_: &str, address: &str| NodeAddress { type_: type_.into(), address: address.into() };
        let status = Node {
            status: Some(NodeStatus {
                addresses: Some(vec![address("InternalIP", "127.0.0.1"), address("Hostname", &self.name)]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        };
        nodes.patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&status)).await?;
        Ok(())
    }

    async fn wait_until_ready(&self) -> Result<()> {
        let nodes = Api::<Node>::all(self.control_plane.admin_client()?);
        let ready = async || {
            let conditions = nodes.get(&self.name).await.ok()?.status?.conditions?;
            conditions.iter().any(|condition| condition.type_ == "Ready" && condition.status == "True").then_some(())
        };
        self.wait_until("the node to be Ready", ready).await
    }

    /// Runs `ctr <arguments>` against this node's containerd in the kubelet's namespace.
    async fn ctr(&self, arguments: &[&OsStr]) -> Result<()> {
        let socket = self.processes.dir().join("containerd/containerd.sock");
        let output = tokio::process::Command::new(self.bin_dir.join("ctr"))
            .arg("--address")
            .arg(&socket)
            .args(["--namespace", "k8s.io"])
            .args(arguments)
            .kill_on_drop(true)
            .output()
            .await?;
        if output.status.success() {
            return Ok(());
        }
        Err(format!("ctr {arguments:?}: {}", String::from_utf8_lossy(&output.stderr)).into())
    }

    async fn wait_until<T>(&self, what: &str, ready: impl AsyncFnMut() -> Option<T>) -> Result<T> {
        poll_until(what, START_TIMEOUT, &[&self.processes, &self.control_plane.processes], ready).await
    }
}

fn node_bin_dir() -> Result<PathBuf> {
    let dir = std::env::var_os(NODE_BIN_DIR_ENV).ok_or_else(|| {
        format!(
            "{NODE_BIN_DIR_ENV} is not set: run `make node` (tools/build-node.sh builds the kubelet, containerd and \
             the images and prints their folder) and `export {NODE_BIN_DIR_ENV}=$(tools/build-node.sh | tail -n1)`"
        )
    })?;
    let dir = PathBuf::from(dir);
    for file in NODE_FILES {
        if !dir.join(file).is_file() {
            return Err(format!("{NODE_BIN_DIR_ENV}={} has no {file}: run `make node`", dir.display()).into());
        }
    }
    Ok(dir)
}
