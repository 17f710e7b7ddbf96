//! The test node: a Node object whose kubelet endpoint is a small HTTPS server in this process that serves
//! container logs the way a kubelet does (`/containerLogs/<namespace>/<pod>/<container>`, with `tailLines` and
//! `follow`). The API server reaches it for `pods/log` like any kubelet, with its client certificate and the
//! CA that signed the node's serving certificate, so the provisioner's log reads go through the real path.
//!
//! Tests play the container runtime: they bind a pod to the node ([`ControlPlane::bind_pod`]), write what its
//! containers print ([`ControlPlane::write_log`]) and end each container's log ([`ControlPlane::end_log`]).
//! The server runs on a thread of its own, since every `#[tokio::test]` has its own runtime and the control
//! plane outlives them.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::{
    Binding, DaemonEndpoint, Node, NodeAddress, NodeDaemonEndpoints, NodeStatus, ObjectReference, Pod,
};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::pki::CertifiedKey;
use crate::{ControlPlane, Result};

/// The one node of the test control plane.
pub const NODE_NAME: &str = "test-node";

/// What the containers of bound pods printed, by (namespace, pod, container).
#[derive(Default)]
pub(crate) struct ContainerLogs {
    logs: Mutex<HashMap<(String, String, String), ContainerLog>>,
    changed: Notify,
    /// Counts [`ControlPlane::break_log_streams`]: a follower ends when it changes.
    breaks: std::sync::atomic::AtomicUsize,
    /// How many follow requests each container's log was asked, by (namespace, pod, container).
    follows: Mutex<HashMap<Key, usize>>,
}

#[derive(Default, Clone)]
struct ContainerLog {
    text: String,
    ended: bool,
}

type Key = (String, String, String);

impl ContainerLogs {
    fn update(&self, key: Key, change: impl FnOnce(&mut ContainerLog)) {
        change(self.logs.lock().expect("log store lock").entry(key).or_default());
        self.changed.notify_waiters();
    }

    fn get(&self, key: &Key) -> Option<ContainerLog> {
        self.logs.lock().expect("log store lock").get(key).cloned()
    }
}

/// Starts the log server on a free loopback port with `serving` as its certificate; returns its port.
pub(crate) fn start_log_server(serving: &CertifiedKey, logs: Arc<ContainerLogs>) -> Result<u16> {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(serving.key_der.clone()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(serving.cert_der.clone())], key)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    std::thread::Builder::new().name("test-node-kubelet".into()).spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("kubelet runtime");
        runtime.block_on(async move {
            let listener = TlsListener { tcp: TcpListener::from_std(listener).expect("kubelet listener"), acceptor };
            let app = Router::new()
                .route("/containerLogs/{namespace}/{pod}/{container}", get(container_log))
                .with_state(logs);
            axum::serve(listener, app).await.expect("the test node's log server");
        });
    })?;
    Ok(port)
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogQuery {
    #[serde(default)]
    follow: bool,
    tail_lines: Option<usize>,
}

async fn container_log(
    State(logs): State<Arc<ContainerLogs>>,
    Path(key): Path<Key>,
    Query(query): Query<LogQuery>,
) -> Response {
    let Some(log) = logs.get(&key) else {
        // What a kubelet answers for a container that has not started.
        let (_, pod, container) = &key;
        let message = format!("container \"{container}\" in pod \"{pod}\" is waiting to start: no log yet");
        return (StatusCode::BAD_REQUEST, message).into_response();
    };
    let start = match query.tail_lines {
        Some(lines) => tail_start(&log.text, lines),
        None => 0,
    };
    if !query.follow || log.ended {
        return log.text[start..].to_owned().into_response();
    }
    *logs.follows.lock().expect("log store lock").entry(key.clone()).or_default() += 1;
    // Follow: what is there, then each addition, until the container's log ends (or the connection "breaks").
    let breaks = logs.breaks.load(std::sync::atomic::Ordering::SeqCst);
    let stream = futures::stream::unfold((logs, key, start), move |(logs, key, sent)| async move {
        loop {
            let store = Arc::clone(&logs);
            let changed = store.changed.notified();
            if logs.breaks.load(std::sync::atomic::Ordering::SeqCst) != breaks {
                return None;
            }
            let log = logs.get(&key).unwrap_or_default();
            if log.text.len() > sent {
                let chunk = log.text[sent..].to_owned();
                let sent = log.text.len();
                return Some((Ok::<_, std::io::Error>(chunk), (logs, key, sent)));
            }
            if log.ended {
                return None;
            }
            changed.await;
        }
    });
    Body::from_stream(stream).into_response()
}

