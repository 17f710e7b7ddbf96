//! The auth-service client over real HTTP, against an auth-service and token endpoint served by axum on
//! 127.0.0.1 that count the requests they get and check the client's Basic and Bearer authentication.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use provisioner::credentials::{AuthClient, Error};
use provisioner::domain::tenant::Tenant;
use provisioner::settings::Settings;
use runner_contract::credential::{CloudCredential, CredentialType};
use secrecy::ExposeSecret;
use serde_json::json;

const CLIENT_ID: &str = "cluster-provisioner";
const CLIENT_SECRET: &str = "test-secret";
/// `Basic base64("cluster-provisioner:test-secret")`.
const CLIENT_BASIC_AUTH: &str = "Basic Y2x1c3Rlci1wcm92aXNpb25lcjp0ZXN0LXNlY3JldA==";
const SECRET: &str = "super-secret-value";

/// A service account key's private key, shaped as Google writes it (the credential check wants PEM).
fn private_key() -> String {
    format!("-----BEGIN PRIVATE KEY-----\n{SECRET}\n-----END PRIVATE KEY-----\n")
}
const TIMEOUT: Duration = Duration::from_secs(2);

/// The fake auth-service: its behaviour and what it has seen.
#[derive(Default)]
struct AuthService {
    /// `expires_in` of the tokens it hands out.
    expires_in: Option<u64>,
    /// Answer every token request with 401 invalid_client.
    refuse_client: bool,
    token_requests: AtomicUsize,
    credential_requests: AtomicUsize,
    /// Tokens are `token-<n>`, n counting from 1; those below this number are refused (revoked).
    first_valid_token: AtomicUsize,
    /// 503 answers left for the credential `flaky`.
    failures_left: AtomicUsize,
    /// The `Tenant` header of each credential request (`None`: it had none).
    tenants: Mutex<Vec<Option<String>>>,
}

impl AuthService {
    fn token_requests(&self) -> usize {
        self.token_requests.load(Ordering::SeqCst)
    }

    fn credential_requests(&self) -> usize {
        self.credential_requests.load(Ordering::SeqCst)
    }

    fn bearer_is_valid(&self, headers: &HeaderMap) -> bool {
        let number = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer token-"))
            .and_then(|number| number.parse::<usize>().ok());
        number.is_some_and(|number| {
            number >= self.first_valid_token.load(Ordering::SeqCst) && number <= self.token_requests()
        })
    }
}

async fn token(State(service): State<Arc<AuthService>>, headers: HeaderMap, body: String) -> Response {
    let number = service.token_requests.fetch_add(1, Ordering::SeqCst) + 1;
    let authenticated = headers.get(header::AUTHORIZATION).is_some_and(|value| value == CLIENT_BASIC_AUTH);
    if service.refuse_client || !authenticated || !body.contains("grant_type=client_credentials") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client", "error_description": "unknown client"})),
        )
            .into_response();
    }
    let mut answer = json!({"access_token": format!("token-{number}"), "token_type": "bearer"});
    if let Some(expires_in) = service.expires_in {
        answer["expires_in"] = expires_in.into();
    }
    Json(answer).into_response()
}

fn aws_access_key(id: &str) -> Response {
    Json(json!({
        "id": id, "type": "aws_access_key",
        "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": SECRET, "region": "eu-central-1",
    }))
    .into_response()
}

