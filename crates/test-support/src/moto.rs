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

/// A gap of moto 5.2.5's IAM authorization, fixed on the servers of [`MotoServer::start_with_iam_authorization`]
/// only: moto checks the signature of a request without a body over the parameters it parsed from the request
/// instead of the empty body that was signed, so every GET and DELETE of a REST API (EKS's DescribeCluster,
/// ListClusters, DeleteNodegroup, ...) fails with SignatureDoesNotMatch. Here such a request is checked over its
/// empty body, as AWS checks it. (Python, run before moto_shim.py.)
const SIGNATURE_FIX: &str = r#"
from botocore.awsrequest import AWSRequest
from moto.iam import access_control


def _create_aws_request(self):
    signed = self._get_string_between("SignedHeaders=", ",", self._headers["Authorization"]).split(";")
    headers = self._create_headers_for_aws_request(signed, self._headers)
    bodiless = not self._body and self._method in ("GET", "HEAD", "DELETE")
    body = b"" if bodiless else (self._body or self._data)
    request = AWSRequest(method=self._method, url=self._path, data=body, headers=headers)
    request.context["timestamp"] = headers["X-Amz-Date"]
    return request


access_control.IAMRequestBase._create_aws_request = _create_aws_request
"#;

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
    /// Started by [`MotoServer::start_with_iam_authorization`].
    authorizing: bool,
}

impl MotoServer {
    /// Starts moto's server (with the fixes of `moto_shim.py`, which documents them) on a free port of 127.0.0.1
    /// and waits until it answers. AWS managed IAM policies exist, as in a real account.
    pub async fn start() -> Self {
        Self::start_answering(&[]).await
    }

    /// [`MotoServer::start`], answering requests with the errors of `faults` (the shim's test hook).
    pub async fn start_answering(faults: &[CloudFault]) -> Self {
        Self::start_with(faults, false).await
    }

    /// [`MotoServer::start`] with moto's IAM authorization on: every request of a service moto authorizes must be
    /// signed with the keys of an IAM user of this server (not the fake [`ACCESS_KEY_ID`]) whose policies allow its
    /// action. It starts off, so that the test can create its users (with [`MotoServer::aws`]) first; then
    /// [`MotoServer::authorize_requests`] turns it on. What moto checks and what it cannot: see
    /// tests/integration/runner/permissions.rs.
    pub async fn start_with_iam_authorization() -> Self {
        Self::start_with(&[], true).await
    }

    /// On a server of [`MotoServer::start_with_iam_authorization`], checks every request from now on (`true`) or
    /// none (`false`, while the test sets up users with the fake credentials of [`MotoServer::env`]); moto's
    /// `/moto-api/reset-auth`, which resets its count of requests let through unchecked.
    pub async fn authorize_requests(&self, on: bool) {
        assert!(self.authorizing, "authorize_requests needs MotoServer::start_with_iam_authorization");
        let unchecked = if on { "0" } else { "inf" };
        let url = format!("{}/moto-api/reset-auth", self.endpoint());
        let answer = reqwest::Client::new().post(&url).body(unchecked).send().await.expect("moto's reset-auth");
        assert!(answer.status().is_success(), "moto's reset-auth answered {}", answer.status());
    }

    async fn start_with(faults: &[CloudFault], authorizing: bool) -> Self {
        let faults = serde_json::to_string(faults).expect("faults serialise");
        let bin_dir = aws_tools_bin_dir();
        let shim = concat!(env!("CARGO_MANIFEST_DIR"), "/moto_shim.py");
        // With authorization, the fix below runs first, then the shim as its own script.
        let program = authorizing.then(|| {
            format!(
                "{SIGNATURE_FIX}\nimport runpy, sys\nsys.argv = [{shim:?}] + sys.argv[1:]\n\
                 runpy.run_path({shim:?}, run_name=\"__main__\")\n"
            )
        });
        let process = ServerProcess::start("moto", "/moto-api/", |port, _| {
            let mut command = Command::new(bin_dir.join("python"));
            match &program {
                Some(program) => command.args(["-c", program]),
                None => command.arg(shim),
            };
            command
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .env("PYTHONUNBUFFERED", "1")
                .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
                .env("MOTO_SHIM_FAULTS", &faults);
            if authorizing {
                // moto lets this many requests through unchecked, then checks every one ("inf", its default:
                // none is checked); authorize_requests resets the count.
                command.env("INITIAL_NO_AUTH_ACTION_COUNT", "inf");
            }
            command
        })
        .await;
        MotoServer { process, bin_dir, authorizing }
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