/// Where the last `lines` lines of `text` start.
fn tail_start(text: &str, lines: usize) -> usize {
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    trimmed.rmatch_indices('\n').nth(lines.saturating_sub(1)).map_or(0, |(index, _)| index + 1)
}

struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, address)) = self.tcp.accept().await else { continue };
            // A failed handshake only loses that connection.
            if let Ok(stream) = self.acceptor.accept(stream).await {
                return (stream, address);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

impl ControlPlane {
    /// Registers [`NODE_NAME`] with the log server as its kubelet endpoint, at the loopback address.
    pub(crate) async fn register_node(&self, kubelet_port: u16) -> Result<()> {
        let nodes = Api::<Node>::all(self.admin_client()?);
        let node =
            Node { metadata: ObjectMeta { name: Some(NODE_NAME.into()), ..ObjectMeta::default() }, ..Node::default() };
        nodes.create(&PostParams::default(), &node).await?;
        let status = Node {
            status: Some(NodeStatus {
                addresses: Some(vec![NodeAddress { type_: "InternalIP".into(), address: "127.0.0.1".into() }]),
                daemon_endpoints: Some(NodeDaemonEndpoints {
                    kubelet_endpoint: Some(DaemonEndpoint { port: i32::from(kubelet_port) }),
                }),
                ..NodeStatus::default()
            }),
            ..Node::default()
        };
        nodes.patch_status(NODE_NAME, &PatchParams::default(), &Patch::Merge(&status)).await?;
        Ok(())
    }

    /// Schedules the pod `namespace/pod` onto the test node, as kube-scheduler would: the API server then
    /// serves its logs from the node, and deleting it waits for the kubelet (the test) to finish it with
    /// [`ControlPlane::terminate_pod`] and [`ControlPlane::remove_pod`], as on a real node.
    pub async fn bind_pod(&self, namespace: &str, pod: &str) -> Result<()> {
        self.bind_pod_to_node(namespace, pod, NODE_NAME).await
    }

    /// Binds the pod `namespace/pod` to the Node `node` through the Binding subresource, as kube-scheduler does.
    pub(crate) async fn bind_pod_to_node(&self, namespace: &str, pod: &str, node: &str) -> Result<()> {
        bind(&self.admin_client()?, namespace, pod, node).await
    }

    /// The kubelet's last word on a pod being deleted: its containers have stopped, so it goes at once.
    pub async fn remove_pod(&self, namespace: &str, pod: &str) -> Result<()> {
        let pods = Api::<Pod>::namespaced(self.admin_client()?, namespace);
        match pods.delete(pod, &kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Appends `text` to what `container` of `namespace/pod` printed.
    pub fn write_log(&self, namespace: &str, pod: &str, container: &str, text: &str) {
        self.logs.update(key(namespace, pod, container), |log| log.text.push_str(text));
    }

    /// Ends every stream of a followed log now, as a dropped connection to the node would; the logs stay.
    pub fn break_log_streams(&self) {
        self.logs.breaks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.logs.changed.notify_waiters();
    }

    /// How many times the log of `container` was followed (the API server asked for it with `follow=true`).
    pub fn log_follows(&self, namespace: &str, pod: &str, container: &str) -> usize {
        let follows = self.logs.follows.lock().expect("log store lock");
        follows.get(&key(namespace, pod, container)).copied().unwrap_or(0)
    }

    /// Ends the log of `container`: a reader following it gets the end of its stream.
    pub fn end_log(&self, namespace: &str, pod: &str, container: &str) {
        self.logs.update(key(namespace, pod, container), |log| log.ended = true);
    }
}

fn key(namespace: &str, pod: &str, container: &str) -> Key {
    (namespace.to_owned(), pod.to_owned(), container.to_owned())
}

/// Binds `namespace/pod` to `node` through the Binding subresource, as kube-scheduler does.
pub(crate) async fn bind(client: &kube::Client, namespace: &str, pod: &str, node: &str) -> Result<()> {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let binding = Binding {
        metadata: ObjectMeta { name: Some(pod.into()), ..ObjectMeta::default() },
        target: ObjectReference { kind: Some("Node".into()), name: Some(node.into()), ..ObjectReference::default() },
    };
    let _status: serde_json::Value = pods.create_subresource("binding", pod, &PostParams::default(), &binding).await?;
    Ok(())
}
