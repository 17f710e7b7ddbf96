//! A graphql-transport-ws client of a test app, which it serves on a loopback port for the purpose.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::TestApp;

pub struct Subscriber {
    socket: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
}

impl Subscriber {
    pub async fn connect(app: &TestApp) -> Subscriber {
        Subscriber::connect_with(app, &[]).await
    }

    /// Connected with `headers` on the upgrade request too (a gateway's `Tenant`).
    pub async fn connect_with(app: &TestApp, headers: &[(&str, &str)]) -> Subscriber {
        let (socket, response) =
            tokio_tungstenite::connect_async(upgrade_request(app, headers).await).await.expect("the WebSocket upgrade");
        assert_eq!(response.headers()["sec-websocket-protocol"], "graphql-transport-ws");
        Subscriber { socket }
    }

    /// The status of an upgrade request with `headers` that the server refuses.
    pub async fn upgrade_refused(app: &TestApp, headers: &[(&str, &str)]) -> axum::http::StatusCode {
        use tokio_tungstenite::tungstenite::Error;
        match tokio_tungstenite::connect_async(upgrade_request(app, headers).await).await {
            Err(Error::Http(response)) => response.status(),
            Err(error) => panic!("the upgrade failed without an answer: {error}"),
            Ok(_) => panic!("the upgrade was accepted"),
        }
    }

    /// Connected, acknowledged (`connection_init` with `payload`) and subscribed to `query` as subscription "1".
    pub async fn subscribed(app: &TestApp, payload: Value, query: &str, variables: Value) -> Subscriber {
        let mut subscriber = Subscriber::connect(app).await;
        subscriber.send(json!({ "type": "connection_init", "payload": payload })).await;
        let ack = subscriber.next().await;
        assert_eq!(ack["type"], "connection_ack", "{ack}");
        let payload = json!({ "query": query, "variables": variables });
        subscriber.send(json!({ "id": "1", "type": "subscribe", "payload": payload })).await;
        subscriber
    }

    pub async fn send(&mut self, message: Value) {
        use futures::SinkExt as _;
        self.socket.send(Message::text(message.to_string())).await.unwrap();
    }

    /// Sends one text message of `bytes` bytes (not JSON).
    pub async fn send_bytes(&mut self, bytes: usize) -> bool {
        use futures::SinkExt as _;
        self.socket.send(Message::text("x".repeat(bytes))).await.is_ok()
    }

    /// Whether the server ends the connection (a close frame, an error or the end of the stream) within `wait`.
    pub async fn ended_within(&mut self, wait: std::time::Duration) -> bool {
        use futures::StreamExt as _;
        let ended = async {
            loop {
                match self.socket.next().await {
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                    Some(Ok(_)) => {}
                }
            }
        };
        tokio::time::timeout(wait, ended).await.is_ok()
    }

    /// The next message, or the close frame's reason and code as `{"close": reason, "code": code}`.
    pub async fn next(&mut self) -> Value {
        use futures::StreamExt as _;
        loop {
            let message = tokio::time::timeout(std::time::Duration::from_secs(30), self.socket.next()).await;
            match message.expect("a message within 30s").expect("the socket stays open").unwrap() {
                Message::Text(text) => return serde_json::from_str(&text).unwrap(),
                Message::Close(frame) => {
                    let code = frame.as_ref().map(|frame| u16::from(frame.code));
                    return json!({ "close": frame.map(|frame| frame.reason.to_string()), "code": code });
                }
                _ => {}
            }
        }
    }
}

/// A graphql-transport-ws upgrade request with `headers` to `app`, served on a loopback port of its own.
async fn upgrade_request(
    app: &TestApp,
    headers: &[(&str, &str)],
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(axum::serve(listener, app.app.router.clone()).into_future());
    let mut request = format!("ws://{address}/graphql").into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
    for (name, value) in headers {
        let name = axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    request
}
