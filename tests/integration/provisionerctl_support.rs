//! What the provisionerctl_* tests share: the app served on a loopback port, provisionerctl run against it as a
//! user runs it, and request files.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Serves `router` on a loopback port; returns its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

/// Runs `provisionerctl --server <server> <args>`; returns its exit code, output and errors, and shows the
/// session (with `--nocapture`).
pub async fn ctl(server: &str, args: &[&str]) -> (u8, String, String) {
    // Authentication is off here: the token is given only so that no config file of the machine is read.
    let argv = ["--server", server, "--token", "unused"].into_iter().chain(args.iter().copied());
    ctl_in(&nowhere(), &argv.collect::<Vec<_>>()).await
}

/// Runs `provisionerctl <args>` with the files at `locations`; returns its exit code, output and errors.
pub async fn ctl_in(locations: &provisionerctl::Locations, args: &[&str]) -> (u8, String, String) {
    let argv = std::iter::once("provisionerctl").chain(args.iter().copied());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = provisionerctl::run_args_in(locations, argv, &mut out, &mut err).await;
    let (out, err) = (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap());
    eprintln!("$ provisionerctl {}\n{out}{err}(exit {code})", args.join(" "));
    (code, out, err)
}

/// No kubeconfig, config file or home: nothing of the machine is read.
pub fn nowhere() -> provisionerctl::Locations {
    provisionerctl::Locations { kubeconfig: None, config: None, home: None }
}

/// Writes `body` as a request file in `folder`; returns its path.
pub fn request_file(folder: &Path, name: &str, body: &Value) -> String {
    let path = folder.join(format!("{name}.json"));
    std::fs::write(&path, body.to_string()).unwrap();
    path.display().to_string()
}

/// Creates a runtime from `body` with `provisionerctl create` (and `extra` flags); returns its id.
pub async fn create(server: &str, folder: &Path, body: &Value, extra: &[&str]) -> String {
    let name = body["runtimeInput"]["name"].as_str().unwrap();
    let file = request_file(folder, name, body);
    let args = [&["create", "-f", file.as_str(), "-o", "jsonpath={.runtimeId}"], extra].concat();
    let (code, id, err) = ctl(server, &args).await;
    assert_eq!(code, 0, "{err}");
    id
}

/// A header of each request the server received: Authorization, or what [`recording`] names.
pub type Seen = Arc<Mutex<Vec<Option<String>>>>;

/// The app (authentication off) on a loopback port, recording each request's token; returns its base URL and what
/// it saw, and the app to keep.
pub async fn recording_server() -> (test_support::TestApp, String, Seen) {
    let app = test_support::spawn_app(test_support::Backend::Sqlite).await;
    let (router, seen) = recording(app.app.router.clone(), axum::http::header::AUTHORIZATION);
    let server = serve(router).await;
    (app, server, seen)
}

/// `router`, recording the header `name` of each request it receives.
pub fn recording(router: axum::Router, name: axum::http::HeaderName) -> (axum::Router, Seen) {
    let seen = Seen::default();
    let record = seen.clone();
    let router = router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let value = request.headers().get(&name);
            record.lock().unwrap().push(value.map(|value| value.to_str().unwrap().to_owned()));
            next.run(request)
        },
    ));
    (router, seen)
}

/// The provisionerctl binary as `cargo build` wrote it beside this test's binary (target/debug), for what runs it
/// as a user's shell does (its variables from the environment).
pub fn binary() -> std::path::PathBuf {
    let test_binary = std::env::current_exe().expect("the test binary");
    let debug = test_binary.parent().and_then(Path::parent).expect("target/debug");
    let binary = debug.join("provisionerctl");
    assert!(binary.is_file(), "{} is built by `make test` (cargo build -p provisionerctl)", binary.display());
    binary
}
