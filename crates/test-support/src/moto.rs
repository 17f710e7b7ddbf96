//! A local AWS for the tests: moto's server (through `moto_shim.py`) on a free loopback port, and the AWS CLI v1,
//! both from the venv that `make test-tools` (tools/test-tools.sh) installs and names in `TEST_AWS_TOOLS_BIN_DIR`.
//!
//! One server per test: it starts in a second or two, and tests never see each other's buckets or parameters.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::server_process::ServerProcess;

/// The region the fake credentials and every child process use.
pub const REGION: &str = "eu-west-1";
/// Fake credentials: moto accepts any.
pub const ACCESS_KEY_ID: &str = "testing";
pub const SECRET_ACCESS_KEY: &str = "testing";

/// The folder holding the venv's `python` (with moto) and `aws`; panics (the test fails, never skips) when it is not there.
pub fn aws_tools_bin_dir() -> PathBuf {
    let dir = std::env::var_os("TEST_AWS_TOOLS_BIN_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TEST_AWS_TOOLS_BIN_DIR is not set: run `make test-tools` (tools/test-tools.sh installs moto and the \
             AWS CLI and prints the folder) or `make test-really-local`, which sets it"
        )
    });
    for binary in ["python", "aws"] {
        assert!(
            dir.join(binary).is_file(),
            "TEST_AWS_TOOLS_BIN_DIR={} has no `{binary}`: run `make test-tools` (tools/test-tools.sh) and set \
             TEST_AWS_TOOLS_BIN_DIR to the folder it prints",
            dir.display()
        );
    }
    dir
}

/// An error the server answers the next `times` requests of `action` with (an API's operation name, such as
/// `CreateVpc`), as AWS would: `code` and `message`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CloudFault {
    pub action: &'static str,
    pub code: &'static str,
    pub message: &'static str,
    pub times: u32,
}

/// A running moto server; killed (and reaped) on drop.
pub struct MotoServer {
    process: ServerProcess,
    bin_dir: PathBuf,
}

impl MotoServer {
    /// Starts moto's server (with the fixes of `moto_shim.py`, which documents them) on a free port of 127.0.0.1
    /// and waits until it answers. AWS managed IAM policies exist, as in a real account.
    pub async fn start() -> Self {
        Self::start_answering(&[]).await
    }

    /// [`MotoServer::start`], answering requests with the errors of `faults` (the shim's test hook).
    pub async fn start_answering(faults: &[CloudFault]) -> Self {
        let faults = serde_json::to_string(faults).expect("faults serialise");
        let bin_dir = aws_tools_bin_dir();
        let shim = concat!(env!("CARGO_MANIFEST_DIR"), "/moto_shim.py");
        let process = ServerProcess::start("moto", "/moto-api/", |port, _| {
            let mut command = Command::new(bin_dir.join("python"));
            command
                .args([shim, "-H", "127.0.0.1", "-p", &port.to_string()])
                .env("PYTHONUNBUFFERED", "1")
                .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
                .env("MOTO_SHIM_FAULTS", &faults);
            command
        })
        .await;
        MotoServer { process, bin_dir }
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port())
    }

    pub fn port(&self) -> u16 {
        self.process.port()
    }

    /// The venv's folder with `aws` and `python`.
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
        let folder = self.process.folder();
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

    /// A Terraform `terraform { backend "s3" { ... } }` block keeping state in `bucket` on this server, with S3's
    /// own state locking.
    pub fn s3_backend(&self, bucket: &str, region: &str) -> String {
        format!(
            r#"terraform {{
  backend "s3" {{
    bucket       = "{bucket}"
    key          = "terraform.tfstate"
    region       = "{region}"
    encrypt      = true
    use_lockfile = true

    endpoints                   = {{ s3 = "{endpoint}", sts = "{endpoint}" }}
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
    skip_region_validation      = true
  }}
}}
"#,
            endpoint = self.endpoint()
        )
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
}
