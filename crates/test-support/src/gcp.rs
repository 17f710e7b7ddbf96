//! A local Google Cloud for the tests:
//!   - [`FakeGcs`]: fake-gcs-server (the GCS JSON API, in memory), built by `make fake-gcs`
//!     (tools/build-fake-gcs.sh) and named in `TEST_FAKE_GCS_BIN`, behind a small recording proxy so tests can
//!     check what the code under test sent (methods, paths, `Authorization`);
//!   - [`ServiceAccountKey`]: a service-account JSON key file with a real RSA-2048 key, generated once per test
//!     binary with the Python `cryptography` package of the venv that `make test-tools` installs
//!     (`TEST_AWS_TOOLS_BIN_DIR`; moto depends on it);
//!   - [`GoogleTokenServer`]: Google's OAuth 2.0 token endpoint for service accounts (the JWT-bearer grant), which
//!     verifies the signed assertion like Google does and hands out access tokens.
//!
//! One server per test: each starts in well under a second, and tests never see each other's buckets.
//!
//! What fake-gcs-server (v1.56.1) does differently from real GCS, for assertions:
//!   - creating a bucket keeps only `name`, `versioning` and `defaultEventBasedHold`; `iamConfiguration`,
//!     `labels`, `location` (always the server-wide `-location`, `US-CENTRAL1`) and the rest are dropped, and
//!     `PATCH` only changes `versioning` (`metageneration` stays "1");
//!   - deleting a bucket that still has objects (live or noncurrent) answers 412 `conditionNotMet`, not 409;
//!   - successful deletes answer 200 with the body `null`, not 204; an empty listing has no `items` key;
//!   - it ignores `Authorization` entirely (see [`FakeGcs::requests`]) and the `fields` parameter.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::server_process::ServerProcess;

/// The project and service account of [`ServiceAccountKey`].
pub const PROJECT_ID: &str = "kubeopera-test";
pub const CLIENT_EMAIL: &str = "runner@kubeopera-test.iam.gserviceaccount.com";
/// The grant type of a service account's token request.
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The scopes [`GoogleTokenServer`] accepts (either one).
pub const SCOPE_DEVSTORAGE_READ_WRITE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
pub const SCOPE_CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

// ----------------------------------------------------------------------------------------------------------------
// fake-gcs-server

/// The fake-gcs-server binary; panics (the test fails, never skips) when it is not there.
pub fn fake_gcs_bin() -> PathBuf {
    let bin = std::env::var_os("TEST_FAKE_GCS_BIN").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TEST_FAKE_GCS_BIN is not set: run `make fake-gcs` (tools/build-fake-gcs.sh builds fake-gcs-server and \
             prints its folder; set TEST_FAKE_GCS_BIN=<folder>/fake-gcs-server) or `make test-really-local`, which \
             sets it"
        )
    });
    assert!(
        bin.is_file(),
        "TEST_FAKE_GCS_BIN={} does not exist: run `make fake-gcs` (tools/build-fake-gcs.sh) and set \
         TEST_FAKE_GCS_BIN to <the folder it prints>/fake-gcs-server",
        bin.display()
    );
    bin
}

/// One request the proxy in front of fake-gcs-server forwarded (the helpers of [`FakeGcs`] bypass it).
#[derive(Debug, Clone)]
pub struct GcsRequest {
    pub method: String,
    /// Path and query as sent, percent-encoding kept: `/storage/v1/b/st/o/a%2Fb?generation=1`.
    pub path_and_query: String,
    /// The `Authorization` header, if any (`Bearer ya29....`).
    pub authorization: Option<String>,
    /// What fake-gcs-server answered.
    pub status: u16,
}

struct ProxyState {
    backend: String,
    client: reqwest::Client,
    requests: Mutex<Vec<GcsRequest>>,
    /// With [`FakeGcs::expire_first_token`]: the first bearer token seen, refused like an expired one.
    expire_first_token: std::sync::atomic::AtomicBool,
    expired_token: Mutex<Option<String>>,
}

/// A running fake-gcs-server (in-memory backend) behind a recording proxy; both stop on drop.
pub struct FakeGcs {
    process: ServerProcess,
    proxy_address: SocketAddr,
    proxy: tokio::task::JoinHandle<()>,
    state: Arc<ProxyState>,
    client: reqwest::Client,
}

