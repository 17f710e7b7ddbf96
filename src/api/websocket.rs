//! GraphQL subscriptions over a WebSocket (graphql-transport-ws): the caller is authenticated from the
//! `connection_init` payload, which must come within the init timeout (else the socket is closed with 4408, as the
//! protocol says), and no message may be larger than an HTTP request's body. A socket outlives its token: the
//! token is reviewed again every re-authentication interval, and the socket is closed with 4403 once it is no
//! longer accepted (expired, revoked, or its user no longer allowed).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_graphql_axum::{GraphQLProtocol, GraphQLWebSocket};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt as _, StreamExt as _};

use super::authentication::Authentication;
use super::graphql::ProvisionerSchema;
use crate::domain::tenant::Tenant;
use crate::service::{Service, StreamSlot};

/// graphql-transport-ws: "Connection initialisation timeout".
const INIT_TIMEOUT_CLOSE_CODE: u16 = 4408;
/// graphql-transport-ws: "Forbidden", as for a refused `connection_init`.
const FORBIDDEN_CLOSE_CODE: u16 = 4403;

/// What a socket is held to.
#[derive(Clone)]
pub struct SocketLimits {
    pub init_timeout: Duration,
    pub max_message_bytes: usize,
    /// How often the caller's token is reviewed again while the socket is open.
    pub reauthentication_interval: Duration,
}

/// Who a socket answers to: the authentication of its `connection_init`, and the service that counts open sockets.
#[derive(Clone)]
pub struct SocketGate {
    pub authentication: Authentication,
    pub service: Service,
}

/// Who a socket answers to: its gate, and the tenant its upgrade request named.
pub struct Connection {
    pub gate: SocketGate,
    pub tenant: Option<Tenant>,
}

/// Upgrades the connection and serves subscriptions on it, for the tenant the upgrade request named.
pub fn upgrade(
    upgrade: WebSocketUpgrade,
    schema: ProvisionerSchema,
    protocol: GraphQLProtocol,
    connection: Connection,
    limits: SocketLimits,
) -> Response {
    upgrade
        .max_message_size(limits.max_message_bytes)
        .max_frame_size(limits.max_message_bytes)
        .protocols(async_graphql::http::ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |socket| serve(socket, schema, protocol, connection, limits))
}

/// The protocol's messages go out through a channel, so that the init deadline and the re-authentication can
/// close the socket themselves.
async fn serve(
    socket: WebSocket,
    schema: ProvisionerSchema,
    protocol: GraphQLProtocol,
    connection: Connection,
    limits: SocketLimits,
) {
    let Connection { gate: SocketGate { authentication, service }, tenant } = connection;
    let (mut socket_sink, socket_stream) = socket.split();
    let (outgoing, mut to_socket) = futures::channel::mpsc::channel::<Message>(16);
    // The accepted `connection_init` payload, to review its token again.
    let accepted: Arc<Mutex<Option<serde_json::Value>>> = Arc::default();
    // Its place among the caller's open sockets, held until the socket ends.
    let slot: Arc<Mutex<Option<StreamSlot>>> = Arc::default();
    let on_init = (accepted.clone(), authentication.clone(), slot.clone(), tenant.clone());
    let protocol_run = GraphQLWebSocket::new_with_pair(outgoing.clone(), socket_stream, schema, protocol)
        .on_connection_init(move |payload| async move {
            let (accepted, authentication, slot, tenant) = on_init;
            let identity = authentication
                .identify_connection(&payload, tenant.as_ref())
                .await
                .map_err(async_graphql::Error::new)?;
            let place = identity
                .service(&service)
                .open_socket(&identity.username)
                .map_err(|error| async_graphql::Error::new(error.to_string()))?;
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(place);
            *accepted.lock().unwrap_or_else(PoisonError::into_inner) = Some(payload);
            let mut data = async_graphql::Data::default();
            data.insert(identity);
            Ok(data)
        })
        .serve();
    let mut closer = outgoing;
    let driver = async move {
        let close = tokio::select! {
            () = protocol_run => None,
            close = watch_the_caller(&accepted, &authentication, tenant.as_ref(), &limits) => Some(close),
        };
        if let Some(close) = close {
            let _ = closer.send(Message::Close(Some(close))).await;
        }
    };
    let forward = async move {
        while let Some(message) = to_socket.next().await {
            let closing = matches!(message, Message::Close(_));
            if socket_sink.send(message).await.is_err() || closing {
                break;
            }
        }
    };
    tokio::join!(driver, forward);
    drop(slot);
}

/// Ends with the frame to close the socket with: when the caller has not been let in by the init deadline, or
/// later when its token is no longer accepted.
async fn watch_the_caller(
    accepted: &Mutex<Option<serde_json::Value>>,
    authentication: &Authentication,
    tenant: Option<&Tenant>,
    limits: &SocketLimits,
) -> CloseFrame {
    tokio::time::sleep(limits.init_timeout).await;
    let accepted_payload = || accepted.lock().unwrap_or_else(PoisonError::into_inner).clone();
    if accepted_payload().is_none() {
        return CloseFrame { code: INIT_TIMEOUT_CLOSE_CODE, reason: "Connection initialisation timeout".into() };
    }
    loop {
        tokio::time::sleep(limits.reauthentication_interval).await;
        let payload = accepted_payload().unwrap_or_default();
        if let Err(refusal) = authentication.identify_connection(&payload, tenant).await {
            tracing::info!(refusal, "closing a WebSocket whose token is no longer accepted");
            return CloseFrame { code: FORBIDDEN_CLOSE_CODE, reason: refusal.into() };
        }
    }
}
