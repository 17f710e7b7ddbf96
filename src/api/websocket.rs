//! GraphQL subscriptions over a WebSocket (graphql-transport-ws): the caller is authenticated from the
//! `connection_init` payload, which must come within the init timeout (else the socket is closed with 4408, as the
//! protocol says), and no message may be larger than an HTTP request's body.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_graphql_axum::{GraphQLProtocol, GraphQLWebSocket};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt as _, StreamExt as _};

use super::caller::Authentication;
use super::graphql::ProvisionerSchema;

/// graphql-transport-ws: "Connection initialisation timeout".
const INIT_TIMEOUT_CLOSE_CODE: u16 = 4408;

/// What a socket is held to.
#[derive(Clone)]
pub struct SocketLimits {
    pub init_timeout: Duration,
    pub max_message_bytes: usize,
}

/// Upgrades the connection and serves subscriptions on it.
pub fn upgrade(
    upgrade: WebSocketUpgrade,
    schema: ProvisionerSchema,
    protocol: GraphQLProtocol,
    authentication: Authentication,
    limits: SocketLimits,
) -> Response {
    upgrade
        .max_message_size(limits.max_message_bytes)
        .max_frame_size(limits.max_message_bytes)
        .protocols(async_graphql::http::ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |socket| serve(socket, schema, protocol, authentication, limits.init_timeout))
}

/// The protocol's messages go out through a channel, so that the init deadline can close the socket itself.
async fn serve(
    socket: WebSocket,
    schema: ProvisionerSchema,
    protocol: GraphQLProtocol,
    authentication: Authentication,
    init_timeout: Duration,
) {
    let (mut socket_sink, socket_stream) = socket.split();
    let (outgoing, mut to_socket) = futures::channel::mpsc::channel::<Message>(16);
    let initialised = Arc::new(AtomicBool::new(false));
    let on_init = initialised.clone();
    let protocol_run = GraphQLWebSocket::new_with_pair(outgoing.clone(), socket_stream, schema, protocol)
        .on_connection_init(move |payload| async move {
            let identity = authentication.identify_connection(&payload).await.map_err(async_graphql::Error::new)?;
            on_init.store(true, Ordering::SeqCst);
            let mut data = async_graphql::Data::default();
            data.insert(identity);
            Ok(data)
        })
        .serve();
    let mut closer = outgoing;
    // Ends at the deadline only if the caller has not been let in by then.
    let init_deadline = async move {
        tokio::time::sleep(init_timeout).await;
        if initialised.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    };
    let driver = async move {
        tokio::select! {
            () = protocol_run => {}
            () = init_deadline => {
                let reason = "Connection initialisation timeout".into();
                let _ = closer.send(Message::Close(Some(CloseFrame { code: INIT_TIMEOUT_CLOSE_CODE, reason }))).await;
            }
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
}
