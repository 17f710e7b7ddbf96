//! A git server on loopback, as the modules repository: git's smart HTTP protocol (`git http-backend`, as GitHub and
//! GitLab speak it: shallow clones work) over HTTPS with a certificate of a private CA, optionally behind basic
//! credentials.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use provisioner::listener_tls::{TlsFiles, TlsListener};

use crate::pki::server_certificates;

pub struct GitServer {
    address: SocketAddr,
    ca_pem: String,
    serving: tokio::task::JoinHandle<()>,
    _certificates: tempfile::TempDir,
}

#[derive(Clone)]
struct Served {
    repository: PathBuf,
    /// `Authorization` header value every request must carry, when credentials are required.
    authorization: Option<String>,
}

impl GitServer {
    /// Serves the bare repository `repository` as `https://127.0.0.1:<port>/modules.git`; with `credentials`, only
    /// to requests carrying them.
    pub async fn start(repository: &Path, credentials: Option<(&str, &str)>) -> Self {
        let certificates = server_certificates();
        let folder = tempfile::tempdir().expect("a folder for the certificates");
        let (cert, key) = (folder.path().join("tls.crt"), folder.path().join("tls.key"));
        std::fs::write(&cert, &certificates.cert).unwrap();
        std::fs::write(&key, &certificates.key).unwrap();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let address = tcp.local_addr().unwrap();
        let files = TlsFiles { cert, key, reload_interval: Duration::from_secs(3600), max_handshakes: 64 };
        let listener = TlsListener::new(tcp, files).expect("the test certificate loads");
        let authorization = credentials.map(|(user, password)| {
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
        });
        let served = Served { repository: repository.to_owned(), authorization };
        let router =
            axum::Router::new().route("/modules.git/{*path}", axum::routing::any(http_backend)).with_state(served);
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        GitServer { address, ca_pem: certificates.ca, serving, _certificates: folder }
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/modules.git", self.address.port())
    }

    /// The PEM certificate of the CA that signed the server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// A bare repository `<folder>/modules.git` holding the files of `files` in one commit tagged `tag`; returns it
/// and the commit's id, which pins it.
pub fn bare_repository(files: &Path, tag: &str, folder: &Path) -> (PathBuf, String) {
    let bare = folder.join("modules.git");
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    git(&["init", "--quiet", "--bare", bare.to_str().unwrap()]);
    let (git_dir, work_tree) = (format!("--git-dir={}", bare.display()), format!("--work-tree={}", files.display()));
    git(&[&git_dir, &work_tree, "add", "--all"]);
    git(&[&git_dir, &work_tree, "commit", "--quiet", "-m", "pinned"]);
    git(&[&git_dir, "tag", tag]);
    let commit = git(&[&git_dir, "rev-parse", "HEAD"]);
    (bare, commit)
}

/// One request through `git http-backend` (CGI): the request's method, path, query and body in, its headers and
/// body out.
async fn http_backend(
    State(served): State<Served>,
    method: Method,
    UrlPath(path): UrlPath<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(wanted) = &served.authorization
        && headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()) != Some(wanted.as_str())
    {
        return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Basic realm=\"modules\"")]).into_response();
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or_default();
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &served.repository)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", format!("/{path}"))
        .env("REQUEST_METHOD", method.as_str())
        .env("QUERY_STRING", query.unwrap_or_default())
        .env("CONTENT_TYPE", content_type)
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run git http-backend");
    let mut stdin = child.stdin.take().expect("the backend's stdin");
    tokio::io::AsyncWriteExt::write_all(&mut stdin, &body).await.expect("write the request body");
    drop(stdin);
    let output = child.wait_with_output().await.expect("git http-backend ends");
    cgi_response(&output.stdout)
}

/// A CGI answer: header lines (`Status:` among them), a blank line, the body.
fn cgi_response(output: &[u8]) -> Response {
    let split = output.windows(4).position(|window| window == b"\r\n\r\n").map(|at| (at, at + 4));
    let split = split.or_else(|| output.windows(2).position(|window| window == b"\n\n").map(|at| (at, at + 2)));
    let Some((head_end, body_start)) = split else { return StatusCode::BAD_GATEWAY.into_response() };
    let mut response = Response::new(axum::body::Body::from(output[body_start..].to_vec()));
    for line in String::from_utf8_lossy(&output[..head_end]).lines() {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().and_then(|code| code.parse().ok());
            *response.status_mut() = code.and_then(|code| StatusCode::from_u16(code).ok()).unwrap_or(StatusCode::OK);
        } else if let (Ok(name), Ok(value)) = (header::HeaderName::try_from(name), header::HeaderValue::try_from(value))
        {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
