//! terraform-runner's configuration: the environment the Job sets (src/executor/job.rs), read with the
//! `config` crate like the service's settings. Every error names the variable.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::settings::{Result, duration, invalid};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawRunnerSettings {
    runner_config_dir: Option<String>,
    runner_credentials_dir: Option<String>,
    runner_work_dir: Option<String>,
    runner_aws_config_dir: Option<String>,
    runner_outputs_secret: Option<String>,
    runner_terraform_binary: Option<String>,
    runner_kubeconfig_poll_interval: Option<String>,
    runner_kubeconfig_timeout: Option<String>,
    runner_termination_log: Option<String>,
    runner_log_level: Option<String>,
    pod_namespace: Option<String>,
}

#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// The mounted ConfigMap: `main.tf` and `runner.json`.
    pub config_dir: PathBuf,
    /// The mounted credentials Secret, one file per field.
    pub credentials_dir: PathBuf,
    /// Writable folder Terraform runs in (the ConfigMap mount is read-only).
    pub work_dir: PathBuf,
    /// Where the AWS profile for an assume-role credential is written (a memory-backed volume in the Job: it
    /// may hold source keys).
    pub aws_config_dir: PathBuf,
    /// Secret the kubeconfig is published to, in `namespace`.
    pub outputs_secret: String,
    pub namespace: String,
    /// `tofu` or `terraform` (a name on PATH or a path).
    pub terraform_binary: PathBuf,
    /// How often and how long a vanilla cluster's kubeconfig is awaited in SSM.
    pub kubeconfig_poll_interval: Duration,
    pub kubeconfig_timeout: Duration,
    /// Where Kubernetes picks up the failure message shown in the operation's status.
    pub termination_log: PathBuf,
    /// A tracing filter, like `APP_LOG_LEVEL`.
    pub log_level: String,
}

impl RunnerSettings {
    pub fn load() -> Result<Self> {
        Self::from_environment(std::env::vars().collect())
    }

    pub fn from_environment(environment: HashMap<String, String>) -> Result<Self> {
        let raw: RawRunnerSettings = config::Config::builder()
            .add_source(config::Environment::default().source(Some(environment)))
            .build()?
            .try_deserialize()?;
        let path = |value: Option<String>, default: &str| PathBuf::from(non_empty(value).unwrap_or(default.into()));
        Ok(RunnerSettings {
            config_dir: path(raw.runner_config_dir, "/etc/provisioner/config"),
            credentials_dir: path(raw.runner_credentials_dir, "/var/run/secrets/provisioner/credentials"),
            work_dir: path(raw.runner_work_dir, "/workspace/run"),
            aws_config_dir: path(raw.runner_aws_config_dir, "/var/run/provisioner/aws"),
            outputs_secret: non_empty(raw.runner_outputs_secret)
                .ok_or_else(|| invalid("RUNNER_OUTPUTS_SECRET", "must name the Secret to publish the kubeconfig to"))?,
            namespace: non_empty(raw.pod_namespace)
                .ok_or_else(|| invalid("POD_NAMESPACE", "must be set (the Job passes its own namespace)"))?,
            terraform_binary: path(raw.runner_terraform_binary, "tofu"),
            kubeconfig_poll_interval: duration(
                "RUNNER_KUBECONFIG_POLL_INTERVAL",
                raw.runner_kubeconfig_poll_interval,
                "20s",
            )?,
            kubeconfig_timeout: duration("RUNNER_KUBECONFIG_TIMEOUT", raw.runner_kubeconfig_timeout, "20m")?,
            termination_log: path(raw.runner_termination_log, "/dev/termination-log"),
            log_level: non_empty(raw.runner_log_level).unwrap_or_else(|| "info".to_owned()),
        })
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|value| value.trim().to_owned()).filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(variables: &[(&str, &str)]) -> Result<RunnerSettings> {
        RunnerSettings::from_environment(variables.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn defaults_match_the_job_spec() {
        let settings = load(&[("RUNNER_OUTPUTS_SECRET", "provision-x-outputs"), ("POD_NAMESPACE", "jobs")]).unwrap();
        assert_eq!(settings.config_dir, PathBuf::from("/etc/provisioner/config"));
        assert_eq!(settings.credentials_dir, PathBuf::from("/var/run/secrets/provisioner/credentials"));
        assert_eq!(settings.terraform_binary, PathBuf::from("tofu"));
        assert_eq!(settings.kubeconfig_poll_interval, Duration::from_secs(20));
        assert_eq!(settings.kubeconfig_timeout, Duration::from_secs(20 * 60));
    }

    #[test]
    fn errors_name_the_variable() {
        let missing = load(&[("POD_NAMESPACE", "jobs")]).unwrap_err().to_string();
        assert!(missing.starts_with("RUNNER_OUTPUTS_SECRET:"), "{missing}");
        let missing = load(&[("RUNNER_OUTPUTS_SECRET", "s")]).unwrap_err().to_string();
        assert!(missing.starts_with("POD_NAMESPACE:"), "{missing}");
        let bad =
            load(&[("RUNNER_OUTPUTS_SECRET", "s"), ("POD_NAMESPACE", "n"), ("RUNNER_KUBECONFIG_TIMEOUT", "soon")])
                .unwrap_err()
                .to_string();
        assert!(bad.starts_with("RUNNER_KUBECONFIG_TIMEOUT:"), "{bad}");
    }
}
