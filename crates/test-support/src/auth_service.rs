//! A small auth-service for the tests: an OAuth2 token endpoint and the credentials API on loopback, with
//! switches for outages and counters of what it was asked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

pub const CLIENT_ID: &str = "test-provisioner";
pub const CLIENT_SECRET: &str = "test-client-secret-7f3a";
const ACCESS_TOKEN: &str = "test-access-token-91c2";
/// Distinctive credential values, so tests can search for them where they must never appear.
pub const AWS_ACCESS_KEY_ID: &str = "AKIAFAKEHYGIENE0001";
pub const AWS_SECRET_ACCESS_KEY: &str = "fake-secret-access-key-hygiene-0001";
pub const GCP_PRIVATE_KEY: &str = "-----BEGIN PRIVATE KEY-----fake-gcp-key-hygiene-0001-----END PRIVATE KEY-----";

#[derive(Default)]
struct Shared {
    credentials: Mutex<HashMap<String, Value>>,
    unavailable: AtomicBool,
    credential_requests: AtomicUsize,
    /// The W3C `traceparent` of each credential request that carried one.
    traceparents: Mutex<Vec<String>>,
    /// How long a credential request waits before it is answered.
    delay: Mutex<std::time::Duration>,
}

pub struct FakeAuthService {
    pub base_url: String,
    /// The OAuth client file (Kyma director.yaml format) pointing at this server.
    pub client_file: PathBuf,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeAuthService {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeAuthService {
    /// Starts the server on the current runtime with an AWS (`cred-aws-1`) and a GCP (`cred-gcp-1`) credential.
    pub async fn start(folder: &Path) -> Self {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/oauth2/token", post(token))
            .route("/api/v1/credentials/{id}", get(credential))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake auth-service");
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("fake auth-service");
        });
        let client_file = folder.join("auth-oauth.yaml");
        std::fs::write(
            &client_file,
            format!(
                "data:\n  client_id: {CLIENT_ID}\n  client_secret: {CLIENT_SECRET}\n  tokens_endpoint: {base_url}/oauth2/token\n"
            ),
        )
        .unwrap();
        let service = FakeAuthService { base_url, client_file, shared, server };
        service.add_credential(
            "cred-aws-1",
            json!({"type": "aws_access_key", "accessKeyId": AWS_ACCESS_KEY_ID, "secretAccessKey": AWS_SECRET_ACCESS_KEY}),
        );
        service.add_credential(
            "cred-gcp-1",
            json!({"type": "gcp_service_account", "projectId": "my-project-1",
                   "serviceAccountKey": {"type": "service_account", "project_id": "my-project-1", "private_key": GCP_PRIVATE_KEY}}),
        );
        service
    }

    pub fn add_credential(&self, id: &str, mut credential: Value) {
        credential["id"] = json!(id);
        self.shared.credentials.lock().unwrap().insert(id.to_owned(), credential);
    }

    /// While unavailable, both endpoints answer 503.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.shared.unavailable.store(unavailable, Ordering::SeqCst);
    }

    /// Credential requests are answered only after `delay` (a slow auth-service).
    pub fn set_delay(&self, delay: std::time::Duration) {
        *self.shared.delay.lock().unwrap() = delay;
    }

    pub fn credential_requests(&self) -> usize {
        self.shared.credential_requests.load(Ordering::SeqCst)
    }

    /// The trace contexts credential requests carried, in order.
    pub fn traceparents(&self) -> Vec<String> {
        self.shared.traceparents.lock().unwrap().clone()
    }
}

async fn token(State(shared): State<Arc<Shared>>, body: String) -> Response {
    if shared.unavailable.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    // The oauth2 crate sends the client credentials in the form body or as Basic auth; accept either shape
    // but require the grant type.
    if !body.contains("grant_type=client_credentials") {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "unsupported_grant_type"}))).into_response();
    }
    Json(json!({"access_token": ACCESS_TOKEN, "token_type": "bearer", "expires_in": 3600})).into_response()
}

async fn credential(State(shared): State<Arc<Shared>>, UrlPath(id): UrlPath<String>, headers: HeaderMap) -> Response {
    shared.credential_requests.fetch_add(1, Ordering::SeqCst);
    if let Some(traceparent) = headers.get("traceparent").and_then(|value| value.to_str().ok()) {
        shared.traceparents.lock().unwrap().push(traceparent.to_owned());
    }
    let delay = *shared.delay.lock().unwrap();
    tokio::time::sleep(delay).await;
    if shared.unavailable.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let authorized =
        headers.get("authorization").and_then(|value| value.to_str().ok()) == Some(&format!("Bearer {ACCESS_TOKEN}"));
    if !authorized {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match shared.credentials.lock().unwrap().get(&id) {
        Some(credential) => Json(credential.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, Json(json!({"error": "not found"}))).into_response(),
    }
}
