//! A real Kubernetes control plane for integration tests and local development: etcd,
//! kube-apiserver and kube-controller-manager (Job, Deployment, ReplicaSet, garbage-collector, namespace,
//! service-account, TTL-after-finished and root-CA publisher controllers), built from the Go module proxy by
//! `tools/build-control-plane.sh`. There is no scheduler and no kubelet: Pods stay Pending until a
//! test finishes them with [`ControlPlane::terminate_pod`], as Kubernetes' own Job integration
//! tests do. A test that needs a pod's logs binds it to the one node, whose kubelet endpoint serves
//! the logs the test writes (see `node`). A test that needs containers to really run starts a
//! [`RealNode`] on a control plane of its own: kubelet, containerd and runc (needs root).
//!
//! Tests share one instance per test binary through [`shared`]; each test takes its own namespace
//! from [`ControlPlane::new_namespace`]. The binaries come from the folder named by
//! [`BIN_DIR_ENV`], which `tools/build-control-plane.sh` prints as its last line.
//!
//! The ServiceAccount admission plugin stays enabled, as in production: the controller manager
//! runs the service-account controller, which creates every namespace's `default` account that
//! Pods (and so Jobs) need.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

mod kubelet;
mod manifest;
mod node;
mod pki;
mod process;
mod real_node;

use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{ObjectMeta, PostParams};
use kube::config::AuthInfo;
use kube::{Api, Client, Config};
use tokio::sync::OnceCell;

use node::ContainerLogs;
pub use node::NODE_NAME;
use pki::Pki;
use process::Processes;
pub use real_node::{BUSYBOX_IMAGE, NODE_BIN_DIR_ENV, RealNode, Scheduler};

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The folder holding `etcd`, `kube-apiserver` and `kube-controller-manager`.
pub const BIN_DIR_ENV: &str = "TEST_CONTROL_PLANE_BIN_DIR";

const START_TIMEOUT: Duration = Duration::from_secs(120);
const WAIT_TIMEOUT: Duration = Duration::from_secs(60);
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// The root-CA publisher writes every namespace's `kube-root-ca.crt`, which the service-account token volume of
/// every pod mounts: without it a real kubelet leaves pods in ContainerCreating. The Deployment and ReplicaSet
/// controllers run the chart's Deployment on a real node. The signing controller issues the client certificates of
/// approved certificate signing requests, as kubeadm's controller manager does.
const CONTROLLERS: &str = "job-controller,garbage-collector-controller,namespace-controller,\
                           serviceaccount-controller,ttl-after-finished-controller,\
                           root-ca-certificate-publisher-controller,deployment-controller,replicaset-controller,\
                           certificatesigningrequest-signing-controller";

/// The control plane shared by all tests of this test binary, started on first use.
///
/// Only data (URL, certificates, child handles) is kept, never a [`Client`]: a client is bound to
/// the tokio runtime that built it, and every `#[tokio::test]` has its own runtime. The servers are
/// stopped and their files removed when the test binary exits, however it exits.
///
/// # Panics
/// If [`BIN_DIR_ENV`] is unset or the control plane fails to start (with the servers' log tails).
pub async fn shared() -> &'static ControlPlane {
    static SHARED: OnceCell<Result<ControlPlane, String>> = OnceCell::const_new();
    SHARED
        .get_or_init(|| async { ControlPlane::start().await.map_err(|error| error.to_string()) })
        .await
        .as_ref()
        .unwrap_or_else(|error| panic!("the test control plane did not start: {error}"))
}

/// What a test adds to a control plane's kube-apiserver, e.g. a structured authentication configuration.
#[derive(Debug, Default, Clone)]
pub struct ApiServerExtras {
    /// `(file name, contents)`, written readable by the owner only into the control plane's folder.
    pub files: Vec<(String, String)>,
    /// Added to the API server's flags after the usual ones, with `{dir}` replaced by that folder's path.
    pub args: Vec<String>,
    /// Added to kube-controller-manager's flags, e.g. `--cluster-signing-duration` for certificates that expire soon.
    pub controller_manager_args: Vec<String>,
    /// How long from now the API server's serving certificate is valid; practically forever when `None`.
    pub serving_valid_for: Option<std::time::Duration>,
}

pub struct ControlPlane {
    server_url: String,
    pki: Pki,
    processes: Processes,
    logs: std::sync::Arc<ContainerLogs>,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager from [`BIN_DIR_ENV`] and waits until
    /// they serve. Dropping the value stops them and removes their files.
    pub async fn start() -> Result<Self> {
        Self::start_with(ApiServerExtras::default()).await
    }

