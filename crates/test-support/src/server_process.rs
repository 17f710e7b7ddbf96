//! A local server process for the tests (moto, fake-gcs-server): started on a free loopback port in its own
//! process group with its output in a log file, ready once a health URL answers, and killed with its whole group
//! and reaped on drop (printing the log's tail when the test is failing).

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(60);
const LOG_FILE: &str = "server.log";

pub struct ServerProcess {
    name: &'static str,
    child: Child,
    port: u16,
    folder: tempfile::TempDir,
}

impl ServerProcess {
    /// Starts `command_for(port, folder)` and waits until `http://127.0.0.1:PORT{health_path}` answers 2xx. A free
    /// port can be taken by someone else before the server binds it: then it exits and another port is tried.
    pub async fn start(name: &'static str, health_path: &str, command_for: impl Fn(u16, &Path) -> Command) -> Self {
        provisioner::install_crypto_provider();
        let client =
            reqwest::Client::builder().timeout(Duration::from_secs(2)).no_proxy().build().expect("HTTP client");
        for attempt in 1..=3 {
            let folder = tempfile::Builder::new().prefix(name).tempdir().expect("temporary folder");
            let port = test_control_plane::free_port();
            let log = File::create(folder.path().join(LOG_FILE)).expect("create the server's log");
            let mut command = command_for(port, folder.path());
            command.stdin(Stdio::null()).stdout(log.try_clone().expect("the server's log")).stderr(log);
            // Its own process group, so that drop kills whatever it started along with it.
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            let child = command.spawn().unwrap_or_else(|error| panic!("cannot start {name}: {error}"));
            let mut server = ServerProcess { name, child, port, folder };
            let url = format!("http://127.0.0.1:{port}{health_path}");
            let deadline = Instant::now() + START_TIMEOUT;
            loop {
                if let Ok(Some(status)) = server.child.try_wait() {
                    assert!(attempt < 3, "{name} exited at start ({status}):\n{}", server.log_tail(40));
                    eprintln!("{name} exited at start on port {port} (attempt {attempt}); trying another port");
                    break;
                }
                if let Ok(response) = client.get(&url).send().await
                    && response.status().is_success()
                {
                    return server;
                }
                assert!(
                    Instant::now() < deadline,
                    "{name} did not answer on {url} within {START_TIMEOUT:?}:\n{}",
                    server.log_tail(40)
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        unreachable!("the last attempt panics")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A temporary folder that lives as long as the server (its working directory, if the command sets it).
    pub fn folder(&self) -> &Path {
        self.folder.path()
    }

    /// Everything the server wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.folder.path().join(LOG_FILE)).unwrap_or_default()
    }

    /// The exit status once the server has exited on its own.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("the child's status")
    }

    /// Kills the server's process group at once (SIGKILL), as a crash or an OOM kill would, and reaps it.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Asks the server to stop (SIGTERM) and waits up to `timeout` for it to exit; `None` if it did not.
    pub async fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    fn signal(&mut self, signal: libc::c_int) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on the process group created for this child; no memory is involved.
            unsafe {
                libc::kill(-(self.child.id() as libc::pid_t), signal);
            }
        }
    }

    /// The last `lines` lines of the server's output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.folder.path().join(LOG_FILE)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- last lines of {}'s log (port {}) ---\n{}", self.name, self.port, self.log_tail(40));
        }
    }
}

/// The `provisioner` binary, which Cargo builds beside the provisioner's integration tests: the test executable
/// is `<target>/debug/deps/<test>-<hash>`, the binary `<target>/debug/provisioner`.
pub fn service_binary() -> std::path::PathBuf {
    let test = std::env::current_exe().expect("the test executable");
    let binary =
        test.parent().and_then(Path::parent).expect("the test lives in <target>/<profile>/deps").join("provisioner");
    assert!(
        binary.is_file(),
        "{} does not exist: run the provisioner package's tests with cargo test",
        binary.display()
    );
    binary
}

/// The provisioner binary as a child process with exactly `environment` on top of the test's
/// own (no KUBECONFIG unless `environment` names one), serving on a free loopback port.
pub async fn start_service(environment: std::collections::HashMap<String, String>) -> ServerProcess {
    start_service_binary(service_binary(), environment).await
}

/// [`start_service`] with another provisioner binary (another release's).
pub async fn start_service_binary(
    binary: std::path::PathBuf,
    environment: std::collections::HashMap<String, String>,
) -> ServerProcess {
    ServerProcess::start("provisioner", "/healthz", move |port, _folder| {
        let mut command = Command::new(&binary);
        command.env_remove("KUBECONFIG").envs(&environment).env("APP_ADDRESS", format!("127.0.0.1:{port}"));
        command
    })
    .await
}
