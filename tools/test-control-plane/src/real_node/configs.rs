//! The real node's configuration files: containerd's, the one CNI network and the kubelet's. Each keeps the node's
//! state in its own folder and off the host, and listens on 127.0.0.1 only; the comments say what each setting
//! avoids (found by the prototype on this project's CI machine: cgroup v1, root without CAP_SYS_RESOURCE).

use std::path::Path;

/// containerd with its state, its shims' sockets (`socket_dir`, at most 42 characters), runc's state and pod network
/// namespaces in `dir`. Plugins that would use host paths are off: `opt` (/opt/containerd), NRI (/var/run/nri).
pub(super) fn containerd(dir: &Path, bin_dir: &Path, sandbox_image: &str) -> String {
    let dir = dir.display();
    let bin_dir = bin_dir.display();
    format!(
        r#"version = 3
root = "{dir}/containerd/root"
state = "{dir}/containerd/state"
temp = "{dir}/containerd/tmp"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{dir}/containerd/containerd.sock"
[ttrpc]
  address = "{dir}/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
  level = "info"
[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = "{dir}/s"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{sandbox_image}"
  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    # Without CAP_SYS_RESOURCE runc cannot give a sandbox its oom_score_adj of -998: clamp to containerd's own.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "/usr/sbin/runc"
          Root = "{dir}/containerd/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{bin_dir}/cni"]
      conf_dir = "{dir}/cni/net.d"
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
"#
    )
}

/// Without any network configuration the runtime reports NetworkReady=false and the node stays NotReady. Pods on
/// the host network never use it; any other pod's sandbox fails (loopback gives it no address), which its events say.
pub(super) const CNI_NETWORK: &str =
    r#"{"cniVersion": "1.0.0", "name": "loopback-only", "plugins": [{"type": "loopback"}]}"#;

/// Where the kubelet finds the control plane's files and its own.
pub(super) struct KubeletPaths<'a> {
    pub dir: &'a Path,
    pub control_plane_dir: &'a Path,
    pub cgroup: &'a str,
    pub port: u16,
}

/// The kubelet serves with the API server's certificate (CA-signed for 127.0.0.1), as the fake node does, and
/// authenticates the API server's client certificate against the control plane's CA.
pub(super) fn kubelet(paths: &KubeletPaths<'_>) -> String {
    let KubeletPaths { dir, control_plane_dir, cgroup, port } = paths;
    let (dir, control_plane_dir) = (dir.display(), control_plane_dir.display());
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
# A private root, created in every hierarchy beforehand: all pod cgroups go below it and are removed with it.
cgroupRoot: /{cgroup}
cgroupsPerQOS: true
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://{dir}/containerd/containerd.sock
address: 127.0.0.1
port: {port}
readOnlyPort: 0
healthzPort: 0
tlsCertFile: {control_plane_dir}/apiserver.crt
tlsPrivateKeyFile: {control_plane_dir}/apiserver.key
authentication:
  anonymous: {{enabled: false}}
  x509: {{clientCAFile: {control_plane_dir}/ca.crt}}
  webhook: {{enabled: true}}
authorization:
  mode: Webhook
podLogsDir: {dir}/kubelet/pod-logs
failSwapOn: false
# No evictions and no image garbage collection on a shared test machine.
evictionHard: {{}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusReportFrequency: 10s
# Without CAP_SYS_RESOURCE the default -999 cannot be set.
oomScoreAdj: 0
# Otherwise the kubelet adds KUBE-FIREWALL and canary chains to the host's iptables.
makeIPTablesUtilChains: false
"#
    )
}