    /// [`ControlPlane::start`] with `extras` given to the API server. Its readiness does not wait for the JWT
    /// authenticators of an `--authentication-config`: they read their issuer's discovery document in the background.
    pub async fn start_with(extras: ApiServerExtras) -> Result<Self> {
        let bin_dir = bin_dir()?;
        let mut processes = Processes::new()?;
        let pki = Pki::generate(extras.serving_valid_for)?;
        let dir = processes.dir().to_path_buf();
        let file = |name: &str, contents: &str| -> Result<String> {
            let path = dir.join(name);
            write_private(&path, contents)?;
            Ok(path.display().to_string())
        };
        let ca = file("ca.crt", &pki.ca_pem)?;
        let ca_key = file("ca.key", &pki.ca_key_pem)?;
        let serving_cert = file("apiserver.crt", &pki.serving.cert_pem)?;
        let serving_key = file("apiserver.key", &pki.serving.key_pem)?;
        let service_account_key = file("service-account.key", &pki.service_account.private)?;
        let service_account_pub = file("service-account.pub", &pki.service_account.public)?;
        // The API server's client certificate for kubelets (as kubeadm's apiserver-kubelet-client, in system:masters).
        let kubelet_client_cert = file("apiserver-kubelet-client.crt", &pki.admin.cert_pem)?;
        let kubelet_client_key = file("apiserver-kubelet-client.key", &pki.admin.key_pem)?;
        for (name, contents) in &extras.files {
            file(name, contents)?;
        }
        let logs = std::sync::Arc::new(ContainerLogs::default());
        let kubelet_port = node::start_log_server(&pki.serving, logs.clone())?;
        let [etcd_port, etcd_peer_port, apiserver_port] = free_ports()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer_port}");

        processes.spawn(
            "etcd",
            &bin_dir.join("etcd"),
            &[
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={etcd_peer_url}"),
                format!("--initial-advertise-peer-urls={etcd_peer_url}"),
                format!("--initial-cluster=default={etcd_peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
        )?;
        let mut apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={apiserver_port}"),
            "--bind-address=127.0.0.1".into(),
            // Without a default route the API server cannot pick an address by itself.
            "--advertise-address=127.0.0.1".into(),
            format!("--tls-cert-file={serving_cert}"),
            format!("--tls-private-key-file={serving_key}"),
            format!("--client-ca-file={ca}"),
            "--authorization-mode=RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={service_account_pub}"),
            format!("--service-account-signing-key-file={service_account_key}"),
            "--allow-privileged=true".into(),
            format!("--kubelet-certificate-authority={ca}"),
            format!("--kubelet-client-certificate={kubelet_client_cert}"),
            format!("--kubelet-client-key={kubelet_client_key}"),
            "--kubelet-preferred-address-types=InternalIP".into(),
        ];
        let dir_path = dir.display().to_string();
        apiserver_args.extend(extras.args.iter().map(|arg| arg.replace("{dir}", &dir_path)));
        processes.spawn("kube-apiserver", &bin_dir.join("kube-apiserver"), &apiserver_args)?;

        let mut control_plane =
            Self { server_url: format!("https://127.0.0.1:{apiserver_port}"), pki, processes, logs };
        let admin = control_plane.admin_client()?;
        control_plane
            .wait_until("kube-apiserver to be ready", START_TIMEOUT, async || {
                let request = http::Request::get("/readyz").body(Vec::new()).ok()?;
                (admin.request_text(request).await.ok()? == "ok").then_some(())
            })
            .await?;

