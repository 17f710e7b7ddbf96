//! The binary itself: bad configuration stops it with a message naming the variable, and it serves on the
//! configured address with the embedded SQLite default.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_control_plane::free_port;
use test_support::server_process::{ServerProcess, service_binary};

#[test]
fn a_bad_value_stops_the_process_naming_the_variable() {
    for (variable, value) in [("APP_ADDRESS", "not-an-address"), ("APP_LOG_FORMAT", "yaml"), ("APP_DATABASE_PORT", "x")]
    {
        let mut command = Command::new(service_binary());
        command.env(variable, value).env("APP_DATABASE_HOST", "127.0.0.1");
        let output = command.output().expect("run the binary");
        assert_eq!(output.status.code(), Some(2), "{variable}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&format!("configuration error: {variable}:")), "{variable}: {stderr}");
    }
}

#[test]
fn a_missing_oauth_client_file_stops_the_process_naming_it() {
    let folder = tempfile::tempdir().unwrap();
    let output = Command::new(service_binary())
        .current_dir(folder.path())
        .env("APP_AUTH_OAUTH_PATH", "missing/auth-oauth.yaml")
        .env("APP_ADDRESS", "127.0.0.1:0")
        .env("APP_METRICS_ADDRESS", "127.0.0.1:0")
        .env_remove("DATABASE_URL")
        .env_remove("APP_DATABASE_HOST")
        .env_remove("KUBECONFIG")
        .output()
        .expect("run the binary");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("APP_AUTH_OAUTH_PATH:") && stderr.contains("missing/auth-oauth.yaml"), "{stderr}");
}

#[test]
fn serves_health_on_the_embedded_sqlite_default() {
    let folder = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let mut child = sqlite_default(folder.path(), api_port).spawn().expect("start the binary");
    let healthy = wait_for_answer(api_port, "/healthz");
    let _ = child.kill();
    let _ = child.wait();
    assert!(healthy.starts_with("HTTP/1.1 200"), "{healthy}");
    assert!(folder.path().join("data/provisioner.db").exists(), "the SQLite file is created on first run");
}