impl FakeGcs {
    /// Starts fake-gcs-server on a free port of 127.0.0.1 with the in-memory backend, and the proxy in front of it
    /// on another, and waits until it answers.
    pub async fn start() -> Self {
        Self::start_with_args(&[]).await
    }

    /// [`FakeGcs::start`] with extra command-line flags for fake-gcs-server (for example `-location EU`).
    pub async fn start_with_args(extra_args: &[&str]) -> Self {
        let bin = fake_gcs_bin();
        let client = http_client();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake GCS proxy");
        let proxy_address = listener.local_addr().expect("proxy address");
        let process = ServerProcess::start("fake-gcs-server", "/_internal/healthcheck", |port, folder| {
            let mut command = Command::new(&bin);
            command
                .args(["-scheme", "http", "-host", "127.0.0.1", "-port", &port.to_string()])
                .args(["-backend", "memory", "-log-level", "info"])
                // Links in answers (selfLink, mediaLink, an upload's Location) point at the proxy.
                .args(["-external-url", &format!("http://{proxy_address}")])
                // Object downloads at /<bucket>/<object> are served only for this Host, which the proxy sends.
                .args(["-public-host", &format!("127.0.0.1:{port}")])
                .args(extra_args)
                .current_dir(folder);
            command
        })
        .await;
        let state = Arc::new(ProxyState {
            backend: format!("http://127.0.0.1:{}", process.port()),
            client: client.clone(),
            requests: Mutex::new(Vec::new()),
            expire_first_token: std::sync::atomic::AtomicBool::new(false),
            expired_token: Mutex::new(None),
        });
        let router = Router::new().fallback(forward).with_state(state.clone());
        let proxy = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("fake GCS proxy");
        });
        FakeGcs { process, proxy_address, proxy, state, client }
    }

    /// `127.0.0.1:PORT`: the value for `STORAGE_EMULATOR_HOST` (the recording proxy).
    pub fn emulator_host(&self) -> String {
        self.proxy_address.to_string()
    }

    /// `http://127.0.0.1:PORT`: where the JSON API (`/storage/v1/...`) and uploads (`/upload/storage/v1/...`) are
    /// (the recording proxy).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.proxy_address)
    }

    /// fake-gcs-server itself, without the proxy: requests to it are not recorded.
    pub fn backend_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port())
    }

    /// From now on the first bearer token the proxy sees is treated as expired: every request carrying it gets
    /// GCS's 401, as a token past its hour would.
    pub fn expire_first_token(&self) {
        self.state.expire_first_token.store(true, Ordering::SeqCst);
    }

    /// Every request that went through the proxy (that is, to [`FakeGcs::base_url`]), in order.
    pub fn requests(&self) -> Vec<GcsRequest> {
        self.state.requests.lock().unwrap().clone()
    }

    /// A URL of fake-gcs-server's JSON API; `segments` are percent-encoded (a `/` in an object name too).
    fn api_url(&self, prefix: &str, segments: &[&str]) -> reqwest::Url {
        let mut url = reqwest::Url::parse(&format!("{}{prefix}", self.backend_url())).expect("URL");
        url.path_segments_mut().expect("base URL").extend(segments);
        url
    }

    /// Creates a bucket (versioned or not) and returns fake-gcs-server's answer; panics unless it succeeds.
    pub async fn create_bucket(&self, name: &str, versioning: bool) -> Value {
        let mut url = self.api_url("/storage/v1/b", &[]);
        url.query_pairs_mut().append_pair("project", PROJECT_ID);
        let body = json!({ "name": name, "versioning": { "enabled": versioning } });
        let response = self.client.post(url).json(&body).send().await.expect("create a bucket in fake GCS");
        expect_json(response, &format!("create bucket {name}")).await
    }

    /// The bucket's resource (`GET /storage/v1/b/{name}`), or None when it does not exist.
    pub async fn bucket(&self, name: &str) -> Option<Value> {
        let response = self.client.get(self.api_url("/storage/v1/b", &[name])).send().await.expect("get a bucket");
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        Some(expect_json(response, &format!("get bucket {name}")).await)
    }

    /// Uploads an object (simple upload) and returns its resource (with `generation`); panics unless it succeeds.
    pub async fn put_object(&self, bucket: &str, name: &str, bytes: impl Into<Vec<u8>>) -> Value {
        let mut url = self.api_url("/upload/storage/v1/b", &[bucket, "o"]);
        url.query_pairs_mut().append_pair("uploadType", "media").append_pair("name", name);
        let response = self
            .client
            .post(url)
            .header("content-type", "application/octet-stream")
            .body(bytes.into())
            .send()
            .await
            .expect("upload an object to fake GCS");
        expect_json(response, &format!("upload {bucket}/{name}")).await
    }

    /// An object's content, or None when it does not exist.
    pub async fn object(&self, bucket: &str, name: &str) -> Option<Vec<u8>> {
        let mut url = self.api_url("/storage/v1/b", &[bucket, "o", name]);
        url.query_pairs_mut().append_pair("alt", "media");
        let response = self.client.get(url).send().await.expect("download an object from fake GCS");
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        assert!(response.status().is_success(), "download {bucket}/{name}: {}", response.status());
        Some(response.bytes().await.expect("object content").to_vec())
    }

    /// The names of the bucket's live objects, in listing order (by name).
    pub async fn object_names(&self, bucket: &str) -> Vec<String> {
        self.list(bucket, false).await.into_iter().map(|(name, _)| name).collect()
    }

    /// Every object version, noncurrent ones included (`versions=true`): (name, generation).
    pub async fn object_versions(&self, bucket: &str) -> Vec<(String, String)> {
        self.list(bucket, true).await
    }

    async fn list(&self, bucket: &str, versions: bool) -> Vec<(String, String)> {
        let mut found = Vec::new();
        let mut page_token: Option<String> = None;
        loop {
            let mut url = self.api_url("/storage/v1/b", &[bucket, "o"]);
            url.query_pairs_mut().append_pair("versions", if versions { "true" } else { "false" });
            if let Some(token) = &page_token {
                url.query_pairs_mut().append_pair("pageToken", token);
            }
            let response = self.client.get(url).send().await.expect("list objects in fake GCS");
            let page = expect_json(response, &format!("list objects of {bucket}")).await;
            for item in page["items"].as_array().into_iter().flatten() {
                let name = item["name"].as_str().expect("object name").to_owned();
                let generation = item["generation"].as_str().unwrap_or_default().to_owned();
                found.push((name, generation));
            }
            match page["nextPageToken"].as_str() {
                Some(token) if !token.is_empty() => page_token = Some(token.to_owned()),
                _ => return found,
            }
        }
    }
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        self.proxy.abort();
    }
}