async fn credential(State(service): State<Arc<AuthService>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    service.credential_requests.fetch_add(1, Ordering::SeqCst);
    let tenant = headers.get("tenant").map(|value| value.to_str().unwrap().to_owned());
    service.tenants.lock().unwrap().push(tenant.clone());
    if !service.bearer_is_valid(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match id.as_str() {
        "aws-key" | "a/b c?" => aws_access_key(&id),
        // Tenant a's own, and nobody else's.
        "tenant-a-key" if tenant.as_deref() == Some("tenant-a") => aws_access_key(&id),
        "aws-role" => Json(json!({
            "id": id, "type": "aws_assume_role",
            "roleArn": "arn:aws:iam::123456789012:role/provisioner", "externalId": SECRET,
            "sessionDurationSeconds": 3600,
        }))
        .into_response(),
        "gcp-sa" => Json(json!({
            "id": id, "type": "gcp_service_account", "projectId": "my-project", "projectIds": ["other-project-2"],
            "serviceAccountKey": {"type": "service_account", "private_key": private_key()},
        }))
        .into_response(),
        "flaky" => {
            let failed = service
                .failures_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(1))
                .is_ok();
            if failed { StatusCode::SERVICE_UNAVAILABLE.into_response() } else { aws_access_key(&id) }
        }
        "down" => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        "slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            aws_access_key(&id)
        }
        "forbidden" => (StatusCode::FORBIDDEN, "this client may not read credentials").into_response(),
        "malformed" => Json(json!({
            "id": id, "type": "aws_access_key", "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": {"value": SECRET},
        }))
        .into_response(),
        "truncated" => format!(r#"{{"id": "truncated", "secretAccessKey": "{SECRET}""#).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Serves `service` on a free port of 127.0.0.1; returns its base URL.
async fn serve(service: &Arc<AuthService>) -> String {
    let app = Router::new()
        .route("/oauth2/token", post(token))
        .route("/api/v1/credentials/{id}", get(credential))
        .with_state(service.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// A client of `base_url` whose OAuth client file names `tokens_endpoint`.
fn new_client(base_url: &str, tokens_endpoint: &str, timeout: Duration) -> AuthClient {
    provisioner::install_crypto_provider();
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("auth-oauth.yaml");
    std::fs::write(
        &path,
        format!(
            "data:\n  client_id: {CLIENT_ID}\n  client_secret: {CLIENT_SECRET}\n  tokens_endpoint: {tokens_endpoint}\n"
        ),
    )
    .unwrap();
    let settings = Settings::from_environment(HashMap::from([
        ("AUTH_SERVICE_BASE_URL".to_owned(), base_url.to_owned()),
        ("APP_AUTH_OAUTH_PATH".to_owned(), path.to_str().unwrap().to_owned()),
    ]))
    .unwrap();
    AuthClient::new(&settings.auth, timeout).unwrap()
}

async fn start(service: AuthService) -> (Arc<AuthService>, AuthClient) {
    let service = Arc::new(service);
    let base_url = serve(&service).await;
    let client = new_client(&base_url, &format!("{base_url}/oauth2/token"), TIMEOUT);
    (service, client)
}

fn with_long_tokens() -> AuthService {
    AuthService { expires_in: Some(3600), ..AuthService::default() }
}

fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn each_credential_kind_parses() {
    let (_, client) = start(with_long_tokens()).await;

    let credential = client.credential("aws-key", None).await.unwrap().credential;
    assert!(matches!(
        &credential,
        CloudCredential::AwsAccessKey { access_key_id, region: Some(region), .. }
            if access_key_id == "AKIAEXAMPLE" && region == "eu-central-1"
    ));
    assert_eq!(credential.secret_values(), ["AKIAEXAMPLE", SECRET]);

    let credential = client.credential("aws-role", None).await.unwrap().credential;
    assert!(matches!(
        &credential,
        CloudCredential::AwsAssumeRole { role_arn, session_duration_seconds: Some(3600), source: None, .. }
            if role_arn == "arn:aws:iam::123456789012:role/provisioner"
    ));
    assert_eq!(credential.secret_values(), [SECRET]);

    let resolved = client.credential("gcp-sa", None).await.unwrap();
    assert_eq!(resolved.project_ids, ["other-project-2"]);
    let credential = resolved.credential;
    assert_eq!(credential.kind(), CredentialType::GcpServiceAccount);
    let files = credential.secret_files();
    let key: serde_json::Value = serde_json::from_str(files["service_account.json"].expose_secret()).unwrap();
    assert_eq!(key["private_key"], private_key());
    assert_eq!(files["project_id"].expose_secret(), "my-project");

    // The id travels as one percent-encoded path segment.
    let credential = client.credential("a/b c?", None).await.unwrap().credential;
    assert_eq!(credential.kind(), CredentialType::AwsAccessKey);
}

/// The tenant a credential is resolved for travels as the `Tenant` header, also when the request is sent again
/// with a fresh token; without a tenant no header is sent. Another tenant's credential is `NotFound`.
#[tokio::test]
async fn the_tenant_travels_as_a_header() {
    let (service, client) = start(with_long_tokens()).await;
    let (tenant_a, tenant_b) = (Tenant::parse("tenant-a").unwrap(), Tenant::parse("tenant-b").unwrap());
    let credential = client.credential("tenant-a-key", Some(&tenant_a)).await.unwrap().credential;
    assert_eq!(credential.kind(), CredentialType::AwsAccessKey);
    for tenant in [Some(&tenant_b), None] {
        let error = client.credential("tenant-a-key", tenant).await.unwrap_err();
        assert!(matches!(&error, Error::NotFound { id } if id == "tenant-a-key"), "{tenant:?}: {error}");
    }
    service.first_valid_token.store(2, Ordering::SeqCst);
    client.credential("tenant-a-key", Some(&tenant_a)).await.unwrap();

    let sent = service.tenants.lock().unwrap().clone();
    let tenant = |name: &str| Some(name.to_owned());
    assert_eq!(sent, [tenant("tenant-a"), tenant("tenant-b"), None, tenant("tenant-a"), tenant("tenant-a")]);
}

#[tokio::test]
async fn a_token_is_fetched_once_and_reused() {
    for expires_in in [Some(3600), None] {
        let (service, client) = start(AuthService { expires_in, ..AuthService::default() }).await;
        for _ in 0..3 {
            client.credential("aws-key", None).await.unwrap();
        }
        // Concurrent callers (and clones) share the token and wait for one fetch.
        let calls = (0..5).map(|_| {
            let client = client.clone();
            async move { client.credential("aws-key", None).await }
        });
        for result in futures::future::join_all(calls).await {
            result.unwrap();
        }
        assert_eq!(service.token_requests(), 1, "expires_in {expires_in:?}");
        assert_eq!(service.credential_requests(), 8);
    }
}

#[tokio::test]
async fn an_expiring_token_is_replaced() {
    let (service, client) = start(AuthService { expires_in: Some(1), ..AuthService::default() }).await;
    client.credential("aws-key", None).await.unwrap();
    client.credential("aws-key", None).await.unwrap();
    assert_eq!(service.token_requests(), 2);
    assert_eq!(service.credential_requests(), 2);
}

#[tokio::test]
async fn a_refused_token_is_replaced_once() {
    let (service, client) = start(with_long_tokens()).await;
    client.credential("aws-key", None).await.unwrap();

    // auth-service revokes token-1: one 401, a new token, the same request again.
    service.first_valid_token.store(2, Ordering::SeqCst);
    client.credential("aws-key", None).await.unwrap();
    assert_eq!(service.token_requests(), 2);
    assert_eq!(service.credential_requests(), 3);

    // It refuses every token: after the one retry with a fresh token the client gives up.
    service.first_valid_token.store(usize::MAX, Ordering::SeqCst);
    let error = client.credential("aws-key", None).await.unwrap_err();
    assert!(matches!(error, Error::Rejected { status, .. } if status == StatusCode::UNAUTHORIZED), "{error}");
    assert!(!error.is_transient());
    assert_eq!(service.token_requests(), 3);
    assert_eq!(service.credential_requests(), 5);
}

#[tokio::test]
async fn client_errors_are_permanent_and_not_retried() {
    let (service, client) = start(with_long_tokens()).await;
    let error = client.credential("unknown", None).await.unwrap_err();
    assert!(matches!(&error, Error::NotFound { id } if id == "unknown"), "{error}");
    assert!(!error.is_transient());
    assert_eq!(service.credential_requests(), 1);

    let error = client.credential("forbidden", None).await.unwrap_err();
    assert!(
        matches!(&error, Error::Rejected { status, message }
            if *status == StatusCode::FORBIDDEN && message.contains("may not read credentials")),
        "{error}"
    );
    assert!(!error.is_transient());
    assert_eq!(service.credential_requests(), 2);
}

#[tokio::test]
async fn unavailability_is_retried_until_it_passes() {
    let service = AuthService { failures_left: AtomicUsize::new(2), ..with_long_tokens() };
    let (service, client) = start(service).await;
    let credential = client.credential("flaky", None).await.unwrap().credential;
    assert_eq!(credential.kind(), CredentialType::AwsAccessKey);
    assert_eq!(service.credential_requests(), 3);
    assert_eq!(service.token_requests(), 1);
}

#[tokio::test]
async fn lasting_unavailability_gives_up_after_bounded_attempts() {
    let (service, client) = start(with_long_tokens()).await;
    let error = client.credential("down", None).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable { .. }), "{error}");
    assert!(error.is_transient());
    assert_eq!(service.credential_requests(), 3);
}

#[tokio::test]
async fn a_slow_answer_times_out_as_unavailable() {
    let service = Arc::new(with_long_tokens());
    let base_url = serve(&service).await;
    let client = new_client(&base_url, &format!("{base_url}/oauth2/token"), Duration::from_millis(300));
    let error = client.credential("slow", None).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable { .. }), "{error}");
    assert_eq!(service.credential_requests(), 3);
}