        let kubeconfig = dir.join("admin.kubeconfig");
        control_plane.write_kubeconfig(&kubeconfig)?;
        let mut controller_manager_args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--controllers={CONTROLLERS}"),
            "--leader-elect=false".into(),
            // Nothing scrapes its metrics or health endpoints.
            "--secure-port=0".into(),
            format!("--cluster-signing-cert-file={ca}"),
            format!("--cluster-signing-key-file={ca_key}"),
        ];
        controller_manager_args.extend(extras.controller_manager_args.iter().cloned());
        control_plane.processes.spawn(
            "kube-controller-manager",
            &bin_dir.join("kube-controller-manager"),
            &controller_manager_args,
        )?;
        // The service-account controller creating `default` proves the controller manager works.
        control_plane.wait_for_service_account("default", "default", &admin).await?;
        control_plane.register_node(kubelet_port).await?;
        Ok(control_plane)
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// `KUBERNETES_SERVICE_HOST` and `_PORT` naming the API server itself, for pods on the node's network: with no
    /// kube-proxy, the `kubernetes` Service's address leads nowhere.
    pub fn in_cluster_variables(&self) -> [(&'static str, String); 2] {
        let port = self.server_url.rsplit(':').next().unwrap_or_default().to_owned();
        [("KUBERNETES_SERVICE_HOST", "127.0.0.1".to_owned()), ("KUBERNETES_SERVICE_PORT", port)]
    }

    /// The PEM certificate of the CA that signed the API server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The PEM certificate the API server serves with.
    pub fn serving_certificate_pem(&self) -> &str {
        &self.pki.serving.cert_pem
    }

    /// The PEM certificate and key of `admin` (group `system:masters`), as a kubeadm admin kubeconfig holds them.
    pub fn admin_certificate_and_key(&self) -> (&str, &str) {
        (&self.pki.admin.cert_pem, &self.pki.admin.key_pem)
    }

    /// A client authenticated as `admin` in group `system:masters` (everything allowed).
    pub fn admin_client(&self) -> Result<Client> {
        self.client(AuthInfo {
            client_certificate_data: Some(BASE64.encode(&self.pki.admin.cert_pem)),
            client_key_data: Some(BASE64.encode(&self.pki.admin.key_pem).into()),
            ..AuthInfo::default()
        })
    }

    /// A client authenticated as exactly the ServiceAccount `namespace/name`, by a bound token
    /// for the API server's default audience. Its default namespace is the ServiceAccount's, as a pod's is.
    pub async fn client_for_service_account(&self, namespace: &str, name: &str) -> Result<Client> {
        let token = self.service_account_token(namespace, name, &[]).await?;
        let mut config = self.config(AuthInfo { token: Some(token.into()), ..AuthInfo::default() })?;
        config.default_namespace = namespace.to_owned();
        Ok(Client::try_from(config)?)
    }

    /// A client sending `token` as its bearer token.
    pub fn client_with_token(&self, token: impl Into<String>) -> Result<Client> {
        self.client(AuthInfo { token: Some(token.into().into()), ..AuthInfo::default() })
    }

    /// [`ControlPlane::client_for_service_account`] reaching the API server through `server_url` (for example a
    /// fault-injecting proxy on another loopback port; the serving certificate is for 127.0.0.1, any port).
    pub async fn client_for_service_account_via(
        &self,
        namespace: &str,
        name: &str,
        server_url: &str,
    ) -> Result<Client> {
        let token = self.service_account_token(namespace, name, &[]).await?;
        let mut config = Config::new(server_url.parse()?);
        config.root_cert = Some(vec![self.pki.ca_der.clone()]);
        config.auth_info = AuthInfo { token: Some(token.into()), ..AuthInfo::default() };
        config.default_namespace = namespace.to_owned();
        Ok(Client::try_from(config)?)
    }

    /// Mints a token for the ServiceAccount `namespace/name` by TokenRequest; no `audiences`
    /// means the API server's default audience.
    pub async fn service_account_token(&self, namespace: &str, name: &str, audiences: &[&str]) -> Result<String> {
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(audiences.iter().map(ToString::to_string).collect()),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let response = Api::<ServiceAccount>::namespaced(self.admin_client()?, namespace)
            .create_token_request(name, &PostParams::default(), &request)
            .await?;
        let token = response.status.and_then(|status| status.token);
        Ok(token.ok_or("the TokenRequest response has no token")?)
    }

    /// Creates a namespace with a unique name starting with `prefix` and waits for its `default`
    /// ServiceAccount, without which the ServiceAccount admission plugin rejects Pods.
    pub async fn new_namespace(&self, prefix: &str) -> Result<String> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("{prefix}-{}", COUNT.fetch_add(1, Ordering::Relaxed));
        let admin = self.admin_client()?;
        let namespace = Namespace {
            metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
            ..Namespace::default()
        };
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace).await?;
        self.wait_for_service_account(&name, "default", &admin).await?;
        Ok(name)
    }

    /// Writes a kubeconfig for the admin identity (JSON, which every YAML reader accepts),
    /// readable by the owner only.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        let admin = serde_json::json!({
            "client-certificate-data": BASE64.encode(&self.pki.admin.cert_pem),
            "client-key-data": BASE64.encode(&self.pki.admin.key_pem),
        });
        self.write_kubeconfig_as(path, "admin", admin, None, &self.server_url)
    }

    /// Writes a kubeconfig for the ServiceAccount `namespace/name` (a TokenRequest token), the way a
    /// pod running as it reaches the API server; readable by the owner only.
    pub async fn write_service_account_kubeconfig(&self, namespace: &str, name: &str, path: &Path) -> Result<()> {
        self.write_service_account_kubeconfig_via(namespace, name, path, &self.server_url).await
    }

    /// [`ControlPlane::write_service_account_kubeconfig`] reaching the API server through `server_url` (a proxy).
    pub async fn write_service_account_kubeconfig_via(
        &self,
        namespace: &str,
        name: &str,
        path: &Path,
        server_url: &str,
    ) -> Result<()> {
        let token = self.service_account_token(namespace, name, &[]).await?;
        self.write_kubeconfig_as(path, name, serde_json::json!({ "token": token }), Some(namespace), server_url)
    }

    fn write_kubeconfig_as(
        &self,
        path: &Path,
        user_name: &str,
        user: serde_json::Value,
        namespace: Option<&str>,
        server_url: &str,
    ) -> Result<()> {
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test-control-plane", "cluster": {
                "server": server_url,
                "certificate-authority-data": BASE64.encode(&self.pki.ca_pem),
            }}],
            "users": [{"name": user_name, "user": user}],
            "contexts": [{"name": "test-control-plane", "context": {
                "cluster": "test-control-plane",
                "user": user_name,
                "namespace": namespace,
            }}],
            "current-context": "test-control-plane",
        });
        write_private(path, &serde_json::to_string_pretty(&kubeconfig)?)
    }

    /// The last lines of each server's log.
    pub fn log_tail(&self) -> String {
        self.processes.log_tail()
    }

    /// Prints [`Self::log_tail`] to stderr, e.g. when a test fails for unclear reasons.
    pub fn dump_logs(&self) {
        eprintln!("{}", self.log_tail());
    }

    fn client(&self, auth_info: AuthInfo) -> Result<Client> {
        Ok(Client::try_from(self.config(auth_info)?)?)
    }

    fn config(&self, auth_info: AuthInfo) -> Result<Config> {
        let mut config = Config::new(self.server_url.parse()?);
        config.root_cert = Some(vec![self.pki.ca_der.clone()]);
        config.auth_info = auth_info;
        Ok(config)
    }

    async fn wait_for_service_account(&self, namespace: &str, name: &str, admin: &Client) -> Result<()> {
        let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), namespace);
        let what = format!("ServiceAccount {namespace}/{name}");
        let found = async || accounts.get_opt(name).await.ok()?.map(drop);
        self.wait_until(&what, WAIT_TIMEOUT, found).await
    }

    /// Polls `ready` until it returns `Some`, failing with the logs if a server exits or on timeout.
    async fn wait_until<T>(&self, what: &str, timeout: Duration, ready: impl AsyncFnMut() -> Option<T>) -> Result<T> {
        poll_until(what, timeout, &[&self.processes], ready).await
    }
}

