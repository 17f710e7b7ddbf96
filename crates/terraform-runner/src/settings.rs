//! terraform-runner's configuration: what the Job sets ([`RunnerEnvironment`], the contract with
//! src/executor/job.rs), and the knobs the runner alone reads, each with a default. Every error names the
//! variable.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use process_support::traces::{self, TraceSettings};
use runner_contract::environment::{InvalidVariable, RunnerEnvironment, non_empty, required, var};
use runner_contract::job::STATE_LOCK_TIMEOUT;
use runner_contract::providers::IMAGE_LOCK_DIR;
use secrecy::SecretString;
use uuid::Uuid;

use crate::state_encryption::MIN_PASSPHRASE_CHARS;
use crate::transient::TransientRetries;

const TERRAFORM_BINARY: &str = "RUNNER_TERRAFORM_BINARY";
const KUBECONFIG_POLL_INTERVAL: &str = "RUNNER_KUBECONFIG_POLL_INTERVAL";
const KUBECONFIG_TIMEOUT: &str = "RUNNER_KUBECONFIG_TIMEOUT";
const CONTROL_PLANE_UPGRADE_TIMEOUT: &str = "RUNNER_CONTROL_PLANE_UPGRADE_TIMEOUT";
const TERMINATION_LOG: &str = "RUNNER_TERMINATION_LOG";
const LOG_LEVEL: &str = "RUNNER_LOG_LEVEL";
const PROVIDER_LOCK_DIR: &str = "RUNNER_PROVIDER_LOCK_DIR";
const PROTECTED_RESOURCES: &str = "RUNNER_PROTECTED_RESOURCES";
const STATE_LOCK_TIMEOUT_VARIABLE: &str = "RUNNER_STATE_LOCK_TIMEOUT";
const STATE_LOCK_POLL_INTERVAL: &str = "RUNNER_STATE_LOCK_POLL_INTERVAL";
const TRANSIENT_RETRIES: &str = "RUNNER_TRANSIENT_RETRIES";
const TRANSIENT_PAUSE: &str = "RUNNER_TRANSIENT_PAUSE";

#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// Where the Job's volumes are, and the Secret the kubeconfig is published to.
    pub job: RunnerEnvironment,
    /// The namespace of that Secret: the pod's own.
    pub namespace: String,
    /// Who this run is, as recorded for the state lock it takes: its pod and its operation.
    pub pod_name: String,
    pub operation_id: Uuid,
    /// How long a run waits for a state lock held by another (live) run, and how often it judges the lock again
    /// meanwhile (its holder may die while it waits).
    pub state_lock_timeout: Duration,
    pub state_lock_poll_interval: Duration,
    /// `tofu` or `terraform` (a name on PATH or a path).
    pub terraform_binary: PathBuf,
    /// How often and how long a vanilla cluster's kubeconfig is awaited in SSM, and after a wake-up its API
    /// server.
    pub kubeconfig_poll_interval: Duration,
    pub kubeconfig_timeout: Duration,
    /// How long a vanilla upgrade waits for its control-plane nodes to run the new version (polled like the
    /// kubeconfig).
    pub control_plane_upgrade_timeout: Duration,
    /// Where Kubernetes picks up the failure message shown in the operation's status.
    pub termination_log: PathBuf,
    /// A tracing filter, like `APP_LOG_LEVEL`.
    pub log_level: String,
    /// The lock files of the provider versions the image carries.
    pub provider_lock_dir: PathBuf,
    /// Resource addresses an apply must not destroy or replace, beyond the built-in ones (the cluster, its
    /// network and control plane).
    pub protected_resources: Vec<String>,
    /// How a transient cloud failure (see [`crate::transient`]) is tried again.
    pub transient_retries: TransientRetries,
    /// Where the run's spans go (the service's collector, from the Job); off without `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub traces: TraceSettings,
    /// `TRACEPARENT`: the service's span that created the Job, which the run's spans continue.
    pub traceparent: Option<String>,
    /// The passphrase the state and saved plans are encrypted with; `None`: they are not.
    pub state_passphrase: Option<SecretString>,
}

impl RunnerSettings {
    pub fn load() -> Result<Self, InvalidVariable> {
        Self::from_environment(std::env::vars().collect())
    }

