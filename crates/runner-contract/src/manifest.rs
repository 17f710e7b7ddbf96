//! The files of a run's ConfigMap and what `runner.json` says. The service writes them (src/render), the runner
//! reads them; the runner publishes the kubeconfig under [`KUBECONFIG_KEY`], where the service reads it.

use serde::{Deserialize, Serialize};

use crate::administrators::Administrator;
use uuid::Uuid;

use crate::approval::ApprovalPolicy;
use crate::providers::ProviderVersion;
use crate::{Cloud, Topology};

/// The root configuration Terraform runs.
pub const MAIN_TF_FILE: &str = "main.tf";
/// What the runner needs besides the configuration: [`RunnerManifest`] as JSON.
pub const RUNNER_MANIFEST_FILE: &str = "runner.json";
/// The key of the kubeconfig in the outputs Secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// What the Job does with the configuration; the configuration itself is the same for all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunAction {
    Apply,
    Destroy,
    /// A dry run: plan the apply, change nothing (not even create the state bucket).
    Plan,
}

impl RunAction {
    pub const ALL: [RunAction; 3] = [RunAction::Apply, RunAction::Destroy, RunAction::Plan];

    /// The spelling in `runner.json` and in the runner's `--action` argument.
    pub fn as_str(self) -> &'static str {
        match self {
            RunAction::Apply => "apply",
            RunAction::Destroy => "destroy",
            RunAction::Plan => "plan",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.as_str() == text)
    }
}

/// `runner.json`: what terraform-runner needs before it can run Terraform (the state bucket to ensure, the
/// action). Identifiers only, no secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunnerManifest {
    pub action: RunAction,
    pub topology: Topology,
    /// Follows from the topology, written out for people reading the ConfigMap.
    pub cloud: Cloud,
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
    /// The provider `main.tf` requires, at the exact version it pins: the runner installs it with the image's lock
    /// file for that version.
    pub provider: ProviderVersion,
    /// This run starts a stopped control plane (a vanilla wake-up): it succeeds only once the API server answers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_api_server: bool,
    /// A provisioning dry run: the cluster does not exist yet, so the plan starts from empty state, and an existing
    /// state bucket of the same name (a live runtime's) is never read, locked or written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plan_from_empty_state: bool,
    /// A vanilla upgrade: the control plane is upgraded (and awaited) before anything else changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_upgrade: Option<ControlPlaneUpgrade>,
    /// A vanilla certificate renewal: the control plane renews its certificates (and awaited) before the apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_renewal: Option<CertificateRenewal>,
    /// Which plans of an apply wait for approval instead of being applied.
    #[serde(default, skip_serializing_if = "is_auto")]
    pub approval_policy: ApprovalPolicy,
    /// The digest of the saved plan a caller approved: the run applies exactly that file, or fails as stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_plan_sha256: Option<String>,
    /// The cluster's administrators, bound to `cluster-admin` after the apply (the binding removed when empty);
    /// `None`: a run that leaves them as they are (a hibernation, a wake-up, a destroy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub administrators: Option<Vec<Administrator>>,
}

fn is_auto(policy: &ApprovalPolicy) -> bool {
    *policy == ApprovalPolicy::Auto
}

/// How a run changes a self-managed control plane before anything else, one node at a time: it applies each
/// node's machine (`machines[i]`) alone and waits until node i has published that it runs again on
/// `machine_type`; then it applies `resource` (what tells the nodes the version) alone and waits until node
/// `last_node` has published that it runs `version`; then it plans and applies the rest (the workers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneUpgrade {
    /// The Terraform address of the control-plane instances (`count` indexed by node).
    pub machines: String,
    pub machine_type: String,
    /// The Terraform address of the resource the nodes watch for the version.
    pub resource: String,
    pub last_node: u32,
    /// `MAJOR.MINOR`.
    pub version: String,
}

/// How a run renews a self-managed control plane's certificates: it publishes `request` as the renewal request
/// the nodes watch, and waits until node `last_node` has published that it renewed them for it (each node renews
/// after the one before, node 0 publishing the renewed admin kubeconfig); then it applies and publishes as any run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRenewal {
    /// Names this renewal (the operation's id): a node renews once per request.
    pub request: String,
    pub last_node: u32,
}