/// The proxy: forwards a request to fake-gcs-server as it came (percent-encoding kept) and records it.
async fn forward(State(state): State<Arc<ProxyState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path_and_query = parts.uri.path_and_query().map(|value| value.as_str().to_owned()).unwrap_or_default();
    let authorization: Option<String> =
        parts.headers.get("authorization").map(|value| String::from_utf8_lossy(value.as_bytes()).into());
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(error) => return (StatusCode::BAD_REQUEST, format!("proxy: reading the body: {error}")).into_response(),
    };
    if let Some(token) = authorization.as_ref().filter(|_| state.expire_first_token.load(Ordering::SeqCst)) {
        let mut expired = state.expired_token.lock().unwrap();
        if expired.get_or_insert_with(|| token.clone()) == token {
            drop(expired);
            let status = StatusCode::UNAUTHORIZED;
            state.requests.lock().unwrap().push(GcsRequest {
                method: parts.method.to_string(),
                path_and_query,
                authorization,
                status: status.as_u16(),
            });
            let error =
                json!({"error": {"code": 401, "message": "Invalid Credentials", "errors": [{"reason": "authError"}]}});
            return (status, axum::Json(error)).into_response();
        }
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection" | "transfer-encoding") {
            headers.append(name, value.clone());
        }
    }
    let url = format!("{}{path_and_query}", state.backend);
    let answer = state.client.request(parts.method.clone(), &url).headers(headers).body(body).send().await;
    let (status, response) = match answer {
        Ok(answer) => {
            let status = answer.status();
            let mut response_headers = HeaderMap::new();
            for (name, value) in answer.headers() {
                if !matches!(name.as_str(), "content-length" | "connection" | "transfer-encoding") {
                    response_headers.append(name, value.clone());
                }
            }
            let bytes = answer.bytes().await.unwrap_or_default();
            let mut response = Response::new(Body::from(bytes));
            *response.status_mut() = status;
            *response.headers_mut() = response_headers;
            (status.as_u16(), response)
        }
        Err(error) => {
            let status = StatusCode::BAD_GATEWAY;
            (status.as_u16(), (status, format!("proxy: fake-gcs-server did not answer: {error}")).into_response())
        }
    };
    state.requests.lock().unwrap().push(GcsRequest {
        method: parts.method.to_string(),
        path_and_query,
        authorization,
        status,
    });
    response
}