#[tokio::test]
async fn refused_connections_are_unavailable() {
    let service = Arc::new(with_long_tokens());
    let base_url = serve(&service).await;
    let nowhere = format!("http://127.0.0.1:{}", unused_port());

    // auth-service down, the token endpoint up.
    let client = new_client(&nowhere, &format!("{base_url}/oauth2/token"), TIMEOUT);
    let error = client.credential("aws-key", None).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable { .. }), "{error}");
    assert!(error.is_transient());
    assert_eq!(service.token_requests(), 1);

    // The token endpoint down.
    let client = new_client(&base_url, &format!("{nowhere}/oauth2/token"), TIMEOUT);
    let error = client.credential("aws-key", None).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable { .. }), "{error}");
    assert_eq!(service.credential_requests(), 0);
}

#[tokio::test]
async fn a_refused_client_is_a_token_error() {
    let (service, client) = start(AuthService { refuse_client: true, ..AuthService::default() }).await;
    let error = client.credential("aws-key", None).await.unwrap_err();
    assert!(matches!(&error, Error::Token { message } if message.contains("invalid_client")), "{error}");
    assert!(!error.is_transient());
    assert_eq!(service.token_requests(), 1);
    assert_eq!(service.credential_requests(), 0);
}

#[tokio::test]
async fn a_malformed_credential_is_invalid_without_its_secret() {
    let (service, client) = start(with_long_tokens()).await;
    let error = client.credential("malformed", None).await.unwrap_err();
    assert!(matches!(&error, Error::InvalidResponse { message } if message.contains("secretAccessKey")), "{error}");
    assert!(!error.to_string().contains(SECRET), "{error}");
    assert!(!error.is_transient());
    assert_eq!(service.credential_requests(), 1);

    let error = client.credential("truncated", None).await.unwrap_err();
    assert!(matches!(error, Error::InvalidResponse { .. }), "{error}");
    assert!(!error.to_string().contains(SECRET), "{error}");
}
