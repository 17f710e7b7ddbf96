//! A local AWS for the tests: moto's server on a free loopback port, and the AWS CLI v1, both from the venv that
//! `make test-tools` (tools/test-tools.sh) installs and names in `TEST_AWS_TOOLS_BIN_DIR`.
//!
//! One server per test: it starts in a second or two, and tests never see each other's buckets or parameters.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The region the fake credentials and every child process use.
pub const REGION: &str = "eu-west-1";
/// Fake credentials: moto accepts any.
pub const ACCESS_KEY_ID: &str = "testing";
pub const SECRET_ACCESS_KEY: &str = "testing";

const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The folder holding `moto_server` and `aws`; panics (the test fails, never skips) when it is not there.
pub fn aws_tools_bin_dir() -> PathBuf {
    let dir = std::env::var_os("TEST_AWS_TOOLS_BIN_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TEST_AWS_TOOLS_BIN_DIR is not set: run `make test-tools` (tools/test-tools.sh installs moto and the \
             AWS CLI and prints the folder) or `make test-really-local`, which sets it"
        )
    });
    for binary in ["moto_server", "aws"] {
        assert!(
            dir.join(binary).is_file(),
            "TEST_AWS_TOOLS_BIN_DIR={} has no `{binary}`: run `make test-tools` (tools/test-tools.sh) and set \
             TEST_AWS_TOOLS_BIN_DIR to the folder it prints",
            dir.display()
        );
    }
    dir
}

/// A running moto server; killed (and reaped) on drop.
pub struct MotoServer {
    child: Child,
    port: u16,
    bin_dir: PathBuf,
    folder: tempfile::TempDir,
}

impl MotoServer {
    /// Starts `moto_server` on a free port of 127.0.0.1 and waits until it answers.
    pub async fn start() -> Self {
        let bin_dir = aws_tools_bin_dir();
        let mut folder = tempfile::Builder::new().prefix("moto-").tempdir().expect("temporary folder for moto");
        // A free port can be taken by someone else before moto binds it: then moto exits and we try another.
        for attempt in 1..=3 {
            let port = free_port();
            let log = File::create(folder.path().join("moto.log")).expect("create moto's log");
            let mut command = Command::new(bin_dir.join("moto_server"));
            command
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .env("PYTHONUNBUFFERED", "1")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("moto's log"))
                .stderr(log);
            // Its own process group, so Drop can kill whatever it started along with it.
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            let child = command
                .spawn()
                .unwrap_or_else(|error| panic!("cannot start {}: {error}", bin_dir.join("moto_server").display()));
            let mut server = MotoServer { child, port, bin_dir: bin_dir.clone(), folder };
            match server.wait_until_ready().await {
                Ok(()) => return server,
                Err(exited) if exited && attempt < 3 => {
                    eprintln!("moto exited at start on port {port} (attempt {attempt}); trying another port");
                    folder = server.take_folder();
                }
                Err(_) => panic!(
                    "moto did not answer on {} within {START_TIMEOUT:?}; last lines of its log:\n{}",
                    server.endpoint(),
                    server.log_tail(40)
                ),
            }
        }
        unreachable!()
    }

    /// Err(true) when the process exited, Err(false) on timeout.
    async fn wait_until_ready(&mut self) -> Result<(), bool> {
        provisioner::install_crypto_provider();
        let client =
            reqwest::Client::builder().timeout(Duration::from_secs(2)).no_proxy().build().expect("HTTP client");
        let url = format!("{}/moto-api/", self.endpoint());
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Err(true);
            }
            if let Ok(response) = client.get(&url).send().await
                && response.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(false)
    }

    /// Stops the process and hands back the folder (for a retry); `self` is dropped with an empty folder.
    fn take_folder(&mut self) -> tempfile::TempDir {
        self.stop();
        std::mem::replace(&mut self.folder, tempfile::tempdir().expect("temporary folder"))
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The venv's folder with `aws` and `moto_server`.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// The venv's AWS CLI (v1).
    pub fn aws_cli(&self) -> PathBuf {
        self.bin_dir.join("aws")
    }

    /// What a child process needs to talk to this server: the endpoint, fake credentials, the region, no
    /// instance metadata lookups, and config/credentials files that do not exist (nothing from `~/.aws`).
    pub fn env(&self) -> Vec<(String, String)> {
        let folder = self.folder.path();
        [
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY.to_owned()),
            ("AWS_DEFAULT_REGION", REGION.to_owned()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
            ("AWS_CONFIG_FILE", folder.join("no-aws-config").display().to_string()),
            ("AWS_SHARED_CREDENTIALS_FILE", folder.join("no-aws-credentials").display().to_string()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
    }

    /// `aws` with [`MotoServer::env`] set (and no `AWS_PROFILE`/`AWS_SESSION_TOKEN` from the caller), ready for
    /// arguments.
    pub fn aws_command(&self) -> Command {
        let mut command = Command::new(self.aws_cli());
        command.env_remove("AWS_PROFILE").env_remove("AWS_SESSION_TOKEN").envs(self.env()).stdin(Stdio::null());
        command
    }

    /// Runs `aws <args>`, panics unless it succeeds, and returns its standard output.
    pub fn aws(&self, args: &[&str]) -> String {
        let output = self.aws_command().args(args).output().expect("run the aws CLI");
        assert!(
            output.status.success(),
            "aws {} failed ({}):\n{}\n{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("aws prints UTF-8")
    }

    /// The last `lines` lines of moto's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.folder.path().join("moto.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id() as libc::pid_t;
            // SAFETY: kill(2) on the process group we created for this child; no memory is involved.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("--- last lines of moto's log ({}) ---\n{}", self.endpoint(), self.log_tail(40));
        }
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}
