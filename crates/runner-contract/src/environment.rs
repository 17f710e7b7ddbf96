//! How the Job tells the runner where things are: the volumes are mounted at the [`mount`] paths, and the
//! runner's container gets [`RunnerEnvironment::variables`] plus, from the downward API, what only the pod knows
//! ([`downward_variables`]: its namespace, its name and its operation). The runner reads the same with
//! [`RunnerEnvironment::parse`].

use std::collections::HashMap;
use std::path::PathBuf;

/// Where the Job mounts its volumes; the runner's defaults too, so that a runner started by the Job finds them
/// even without the variables.
pub mod mount {
    /// The pod's writable folder (an emptyDir; the root filesystem is read-only).
    pub const WORKSPACE: &str = "/workspace";
    /// Where the init container clones the modules.
    pub const MODULES_DIR: &str = "/workspace/modules";
    /// Where the runner copies the configuration and Terraform writes `.terraform`.
    pub const WORK_DIR: &str = "/workspace/run";
    /// [`MODULES_DIR`] as the rendered configurations name it: relative to [`WORK_DIR`], so that a
    /// configuration finds its modules wherever the workspace is (a test stand-in of the pod too).
    pub const MODULES_FROM_WORK_DIR: &str = "../modules";
    /// The run's ConfigMap: `main.tf` and `runner.json`.
    pub const CONFIG_DIR: &str = "/etc/provisioner/config";
    /// The run's credentials Secret, one file per field (see [`crate::credential`]).
    pub const CREDENTIALS_DIR: &str = "/var/run/secrets/provisioner/credentials";
    /// Where the runner writes the AWS profile Terraform uses for an assume-role credential (memory-backed: it
    /// may hold the source keys).
    pub const AWS_CONFIG_DIR: &str = "/var/run/provisioner/aws";
}

/// The names of the variables the Job sets.
pub mod var {
    pub const CONFIG_DIR: &str = "RUNNER_CONFIG_DIR";
    pub const CREDENTIALS_DIR: &str = "RUNNER_CREDENTIALS_DIR";
    pub const WORK_DIR: &str = "RUNNER_WORK_DIR";
    pub const AWS_CONFIG_DIR: &str = "RUNNER_AWS_CONFIG_DIR";
    pub const OUTPUTS_SECRET: &str = "RUNNER_OUTPUTS_SECRET";
    /// The namespace of the outputs Secret: the pod's own, from the downward API.
    pub const POD_NAMESPACE: &str = "POD_NAMESPACE";
    /// The pod's name, which the runner records as the holder of the state lock (Terraform's lock says
    /// `user@hostname`, and a pod's hostname is its name).
    pub const POD_NAME: &str = "POD_NAME";
    /// The operation the run belongs to (the pod's operation label), recorded with the pod name.
    pub const OPERATION_ID: &str = "RUNNER_OPERATION_ID";
    /// The passphrase the state and saved plans are encrypted with (from a Secret; unset: not encrypted).
    pub const STATE_PASSPHRASE: &str = "RUNNER_STATE_PASSPHRASE";
}

/// The variables the Job fills from the pod's own fields, with each field's path.
pub fn downward_variables() -> [(&'static str, String); 3] {
    [
        (var::POD_NAMESPACE, "metadata.namespace".to_owned()),
        (var::POD_NAME, "metadata.name".to_owned()),
        (var::OPERATION_ID, format!("metadata.labels['{}']", crate::job::OPERATION_LABEL)),
    ]
}

/// A variable with a value the runner cannot use; the message says what it should be.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct InvalidVariable {
    pub variable: &'static str,
    pub message: String,
}

/// What the Job passes to the runner by value: where its volumes are, and the Secret to publish the kubeconfig to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerEnvironment {
    pub config_dir: PathBuf,
    pub credentials_dir: PathBuf,
    pub work_dir: PathBuf,
    pub aws_config_dir: PathBuf,
    pub outputs_secret: String,
}