/// Where the nodes of a vanilla cluster publish (this creation of it): the folder of its kubeconfig parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesPath(String);

impl NodesPath {
    pub fn of_kubeconfig_parameter(kubeconfig_parameter: &str) -> Option<Self> {
        let (path, _) = kubeconfig_parameter.rsplit_once('/')?;
        Some(NodesPath(path.to_owned()))
    }

    /// Published by node `node` at every boot on `machine_type`, once its API server is ready.
    pub fn running_marker(&self, node: u32, machine_type: &str) -> String {
        format!("{}/control-plane/{node}/running/{machine_type}", self.0)
    }

    /// Published by node `node` once it runs `version`.
    pub fn upgraded_marker(&self, node: u32, version: &str) -> String {
        format!("{}/control-plane/{node}/upgraded/{version}", self.0)
    }

    /// Where a run asks the control plane to renew its certificates.
    pub fn renewal_request(&self) -> String {
        format!("{}/control-plane/certificates-renewal", self.0)
    }

    /// Published by node `node` at bootstrap when it renews certificates on request (its bootstrap is recent
    /// enough).
    pub fn renews_certificates_marker(&self, node: u32) -> String {
        format!("{}/control-plane/{node}/renews-certificates", self.0)
    }

    /// Published by node `node` once it renewed its certificates for `request`.
    pub fn renewed_marker(&self, node: u32, request: &str) -> String {
        format!("{}/control-plane/{node}/renewed/{request}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_json_is_spelled_as_the_runner_reads_it() {
        let manifest = RunnerManifest {
            action: RunAction::Destroy,
            topology: Topology::VanillaKubeadm,
            cloud: Cloud::Aws,
            region: "eu-central-1".to_owned(),
            state_bucket: "kubeopera-terraform-state-dev-demo".to_owned(),
            runtime_id: Uuid::nil(),
            runtime_name: "demo".to_owned(),
            gcp_project: None,
            ssm_parameter_prefix: Some("/kubeopera/x/".to_owned()),
            provider: ProviderVersion { source: "hashicorp/aws".to_owned(), version: "6.47.0".to_owned() },
            wait_for_api_server: false,
            plan_from_empty_state: false,
            control_plane_upgrade: None,
            certificate_renewal: None,
            approval_policy: ApprovalPolicy::Auto,
            approved_plan_sha256: None,
            administrators: None,
        };
        let json = serde_json::to_value(&manifest).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "action": "destroy", "topology": "vanilla_kubeadm", "cloud": "aws", "region": "eu-central-1",
                "stateBucket": "kubeopera-terraform-state-dev-demo", "runtimeId": Uuid::nil(),
                "runtimeName": "demo", "ssmParameterPrefix": "/kubeopera/x/",
                "provider": { "source": "hashicorp/aws", "version": "6.47.0" },
            })
        );
        assert_eq!(serde_json::from_value::<RunnerManifest>(json).unwrap(), manifest);
        let approved = RunnerManifest {
            approval_policy: ApprovalPolicy::SafeOnly,
            approved_plan_sha256: Some("ab".repeat(32)),
            ..manifest
        };
        let json = serde_json::to_value(&approved).unwrap();
        assert_eq!(
            (json["approvalPolicy"].as_str(), json["approvedPlanSha256"].as_str()),
            (Some("safeOnly"), Some("ab".repeat(32).as_str()))
        );
    }

    #[test]
    fn the_nodes_markers_sit_beside_the_kubeconfig() {
        let path = NodesPath::of_kubeconfig_parameter("/kubeopera/x/generation-1/kubeconfig").unwrap();
        assert_eq!(path.upgraded_marker(2, "1.35"), "/kubeopera/x/generation-1/control-plane/2/upgraded/1.35");
        assert_eq!(path.running_marker(0, "m6i.large"), "/kubeopera/x/generation-1/control-plane/0/running/m6i.large");
        assert_eq!(NodesPath::of_kubeconfig_parameter("kubeconfig"), None);
    }

    #[test]
    fn actions_parse_from_their_spelling() {
        for action in RunAction::ALL {
            assert_eq!(RunAction::parse(action.as_str()), Some(action));
        }
        assert_eq!(RunAction::parse("Plan"), None);
    }
}
