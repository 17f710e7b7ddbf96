//! `terraform-runner fetch-modules`, the Job's init container: clones the pinned ref of the modules repository
//! and refuses it unless it is exactly the configured commit, so that Terraform never runs modules nobody
//! pinned. Repository credentials are read from the init container's own Secret mount and handed to git through
//! its environment (an `Authorization` header), never through the URL or the pod spec.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use runner_contract::environment::mount::MODULES_DIR;
use runner_contract::modules::{InvalidSource, ModulesSource, mount, var};
use secrecy::{ExposeSecret, SecretString};

/// Why the modules could not be fetched; safe to show (no credential is ever part of it).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Setting(#[from] InvalidSource),
    #[error("running git failed: {0}")]
    Git(String),
    #[error(
        "the modules repository's {git_ref} is commit {actual}, not the pinned {pinned}: the ref was moved; \
         nothing was run"
    )]
    NotPinned { git_ref: String, actual: String, pinned: String },
}

/// The fetch's settings: the source from the environment, the clone's destination and the credentials folder.
pub struct Fetch {
    pub source: ModulesSource,
    pub target: PathBuf,
    pub credentials_dir: PathBuf,
}

impl Fetch {
    /// From the variables of [`runner_contract::modules::var`]; the Job's mount paths otherwise.
    pub fn from_env() -> Result<Self, FetchError> {
        let get = |name| std::env::var(name).unwrap_or_default();
        let allow_local = get(var::ALLOW_LOCAL) == "true";
        let source = ModulesSource::new(&get(var::URL), &get(var::REF), &get(var::COMMIT), allow_local)?;
        let target = std::env::var_os(var::DIR).map_or_else(|| PathBuf::from(MODULES_DIR), PathBuf::from);
        let credentials_dir =
            std::env::var_os(var::CREDENTIALS_DIR).map_or_else(|| PathBuf::from(mount::CREDENTIALS_DIR), PathBuf::from);
        Ok(Fetch { source, target, credentials_dir })
    }

    /// Clones and checks; returns the commit.
    pub async fn run(&self) -> Result<String, FetchError> {
        let source = &self.source;
        let target = self.target.to_string_lossy();
        let clone = ["clone", "--depth=1", "--single-branch", "--branch", &source.git_ref, "--", &source.url, &target];
        git("clone", &clone, &self.access()).await?;
        let actual =
            git("rev-parse", &["-C", &target, "rev-parse", "HEAD"], &Access::default()).await?.trim().to_owned();
        if actual != source.commit {
            // What Terraform would read is gone too, should anything run after a failed init.
            let _ = std::fs::remove_dir_all(&self.target);
            return Err(FetchError::NotPinned {
                git_ref: source.git_ref.clone(),
                actual,
                pinned: source.commit.clone(),
            });
        }
        tracing::info!(git_ref = source.git_ref, commit = actual, "fetched the pinned modules");
        Ok(actual)
    }

    /// What the mounted Secret gives the clone: basic credentials when it holds both files, a private CA when it
    /// holds one.
    fn access(&self) -> Access {
        let ca_file = Some(self.credentials_dir.join(mount::CA_FILE)).filter(|file| file.is_file());
        Access { header: self.credentials(), ca_file }
    }

    /// HTTPS basic credentials from the mounted Secret, when it holds both files.
    fn credentials(&self) -> Option<SecretString> {
        let read = |name| read_trimmed(&self.credentials_dir.join(name));
        let (username, password) = (read(mount::USERNAME_FILE)?, read(mount::PASSWORD_FILE)?);
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            username.expose_secret(),
            password.expose_secret()
        ));
        Some(SecretString::from(format!("Authorization: Basic {basic}")))
    }
}

fn read_trimmed(path: &Path) -> Option<SecretString> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| SecretString::from(text))
}

/// How git reaches the repository: an `Authorization` header, and the authorities its certificate chains to.
#[derive(Default)]
struct Access {
    header: Option<SecretString>,
    ca_file: Option<PathBuf>,
}

/// Runs git without a terminal prompt; the header goes to HTTP requests through git's environment configuration.
async fn git(what: &str, args: &[&str], access: &Access) -> Result<String, FetchError> {
    let mut command = tokio::process::Command::new("git");
    command.args(args).env("GIT_TERMINAL_PROMPT", "0").kill_on_drop(true);
    if let Some(ca_file) = &access.ca_file {
        command.env("GIT_SSL_CAINFO", ca_file);
    }
    if let Some(header) = &access.header {
        command
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env("GIT_CONFIG_VALUE_0", header.expose_secret());
    }
    let output = command.output().await.map_err(|error| FetchError::Git(error.to_string()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
        Err(FetchError::Git(format!("`git {what}` exited with {}: {last}", output.status)))
    }
}