/// Polls `ready` until it returns `Some`, failing with the logs if a server of `processes` exits or on timeout.
async fn poll_until<T>(
    what: &str,
    timeout: Duration,
    processes: &[&Processes],
    mut ready: impl AsyncFnMut() -> Option<T>,
) -> Result<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    let log_tail = || processes.iter().map(|processes| processes.log_tail()).collect::<String>();
    loop {
        if let Some(value) = ready().await {
            return Ok(value);
        }
        for servers in processes {
            servers.check_running()?;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}\n{}", log_tail()).into());
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

fn bin_dir() -> Result<PathBuf> {
    let dir = std::env::var_os(BIN_DIR_ENV).ok_or_else(|| {
        format!(
            "{BIN_DIR_ENV} is not set: run the tests through make (its control-plane target builds \
             the binaries), or `export {BIN_DIR_ENV}=$(tools/build-control-plane.sh | tail -n1)`"
        )
    })?;
    let dir = PathBuf::from(dir);
    for binary in ["etcd", "kube-apiserver", "kube-controller-manager"] {
        if !dir.join(binary).is_file() {
            return Err(format!("{BIN_DIR_ENV}={} has no {binary}: run `make control-plane`", dir.display()).into());
        }
    }
    Ok(dir)
}

/// Distinct free loopback ports, all held open until every one is chosen.
/// A loopback port nothing listens on right now (someone may take it before the caller binds it: callers retry).
/// The one helper of the workspace for it: the tests and the benchmark use it too.
pub fn free_port() -> u16 {
    free_ports::<1>().expect("bind a free loopback port")[0]
}

fn free_ports<const N: usize>() -> Result<[u16; N]> {
    let listeners = (0..N).map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0))).collect::<Result<Vec<_>, _>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

/// Writes a file readable by the owner only: it may hold a private key.
fn write_private(path: &Path, contents: &str) -> Result<()> {
    let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}