async fn expect_json(response: reqwest::Response, what: &str) -> Value {
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    assert!(status.is_success(), "{what}: fake GCS answered {status}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{what}: not JSON ({error}): {text}"))
}

fn http_client() -> reqwest::Client {
    provisioner::install_crypto_provider();
    reqwest::Client::builder().timeout(Duration::from_secs(10)).no_proxy().build().expect("HTTP client")
}

// ----------------------------------------------------------------------------------------------------------------
// The service-account key

/// The RSA-2048 key pair every [`ServiceAccountKey`] of this test binary uses.
#[derive(Debug)]
pub struct TestKeyPair {
    pub private_key_id: String,
    pub client_id: String,
    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as in Google's key files.
    pub private_key_pem: String,
    /// The same key as PKCS#8 DER, for `ring::signature::RsaKeyPair::from_pkcs8`.
    pub private_key_pkcs8_der: Vec<u8>,
    /// PKCS#1 `RSAPublicKey` DER: what `ring::signature::UnparsedPublicKey` with `RSA_PKCS1_2048_8192_SHA256` takes.
    pub public_key_der: Vec<u8>,
    /// SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
    pub public_key_pem: String,
}

const GENERATE_KEY_PAIR: &str = r#"
import base64, json, secrets
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
public = key.public_key()
print(json.dumps({
    "private_key_pem": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode(),
    "private_key_pkcs8_der": base64.b64encode(key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())).decode(),
    "public_key_der": base64.b64encode(public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.PKCS1)).decode(),
    "public_key_pem": public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
    "private_key_id": secrets.token_hex(20),
    "client_id": str(10**20 + secrets.randbelow(9 * 10**20)),
}))
"#;

/// The key pair of this test binary, generated on first use with the venv's Python `cryptography`.
pub fn test_key_pair() -> &'static TestKeyPair {
    static KEY_PAIR: OnceLock<TestKeyPair> = OnceLock::new();
    KEY_PAIR.get_or_init(|| {
        let python = crate::moto::aws_tools_bin_dir().join("python");
        let output = Command::new(&python)
            .args(["-c", GENERATE_KEY_PAIR])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));
        assert!(
            output.status.success(),
            "generating an RSA key with {} failed ({}); does the venv have `cryptography` (run `make test-tools`)?\n{}",
            python.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let generated: Value = serde_json::from_slice(&output.stdout).expect("the key generator prints JSON");
        let text = |field: &str| generated[field].as_str().expect(field).to_owned();
        let bytes = |field: &str| STANDARD.decode(text(field)).expect(field);
        TestKeyPair {
            private_key_id: text("private_key_id"),
            client_id: text("client_id"),
            private_key_pem: text("private_key_pem"),
            private_key_pkcs8_der: bytes("private_key_pkcs8_der"),
            public_key_der: bytes("public_key_der"),
            public_key_pem: text("public_key_pem"),
        }
    })
}

/// A service-account JSON key file for [`PROJECT_ID`] / [`CLIENT_EMAIL`] whose `token_uri` is the test's.
#[derive(Debug, Clone)]
pub struct ServiceAccountKey {
    /// The whole key file, as Google's console downloads it.
    pub json: String,
    pub token_uri: String,
    pub client_email: String,
    pub key: &'static TestKeyPair,
}

