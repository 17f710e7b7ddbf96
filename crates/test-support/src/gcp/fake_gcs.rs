//! fake-gcs-server behind a recording proxy (how it differs from GCS: [`super`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::PROJECT_ID;
use crate::server_process::ServerProcess;

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