    pub fn from_environment(environment: HashMap<String, String>) -> Result<Self, InvalidVariable> {
        let text = |name: &str, default: &'static str| non_empty(&environment, name).unwrap_or(default);
        let duration = |name: &'static str, default: &'static str| {
            process_support::parse_positive_duration(text(name, default))
                .map_err(|message| InvalidVariable { variable: name, message })
        };
        Ok(RunnerSettings {
            job: RunnerEnvironment::parse(&environment)?,
            namespace: required(&environment, var::POD_NAMESPACE, "must be set (the Job passes its own namespace)")?
                .to_owned(),
            pod_name: required(&environment, var::POD_NAME, "must be set (the Job passes its pod's name)")?.to_owned(),
            operation_id: required(&environment, var::OPERATION_ID, "must be set (the Job passes its operation)")?
                .parse()
                .map_err(|error| InvalidVariable { variable: var::OPERATION_ID, message: format!("{error}") })?,
            state_lock_timeout: non_empty(&environment, STATE_LOCK_TIMEOUT_VARIABLE)
                .map(|_| duration(STATE_LOCK_TIMEOUT_VARIABLE, ""))
                .transpose()?
                .unwrap_or(STATE_LOCK_TIMEOUT),
            state_lock_poll_interval: duration(STATE_LOCK_POLL_INTERVAL, "10s")?,
            terraform_binary: text(TERRAFORM_BINARY, "tofu").into(),
            kubeconfig_poll_interval: duration(KUBECONFIG_POLL_INTERVAL, "20s")?,
            kubeconfig_timeout: duration(KUBECONFIG_TIMEOUT, "20m")?,
            control_plane_upgrade_timeout: duration(CONTROL_PLANE_UPGRADE_TIMEOUT, "60m")?,
            termination_log: text(TERMINATION_LOG, "/dev/termination-log").into(),
            log_level: text(LOG_LEVEL, "info").to_owned(),
            provider_lock_dir: text(PROVIDER_LOCK_DIR, IMAGE_LOCK_DIR).into(),
            protected_resources: text(PROTECTED_RESOURCES, "")
                .split(',')
                .map(str::trim)
                .filter(|address| !address.is_empty())
                .map(str::to_owned)
                .collect(),
            transient_retries: TransientRetries {
                retries: text(TRANSIENT_RETRIES, "3")
                    .parse()
                    .map_err(|error| InvalidVariable { variable: TRANSIENT_RETRIES, message: format!("{error}") })?,
                first_pause: duration(TRANSIENT_PAUSE, "20s")?,
            },
            traces: TraceSettings::from_environment(&environment, "terraform-runner")
                .map_err(|error| InvalidVariable { variable: error.variable, message: error.message })?,
            traceparent: non_empty(&environment, traces::variable::TRACEPARENT).map(str::to_owned),
            state_passphrase: state_passphrase(&environment)?,
        })
    }
}

fn state_passphrase(environment: &HashMap<String, String>) -> Result<Option<SecretString>, InvalidVariable> {
    match environment.get(var::STATE_PASSPHRASE).filter(|value| !value.is_empty()) {
        None => Ok(None),
        Some(passphrase) if passphrase.chars().count() < MIN_PASSPHRASE_CHARS => Err(InvalidVariable {
            variable: var::STATE_PASSPHRASE,
            message: format!("must be at least {MIN_PASSPHRASE_CHARS} characters (OpenTofu's pbkdf2 key provider)"),
        }),
        Some(passphrase) => Ok(Some(SecretString::from(passphrase.as_str()))),
    }
}

#[cfg(test)]
mod tests {
    use runner_contract::environment::mount;

    use super::*;

    fn load(variables: &[(&str, &str)]) -> Result<RunnerSettings, InvalidVariable> {
        RunnerSettings::from_environment(variables.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn defaults_match_the_job_spec() {
        let settings = load(&job_variables()).unwrap();
        assert_eq!(settings.job.config_dir, PathBuf::from("/etc/provisioner/config"));
        assert_eq!(settings.job.credentials_dir, PathBuf::from("/var/run/secrets/provisioner/credentials"));
        assert_eq!(settings.job.work_dir, PathBuf::from(mount::WORK_DIR));
        assert_eq!(settings.terraform_binary, PathBuf::from("tofu"));
        assert_eq!(settings.kubeconfig_poll_interval, Duration::from_secs(20));
        assert_eq!(settings.kubeconfig_timeout, Duration::from_secs(20 * 60));
        assert_eq!(settings.termination_log, PathBuf::from("/dev/termination-log"));
        assert_eq!(settings.provider_lock_dir, PathBuf::from(IMAGE_LOCK_DIR));
        assert_eq!(settings.state_lock_timeout, STATE_LOCK_TIMEOUT);
        assert_eq!(settings.state_lock_poll_interval, Duration::from_secs(10));
        assert_eq!(settings.transient_retries, TransientRetries { retries: 3, first_pause: Duration::from_secs(20) });
        assert_eq!((settings.pod_name.as_str(), settings.operation_id.to_string().as_str()), (POD, OPERATION));
        assert!(settings.state_passphrase.is_none(), "the state is encrypted only with a passphrase");
    }

    const POD: &str = "provision-x-abcde";
    const OPERATION: &str = "0193a5c1-1b2c-7d3e-8f40-123456789abc";

    /// What the Job sets.
    fn job_variables() -> Vec<(&'static str, &'static str)> {
        vec![
            ("RUNNER_OUTPUTS_SECRET", "provision-x-outputs"),
            ("POD_NAMESPACE", "jobs"),
            ("POD_NAME", POD),
            ("RUNNER_OPERATION_ID", OPERATION),
        ]
    }

    fn without(name: &str) -> Vec<(&'static str, &'static str)> {
        job_variables().into_iter().filter(|(variable, _)| *variable != name).collect()
    }

    #[test]
    fn errors_name_the_variable() {
        for variable in ["RUNNER_OUTPUTS_SECRET", "POD_NAMESPACE", "POD_NAME", "RUNNER_OPERATION_ID"] {
            let missing = load(&without(variable)).unwrap_err().to_string();
            assert!(missing.starts_with(&format!("{variable}:")), "{missing}");
        }
        for (variable, value) in [
            ("RUNNER_KUBECONFIG_TIMEOUT", "soon"),
            ("RUNNER_STATE_LOCK_TIMEOUT", "0s"),
            ("RUNNER_OPERATION_ID", "op-1"),
            ("RUNNER_TRANSIENT_RETRIES", "-1"),
            ("RUNNER_TRANSIENT_PAUSE", "soon"),
            ("RUNNER_STATE_PASSPHRASE", "fifteen chars.."),
        ] {
            let mut variables = without(variable);
            variables.push((variable, value));
            let bad = load(&variables).unwrap_err().to_string();
            assert!(bad.starts_with(&format!("{variable}:")), "{bad}");
        }
    }
}