impl ServiceAccountKey {
    /// The key file for `token_uri` (the key pair is generated once per test binary, see [`test_key_pair`]).
    pub fn generate(token_uri: &str) -> ServiceAccountKey {
        let key = test_key_pair();
        let json = json!({
            "type": "service_account",
            "project_id": PROJECT_ID,
            "private_key_id": key.private_key_id,
            "private_key": key.private_key_pem,
            "client_email": CLIENT_EMAIL,
            "client_id": key.client_id,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": format!(
                "https://www.googleapis.com/robot/v1/metadata/x509/{}",
                CLIENT_EMAIL.replace('@', "%40")
            ),
            "universe_domain": "googleapis.com"
        });
        ServiceAccountKey {
            json: serde_json::to_string_pretty(&json).expect("key JSON"),
            token_uri: token_uri.to_owned(),
            client_email: CLIENT_EMAIL.to_owned(),
            key,
        }
    }

    /// PKCS#1 DER of the public key, for [`GoogleTokenServer::start`].
    pub fn public_key_der(&self) -> &'static [u8] {
        &self.key.public_key_der
    }

    /// A signed RS256 JWT with these claims (header `{"alg":"RS256","typ":"JWT","kid":<private_key_id>}`).
    pub fn sign_jwt(&self, claims: &Value) -> String {
        sign_rs256(self.key, claims)
    }

    /// The assertion Google's client libraries send: iss = client_email, aud = token_uri, the scope, iat = now,
    /// exp = now + 1 h.
    pub fn assertion(&self, scope: &str) -> String {
        let now = unix_now();
        self.sign_jwt(&json!({
            "iss": self.client_email,
            "aud": self.token_uri,
            "scope": scope,
            "iat": now,
            "exp": now + 3600,
        }))
    }
}

/// An RS256 JWT signed with the test key pair.
pub fn sign_rs256(key: &TestKeyPair, claims: &Value) -> String {
    let header = json!({ "alg": "RS256", "typ": "JWT", "kid": key.private_key_id });
    let signing_input =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&key.private_key_pkcs8_der).expect("the test key is PKCS#8");
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .expect("sign the JWT");
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs() as i64
}

// ----------------------------------------------------------------------------------------------------------------
// The token endpoint

struct TokenState {
    public_key_der: Vec<u8>,
    token_uri: String,
    requests: AtomicUsize,
    issued: Mutex<Vec<String>>,
    accepted_claims: Mutex<Vec<Value>>,
    refusals: Mutex<Vec<String>>,
}

/// Google's OAuth 2.0 token endpoint for service accounts, on 127.0.0.1: `POST /token` with the form
/// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`. It verifies the assertion as Google
/// does (RS256 signature with the key's public half, iss = [`CLIENT_EMAIL`], aud = [`GoogleTokenServer::token_uri`],
/// a storage or cloud-platform scope, iat/exp sane and at most an hour apart) and answers
/// `{"access_token": "ya29.kubeopera-test-...", "expires_in": 3599, "token_type": "Bearer"}`, or 400
/// `{"error": "invalid_grant" (or "invalid_request", "unsupported_grant_type"), "error_description": ...}`.
/// Stops on drop.
pub struct GoogleTokenServer {
    state: Arc<TokenState>,
    task: tokio::task::JoinHandle<()>,
}

impl GoogleTokenServer {
    /// `public_key_der`: PKCS#1 `RSAPublicKey` DER ([`TestKeyPair::public_key_der`]).
    pub async fn start(public_key_der: &[u8]) -> GoogleTokenServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the token server");
        let address = listener.local_addr().expect("token server address");
        let state = Arc::new(TokenState {
            public_key_der: public_key_der.to_vec(),
            token_uri: format!("http://{address}/token"),
            requests: AtomicUsize::new(0),
            issued: Mutex::new(Vec::new()),
            accepted_claims: Mutex::new(Vec::new()),
            refusals: Mutex::new(Vec::new()),
        });
        let router = Router::new().route("/token", post(token)).with_state(state.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("token server");
        });
        GoogleTokenServer { state, task }
    }

    /// `http://127.0.0.1:PORT/token`: the key file's `token_uri`, and the audience the assertion must name.
    pub fn token_uri(&self) -> String {
        self.state.token_uri.clone()
    }

    /// How many requests reached `/token`, accepted or not.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// The access tokens handed out, in order.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.state.issued.lock().unwrap().clone()
    }

    /// The claims of every accepted assertion, in order.
    pub fn accepted_claims(&self) -> Vec<Value> {
        self.state.accepted_claims.lock().unwrap().clone()
    }

    /// Why requests were refused (`error: error_description`), in order.
    pub fn refusals(&self) -> Vec<String> {
        self.state.refusals.lock().unwrap().clone()
    }
}