/// While `make run` builds its local cluster, the service it started shows the progress file on `/readyz`, and stays
/// ready: the API is usable, operations wait in the queue.
#[test]
fn readiness_shows_the_setup_of_make_run_while_its_progress_file_exists() {
    let folder = tempfile::tempdir().unwrap();
    let progress = folder.path().join("setup.json");
    let api_port = free_port();
    let mut command = sqlite_default(folder.path(), api_port);
    let mut child = command.env("APP_SETUP_PROGRESS_FILE", &progress).spawn().expect("start the binary");
    let before = wait_for_answer(api_port, "/readyz");
    let started_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 75;
    let report = serde_json::json!({
        "step": "building OpenTofu", "stepNumber": 4, "steps": 7, "startedAt": started_at,
        "estimatedSeconds": 3500, "failed": false,
    });
    std::fs::write(&progress, report.to_string()).unwrap();
    let during = http_get(api_port, "/readyz").expect("ready");
    std::fs::remove_file(&progress).unwrap();
    let after = http_get(api_port, "/readyz").expect("ready");
    let _ = child.kill();
    let _ = child.wait();

    assert!(before.starts_with("HTTP/1.1 200") && !before.contains("setup"), "{before}");
    assert!(during.starts_with("HTTP/1.1 200"), "{during}");
    let body: serde_json::Value = serde_json::from_str(during.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let setup = &body["setup"];
    assert_eq!(
        (&setup["step"], &setup["stepNumber"], &setup["steps"]),
        (&report["step"], &report["stepNumber"], &report["steps"])
    );
    assert_eq!(setup["estimatedSeconds"], 3500, "{body}");
    let elapsed = setup["elapsedSeconds"].as_u64().unwrap();
    assert!((75..90).contains(&elapsed), "{body}");
    assert!(after.starts_with("HTTP/1.1 200") && !after.contains("setup"), "{after}");
}

/// The binary in `folder` on the embedded SQLite default, serving the API on `api_port`, quiet.
fn sqlite_default(folder: &std::path::Path, api_port: u16) -> Command {
    let mut command = Command::new(service_binary());
    command
        .current_dir(folder)
        .env("APP_ADDRESS", format!("127.0.0.1:{api_port}"))
        .env("APP_METRICS_ADDRESS", format!("127.0.0.1:{}", free_port()))
        .env("APP_AUTH_OAUTH_PATH", concat!(env!("CARGO_MANIFEST_DIR"), "/dev/auth-oauth.yaml"))
        .env_remove("DATABASE_URL")
        .env_remove("KUBECONFIG")
        .env_remove("APP_DATABASE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// A minimal HTTP/1.1 GET, enough to probe a local server without another client crate.
fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// The database is reached over TLS with its certificate verified (`APP_DATABASE_SSL_MODE=verify-full` and
/// `APP_DATABASE_SSL_ROOT_CERT`): a PostgreSQL that accepts TLS only is reached with the CA that signed its
/// certificate, a server another CA signed is refused, and without TLS the server refuses.
#[tokio::test]
async fn the_database_is_reached_over_verified_tls() {
    use secrecy::ExposeSecret as _;
    provisioner::install_crypto_provider();
    let postgres = test_support::tls_postgres::TlsPostgres::start().await;
    let port = postgres.port.to_string();
    let connect = |ssl_mode: &str, root_cert: Option<std::path::PathBuf>| {
        let mut variables = vec![
            ("APP_DATABASE_HOST", "localhost".to_owned()),
            ("APP_DATABASE_PORT", port.clone()),
            ("APP_DATABASE_NAME", "postgres".to_owned()),
            ("APP_DATABASE_SSL_MODE", ssl_mode.to_owned()),
        ];
        variables.extend(root_cert.map(|path| ("APP_DATABASE_SSL_ROOT_CERT", path.display().to_string())));
        let environment = variables.into_iter().map(|(key, value)| (key.to_owned(), value)).collect();
        let settings = provisioner::settings::Settings::from_environment(environment).expect("settings");
        async move {
            let url = settings.database.url.expose_secret().to_owned();
            provisioner::store::Store::connect(&url, 2, Duration::from_secs(5)).await
        }
    };
    let store = connect("verify-full", Some(postgres.ca_file())).await.expect("verified TLS connects");
    store.ping().await.expect("and the database answers");
    let refused = connect("verify-full", Some(postgres.other_ca_file())).await;
    assert!(refused.is_err(), "a server certificate of another CA was accepted");
    let plain = connect("disable", None).await;
    assert!(plain.is_err(), "the TLS-only server accepted a plain connection");
}

/// With `APP_TLS_CERT_FILE` and `APP_TLS_KEY_FILE` the API answers over TLS only, with that certificate; a
/// renewed pair written over the files is served without a restart.
#[tokio::test]
async fn the_api_serves_tls_and_picks_up_a_renewed_certificate() {
    provisioner::install_crypto_provider();
    let folder = tempfile::tempdir().unwrap();
    let (cert, key) = (folder.path().join("tls.crt"), folder.path().join("tls.key"));
    let first = test_support::pki::server_certificates();
    std::fs::write(&cert, &first.cert).unwrap();
    std::fs::write(&key, &first.key).unwrap();
    let api_port = free_port();
    let mut child = sqlite_default(folder.path(), api_port)
        .env("APP_TLS_CERT_FILE", &cert)
        .env("APP_TLS_KEY_FILE", &key)
        .env("APP_TLS_RELOAD_INTERVAL", "200ms")
        .spawn()
        .expect("start the binary");
    let trusting = |ca: &str| {
        let root = reqwest::Certificate::from_pem(ca.as_bytes()).unwrap();
        reqwest::Client::builder().add_root_certificate(root).timeout(Duration::from_secs(5)).build().unwrap()
    };
    let livez = format!("https://localhost:{api_port}/livez");
    let answered = |client: reqwest::Client, deadline: Duration| {
        let livez = livez.clone();
        async move {
            let deadline = Instant::now() + deadline;
            loop {
                match client.get(&livez).send().await {
                    Ok(answer) => return Ok(answer.status()),
                    Err(error) if Instant::now() > deadline => return Err(error),
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }
    };
    let served = answered(trusting(&first.ca), Duration::from_secs(20)).await;
    assert_eq!(served.expect("an answer over TLS"), reqwest::StatusCode::OK);
    assert!(
        http_get(api_port, "/livez").map_or(true, |answer| !answer.starts_with("HTTP/1.1 200")),
        "plain HTTP served"
    );

    let renewed = test_support::pki::server_certificates();
    std::fs::write(&key, &renewed.key).unwrap();
    std::fs::write(&cert, &renewed.cert).unwrap();
    let served = answered(trusting(&renewed.ca), Duration::from_secs(10)).await;
    let old = trusting(&first.ca).get(&livez).send().await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(served.expect("the renewed certificate is served"), reqwest::StatusCode::OK);
    assert!(old.is_err(), "the old certificate is still served");
}

/// At most `APP_TLS_MAX_HANDSHAKES` handshakes are in progress at once: connections that never finish theirs make
/// the next client wait in the listen queue (the server holds no task for it), and once one of them goes, the
/// client is served.
#[tokio::test]
async fn tls_handshakes_in_progress_are_capped() {
    provisioner::install_crypto_provider();
    let folder = tempfile::tempdir().unwrap();
    let (cert, key) = (folder.path().join("tls.crt"), folder.path().join("tls.key"));
    let pair = test_support::pki::server_certificates();
    std::fs::write(&cert, &pair.cert).unwrap();
    std::fs::write(&key, &pair.key).unwrap();
    let api_port = free_port();
    let mut child = sqlite_default(folder.path(), api_port)
        .env("APP_TLS_CERT_FILE", &cert)
        .env("APP_TLS_KEY_FILE", &key)
        .env("APP_TLS_MAX_HANDSHAKES", "2")
        .spawn()
        .expect("start the binary");
    let client = |timeout: Duration| {
        let root = reqwest::Certificate::from_pem(pair.ca.as_bytes()).unwrap();
        reqwest::Client::builder().add_root_certificate(root).timeout(timeout).build().unwrap()
    };
    let livez = format!("https://localhost:{api_port}/livez");
    let deadline = Instant::now() + Duration::from_secs(20);
    while client(Duration::from_secs(2)).get(&livez).send().await.is_err() {
        assert!(Instant::now() < deadline, "the API never answered over TLS");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let silent: Vec<_> =
        (0..2).map(|_| std::net::TcpStream::connect(("127.0.0.1", api_port)).expect("a TCP connection")).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = client(Duration::from_millis(1500)).get(&livez).send().await;
    drop(silent);
    let served = client(Duration::from_secs(5)).get(&livez).send().await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(waiting.is_err(), "a third handshake ran beside two unfinished ones: {waiting:?}");
    assert_eq!(served.expect("served once the silent connections went").status(), reqwest::StatusCode::OK);
}

/// `--version`, `GET /version` and the metric `provisioner_build_info` name the same build: the package version
/// and the commit of this checkout.
#[test]
fn every_surface_names_the_same_build() {
    let output = Command::new(service_binary()).arg("--version").output().expect("run the binary");
    assert!(output.status.success());
    let head = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(env!("CARGO_MANIFEST_DIR")).output();
    let commit = match head {
        Ok(head) if head.status.success() => String::from_utf8(head.stdout).unwrap().trim().to_owned(),
        _ => "unknown".to_owned(),
    };
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(String::from_utf8_lossy(&output.stdout), format!("provisioner {version} (commit {commit})\n"));

    let (answer, metrics) = version_and_metrics();
    assert!(answer.ends_with(&format!(r#"{{"version":"{version}","commit":"{commit}"}}"#)), "{answer}");
    let series = format!(r#"provisioner_build_info{{version="{version}",commit="{commit}"}} 1"#);
    assert!(metrics.contains(&series), "{series} missing:\n{metrics}");
}

/// The metrics show the process itself under the standard `process_*` names (CPU, memory, open files), for
/// on-call's dashboards and alerts.
#[test]
fn the_metrics_show_the_process_itself() {
    let (_, metrics) = version_and_metrics();
    let value = |name: &str| -> f64 {
        let line = metrics.lines().find(|line| line.starts_with(&format!("{name} "))).unwrap_or_else(|| {
            panic!("{name} missing:\n{metrics}");
        });
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(metrics.contains("# TYPE process_cpu_seconds counter\n"), "{metrics}");
    assert!(value("process_cpu_seconds_total") > 0.0);
    assert!(value("process_resident_memory_bytes") > 1e6);
    assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    assert!(value("process_open_fds") >= 3.0 && value("process_max_fds") >= value("process_open_fds"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(started <= now + 1.0 && started > now - 120.0, "started at {started}, now {now}");
}

/// Starts the service on its SQLite default, and returns its `/version` answer and its metrics.
fn version_and_metrics() -> (String, String) {
    let folder = tempfile::tempdir().unwrap();
    let (api_port, metrics_port) = (free_port(), free_port());
    let mut command = sqlite_default(folder.path(), api_port);
    let mut child = command.env("APP_METRICS_ADDRESS", format!("127.0.0.1:{metrics_port}")).spawn().unwrap();
    let answer = wait_for_answer(api_port, "/version");
    let metrics = http_get(metrics_port, "/metrics").unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    (answer, metrics)
}

#[test]
fn help_lists_the_variables_with_their_defaults_and_a_stray_argument_is_refused() {
    let help = Command::new(service_binary()).arg("--help").output().expect("run the binary");
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.lines().any(|line| line.split_whitespace().eq(["APP_ADDRESS", "127.0.0.1:3000"])), "{help}");
    assert!(help.lines().any(|line| line.split_whitespace().eq(["APP_SHUTDOWN_DELAY", "0s"])), "{help}");
    let stray = Command::new(service_binary()).arg("serve").output().expect("run the binary");
    assert_eq!(stray.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&stray.stderr).contains("see --help"));
}

/// On SIGTERM the process first stops being ready (`/readyz` 503 `draining`) while it still serves everything
/// else for `APP_SHUTDOWN_DELAY`, then stops cleanly.
#[test]
fn on_sigterm_readiness_turns_false_before_the_process_stops() {
    let folder = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let mut command = sqlite_default(folder.path(), api_port);
    let mut child = command.env("APP_SHUTDOWN_DELAY", "3s").spawn().expect("start the binary");
    let ready = wait_for_answer(api_port, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");

    let signalled = Instant::now();
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("run kill");
    assert!(kill.success());
    let draining = loop {
        let answer = http_get(api_port, "/readyz").expect("still serving while draining");
        if answer.starts_with("HTTP/1.1 503") {
            break answer;
        }
        assert!(signalled.elapsed() < Duration::from_secs(2), "still ready after SIGTERM: {answer}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(draining.contains(r#""status":"draining""#), "{draining}");
    let live = http_get(api_port, "/livez").expect("live while draining");
    assert!(live.starts_with("HTTP/1.1 200"), "{live}");

    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(signalled.elapsed() < Duration::from_secs(20), "still running 20 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");
    assert!(signalled.elapsed() >= Duration::from_secs(3), "stopped before the delay: {:?}", signalled.elapsed());
}

/// The first answer of the server on `port` to GET `path`, within 20 s of its start.
fn wait_for_answer(port: u16, path: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(answer) = http_get(port, path) {
            return answer;
        }
        assert!(Instant::now() < deadline, "no {path} answer within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// With `APP_DATABASE_MIGRATE=false` (the chart's replicas) the service refuses a database without its migrations
/// and names the command that applies them; `provisioner migrate` applies them and exits; then the service starts.
#[test]
fn provisioner_migrate_prepares_the_database_replicas_only_check() {
    let folder = tempfile::tempdir().unwrap();
    let api_port = free_port();
    let output = sqlite_default(folder.path(), api_port)
        .env("APP_DATABASE_MIGRATE", "false")
        .stderr(Stdio::piped())
        .output()
        .expect("run the binary");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("run `provisioner migrate` first"), "{stderr}");

    let migrate = sqlite_default(folder.path(), api_port).arg("migrate").status().expect("run provisioner migrate");
    assert!(migrate.success());
    let mut child = sqlite_default(folder.path(), api_port).env("APP_DATABASE_MIGRATE", "false").spawn().unwrap();
    let ready = wait_for_answer(api_port, "/readyz");
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
}

/// A GraphQL query is a read sent as a POST: its request line is at `debug` as a GET's is, so that reads over
/// GraphQL do not write a line each at `info`; a document that may change (one with a mutation) is logged at
/// `info` as every change is, whichever of its operations runs.
#[tokio::test]
async fn a_graphql_query_is_logged_as_a_read_and_a_document_with_a_mutation_as_a_change() {
    let server = ServerProcess::start("provisioner", "/healthz", |port, folder| {
        let mut command = sqlite_default(folder, port);
        command.env("APP_AUTH_ENABLED", "false").env("APP_LOG_LEVEL", "info").env("APP_LOG_FORMAT", "json");
        command
    })
    .await;
    let read = "query Read { runtimes(first: 1) { edges { cursor } } }";
    let client = reqwest::Client::new();
    for (request_id, query) in [("only-queries", read.to_owned()), ("with-a-mutation", format!("{read} {CHANGE}"))] {
        let answer = client
            .post(format!("http://127.0.0.1:{}/graphql", server.port()))
            .header("x-request-id", request_id)
            .json(&serde_json::json!({ "query": query, "operationName": "Read" }))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), reqwest::StatusCode::OK, "{request_id}");
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["errors"], serde_json::Value::Null, "{request_id}: {body}");
    }
    let log = server.log();
    let request_lines = |request_id: &str| {
        let id = format!("\"request_id\":\"{request_id}\"");
        log.lines().filter(|line| line.contains("\"message\":\"request\"") && line.contains(&id)).count()
    };
    assert_eq!(request_lines("with-a-mutation"), 1, "{log}");
    assert_eq!(request_lines("only-queries"), 0, "{log}");
}

/// A mutation beside the query the tests run (`operationName` picks the query).
const CHANGE: &str = r#"mutation Change { deprovisionRuntime(id: "00000000-0000-0000-0000-000000000000") }"#;
