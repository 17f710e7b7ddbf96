//! A small auth-service for the tests: an OAuth2 token endpoint and the credentials API on loopback, with
//! switches for outages and counters of what it was asked. It keeps credentials within tenants as the contract
//! says: one registered for a tenant is served only to requests with its `Tenant` header, one without a tenant only
//! to requests without the header; any other is 404, as an unknown id.

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

/// A credential and the tenant it belongs to (`None`: the platform's own).
struct Registered {
    tenant: Option<String>,
    answer: Value,
}

#[derive(Default)]
struct Shared {
    credentials: Mutex<HashMap<String, Registered>>,
    unavailable: AtomicBool,
    credential_requests: AtomicUsize,
    /// The W3C `traceparent` of each credential request that carried one.
    traceparents: Mutex<Vec<String>>,
    /// The `Tenant` header of each credential request, `None` when it had none.
    tenants: Mutex<Vec<Option<String>>>,
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
        service.add_credential("cred-aws-1", aws_credential());
        service.add_credential("cred-gcp-1", gcp_credential("my-project-1"));
        service
    }

    /// Registers (or replaces) the credential `id` with no tenant: the platform's own.
    pub fn add_credential(&self, id: &str, credential: Value) {
        self.register(id, None, credential);
    }

    /// Registers (or replaces) the credential `id` as `tenant`'s: only requests naming that tenant get it.
    pub fn add_tenant_credential(&self, tenant: &str, id: &str, credential: Value) {
        self.register(id, Some(tenant.to_owned()), credential);
    }

    fn register(&self, id: &str, tenant: Option<String>, mut answer: Value) {
        answer["id"] = json!(id);
        self.shared.credentials.lock().unwrap().insert(id.to_owned(), Registered { tenant, answer });
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

    /// The `Tenant` header of each credential request, in order (`None`: the request had none).
    pub fn tenants(&self) -> Vec<Option<String>> {
        self.shared.tenants.lock().unwrap().clone()
    }
}

/// The answer for `cred-aws-1`: an AWS access key of the distinctive values above.
pub fn aws_credential() -> Value {
    json!({"type": "aws_access_key", "accessKeyId": AWS_ACCESS_KEY_ID, "secretAccessKey": AWS_SECRET_ACCESS_KEY})
}

/// The answer for `cred-gcp-1` with `project` as its `projectId`: a service account key of the values above.
pub fn gcp_credential(project: &str) -> Value {
    json!({"type": "gcp_service_account", "projectId": project,
           "serviceAccountKey": {"type": "service_account", "project_id": project, "private_key": GCP_PRIVATE_KEY}})
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
    let tenant = headers.get("tenant").map(|value| value.to_str().unwrap_or_default().to_owned());
    shared.tenants.lock().unwrap().push(tenant.clone());
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
        Some(credential) if credential.tenant == tenant => Json(credential.answer.clone()).into_response(),
        // Another tenant's credential is answered as one that does not exist.
        _ => (StatusCode::NOT_FOUND, Json(json!({"error": "not found"}))).into_response(),
    }
}
