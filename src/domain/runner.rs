//! The contract between the service and terraform-runner: the files of a run's ConfigMap and what
//! `runner.json` says. The service writes it (src/render), the runner reads it (src/runner).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Topology;

/// The root configuration Terraform runs.
pub const MAIN_TF_FILE: &str = "main.tf";
/// What the runner needs besides the configuration: [`RunnerManifest`] as JSON.
pub const RUNNER_MANIFEST_FILE: &str = "runner.json";
/// The key of the kubeconfig in the outputs Secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// What the Job does with the configuration; the configuration itself is the same for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunAction {
    Apply,
    Destroy,
}

impl RunAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RunAction::Apply => "apply",
            RunAction::Destroy => "destroy",
        }
    }
}

/// `runner.json`: what terraform-runner needs before it can run Terraform (the state bucket to ensure, the
/// action). Identifiers only, no secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunnerManifest {
    pub action: RunAction,
    pub topology: Topology,
    /// `aws` or `gcp`; follows from the topology, written out for people reading the ConfigMap.
    pub cloud: String,
    pub region: String,
    pub state_bucket: String,
    pub runtime_id: Uuid,
    pub runtime_name: String,
    /// GCS buckets belong to a project, so the runner needs it to create the state bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp_project: Option<String>,
    /// The SSM path a vanilla cluster's nodes publish their join credentials and kubeconfig under; not Terraform
    /// resources, so the runner removes them after a destroy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter_prefix: Option<String>,
}