impl RunnerEnvironment {
    /// The environment of a Job that mounts its volumes at the [`mount`] paths.
    pub fn for_job(outputs_secret: impl Into<String>) -> Self {
        RunnerEnvironment {
            config_dir: mount::CONFIG_DIR.into(),
            credentials_dir: mount::CREDENTIALS_DIR.into(),
            work_dir: mount::WORK_DIR.into(),
            aws_config_dir: mount::AWS_CONFIG_DIR.into(),
            outputs_secret: outputs_secret.into(),
        }
    }

    /// Name and value of every variable, for the Job's container.
    pub fn variables(&self) -> [(&'static str, String); 5] {
        let path = |path: &PathBuf| path.display().to_string();
        [
            (var::CONFIG_DIR, path(&self.config_dir)),
            (var::CREDENTIALS_DIR, path(&self.credentials_dir)),
            (var::WORK_DIR, path(&self.work_dir)),
            (var::AWS_CONFIG_DIR, path(&self.aws_config_dir)),
            (var::OUTPUTS_SECRET, self.outputs_secret.clone()),
        ]
    }

    /// Reads the variables back. A path that is not set is its [`mount`] path; the outputs Secret must be named.
    pub fn parse(variables: &HashMap<String, String>) -> Result<Self, InvalidVariable> {
        let path = |name: &str, default: &str| PathBuf::from(non_empty(variables, name).unwrap_or(default));
        Ok(RunnerEnvironment {
            config_dir: path(var::CONFIG_DIR, mount::CONFIG_DIR),
            credentials_dir: path(var::CREDENTIALS_DIR, mount::CREDENTIALS_DIR),
            work_dir: path(var::WORK_DIR, mount::WORK_DIR),
            aws_config_dir: path(var::AWS_CONFIG_DIR, mount::AWS_CONFIG_DIR),
            outputs_secret: required(
                variables,
                var::OUTPUTS_SECRET,
                "must name the Secret to publish the kubeconfig to",
            )?
            .to_owned(),
        })
    }
}

/// A variable's trimmed value; an empty one counts as not set.
pub fn non_empty<'a>(variables: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    variables.get(name).map(|value| value.trim()).filter(|value| !value.is_empty())
}

/// A variable that must be set; `expected` says what it should hold.
pub fn required<'a>(
    variables: &'a HashMap<String, String>,
    name: &'static str,
    expected: &str,
) -> Result<&'a str, InvalidVariable> {
    non_empty(variables, name).ok_or_else(|| InvalidVariable { variable: name, message: expected.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relative_modules_path_leads_from_the_work_dir_to_the_modules() {
        let work_dir = std::path::Path::new(mount::WORK_DIR);
        let relative = mount::MODULES_FROM_WORK_DIR.strip_prefix("../").expect("one folder up");
        assert_eq!(work_dir.parent().unwrap().join(relative), std::path::Path::new(mount::MODULES_DIR));
    }

    #[test]
    fn what_the_job_sets_is_what_the_runner_reads() {
        let environment = RunnerEnvironment::for_job("provision-x-outputs");
        let variables = environment.variables().map(|(name, value)| (name.to_owned(), value)).into();
        assert_eq!(RunnerEnvironment::parse(&variables).unwrap(), environment);
    }

    #[test]
    fn unset_paths_are_the_mount_paths_and_the_outputs_secret_is_required() {
        let only_secret = HashMap::from([(var::OUTPUTS_SECRET.to_owned(), " s ".to_owned())]);
        assert_eq!(RunnerEnvironment::parse(&only_secret).unwrap(), RunnerEnvironment::for_job("s"));
        let error = RunnerEnvironment::parse(&HashMap::from([(var::OUTPUTS_SECRET.to_owned(), String::new())]))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("RUNNER_OUTPUTS_SECRET:"), "{error}");
    }
}