impl Drop for GoogleTokenServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn token(
    State(state): State<Arc<TokenState>>,
    form: Result<Form<HashMap<String, String>>, FormRejection>,
) -> Response {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let refuse = |error: &str, description: String| {
        state.refusals.lock().unwrap().push(format!("{error}: {description}"));
        let body = json!({ "error": error, "error_description": description });
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
    };
    let Form(form) = match form {
        Ok(form) => form,
        Err(rejection) => {
            return refuse("invalid_request", format!("not an application/x-www-form-urlencoded body: {rejection}"));
        }
    };
    match form.get("grant_type").map(String::as_str) {
        Some(JWT_BEARER_GRANT) => {}
        Some(other) => return refuse("unsupported_grant_type", format!("Invalid grant_type: {other}")),
        None => return refuse("invalid_request", "Missing required parameter: grant_type".to_owned()),
    }
    let Some(assertion) = form.get("assertion") else {
        return refuse("invalid_request", "Missing required parameter: assertion".to_owned());
    };
    let claims = match verify_assertion(&state, assertion) {
        Ok(claims) => claims,
        Err(description) => return refuse("invalid_grant", description),
    };
    let access_token = format!("ya29.kubeopera-test-{}", uuid::Uuid::new_v4().simple());
    state.issued.lock().unwrap().push(access_token.clone());
    state.accepted_claims.lock().unwrap().push(claims);
    axum::Json(json!({ "access_token": access_token, "expires_in": 3599, "token_type": "Bearer" })).into_response()
}

/// The claims of a valid assertion, or why it is not one.
fn verify_assertion(state: &TokenState, assertion: &str) -> Result<Value, String> {
    let parts: Vec<&str> = assertion.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(format!("Invalid JWT: expected 3 parts separated by '.', found {}", parts.len()));
    };
    let decode = |part: &str, what: &str| {
        URL_SAFE_NO_PAD.decode(part).map_err(|error| format!("Invalid JWT: {what} is not unpadded base64url: {error}"))
    };
    let header: Value = serde_json::from_slice(&decode(header, "the header")?)
        .map_err(|error| format!("Invalid JWT: the header is not JSON: {error}"))?;
    if header["alg"] != "RS256" {
        return Err(format!("Invalid JWT: alg must be RS256, is {}", header["alg"]));
    }
    let signature = decode(signature, "the signature")?;
    let signing_input = &assertion[..assertion.rfind('.').expect("three parts")];
    ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, &state.public_key_der)
        .verify(signing_input.as_bytes(), &signature)
        .map_err(|_| "Invalid JWT Signature.".to_owned())?;
    let claims: Value = serde_json::from_slice(&decode(claims, "the claims")?)
        .map_err(|error| format!("Invalid JWT: the claims are not JSON: {error}"))?;
    if claims["iss"] != CLIENT_EMAIL {
        return Err(format!("Invalid JWT: iss must be {CLIENT_EMAIL}, is {}", claims["iss"]));
    }
    if claims["aud"] != state.token_uri.as_str() {
        return Err(format!("Invalid JWT: aud must be {}, is {}", state.token_uri, claims["aud"]));
    }
    let scopes: Vec<&str> = claims["scope"].as_str().unwrap_or_default().split(' ').collect();
    if !scopes.iter().any(|scope| [SCOPE_DEVSTORAGE_READ_WRITE, SCOPE_CLOUD_PLATFORM].contains(scope)) {
        return Err(format!(
            "Invalid JWT: scope must include {SCOPE_DEVSTORAGE_READ_WRITE} or {SCOPE_CLOUD_PLATFORM}, is {}",
            claims["scope"]
        ));
    }
    let (Some(iat), Some(exp)) = (claims["iat"].as_i64(), claims["exp"].as_i64()) else {
        return Err("Invalid JWT: iat and exp must be integers (seconds since the epoch)".to_owned());
    };
    let now = unix_now();
    if exp <= iat || exp - iat > 3600 {
        return Err(format!("Invalid JWT: exp - iat must be in (0, 3600], is {}", exp - iat));
    }
    if iat > now + 300 || exp < now - 300 {
        return Err(format!(
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe (iat {iat}, \
             exp {exp}, now {now})"
        ));
    }
    Ok(claims)
}
