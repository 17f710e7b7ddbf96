//! Renders the Terraform root configuration of a runtime: one `main.tf` per topology that calls the shared
//! modules (cloned by the Job's init container to `/workspace/modules`, named relative to the work folder), plus a small `runner.json` telling
//! terraform-runner what to do. The files go into a ConfigMap; no credential is ever part of them.
//!
//! Request values are validated before they get here, but the renderer does not rely on it: every value passes
//! through an HCL string escaper, and the templates only place values between quotes (numbers and flags are
//! typed as such in the template data).

mod access;
mod escape;
mod pools;

use std::collections::BTreeMap;

use handlebars::Handlebars;
use ipnet::Ipv4Net;
use runner_contract::manifest::{
    CertificateRenewal, ControlPlaneUpgrade, MAIN_TF_FILE, RUNNER_MANIFEST_FILE, RunnerManifest,
};
use runner_contract::providers::ProviderVersion;
use serde::Serialize;
use uuid::Uuid;

use crate::domain::{OperationType, Runtime, Topology};
use access::EksIdentityProvider;
use escape::escape_hcl_string;
use pools::PoolData;
pub use runner_contract::manifest::RunAction;

/// Well under the 1 MiB a ConfigMap can hold, leaving room for its metadata.
const MAX_RENDERED_BYTES: usize = 512 * 1024;

const DEFAULT_VPC_CIDR: &str = "10.0.0.0/16";
const DEFAULT_POD_CIDR: &str = "192.168.0.0/16";
const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";

const TEMPLATES: [(Topology, &str); 3] = [
    (Topology::VanillaKubeadm, include_str!("../../assets/terraform/vanilla_kubeadm/main.tf.hbs")),
    (Topology::Eks, include_str!("../../assets/terraform/eks/main.tf.hbs")),
    (Topology::Gke, include_str!("../../assets/terraform/gke/main.tf.hbs")),
];

/// The `worker_pools` argument every topology's module call has.
const WORKER_POOLS_PARTIAL: &str = include_str!("../../assets/terraform/worker_pools.hbs");

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the Terraform template for {topology} does not compile: {source}")]
    Template { topology: &'static str, source: Box<handlebars::TemplateError> },
    #[error("rendering the Terraform configuration for {topology} failed: {source}")]
    Render { topology: &'static str, source: handlebars::RenderError },
    #[error("topology {topology} needs the {section} section, which runtime {runtime_id} does not have")]
    MissingSection { topology: &'static str, section: &'static str, runtime_id: Uuid },
    #[error("the rendered configuration is {size} bytes, more than the {limit} bytes allowed in its ConfigMap")]
    TooLarge { size: usize, limit: usize },
    #[error("provider {provider} of runtime {runtime_id} is not an exact version of a {cloud} provider")]
    Provider { provider: ProviderVersion, cloud: &'static str, runtime_id: Uuid },
    #[error("serializing runner.json failed: {0}")]
    RunnerManifest(#[from] serde_json::Error),
    #[error(
        "runtime {runtime_id} records no IPv4 ranges that may reach its Kubernetes API (it was provisioned before \
         they were recorded) and APP_API_ALLOWED_CIDRS is not set: set it, or upgrade the runtime with \
         apiAllowedCidrs"
    )]
    NoApiAllowedCidrs { runtime_id: Uuid },
}

/// The files of a rendered configuration: file name (a valid ConfigMap key) to content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedConfig {
    pub files: BTreeMap<String, String>,
}

/// Renders configurations from templates compiled into the binary; build it once and share it.
#[derive(Debug)]
pub struct Renderer {
    registry: Handlebars<'static>,
    /// The operator's ranges (`APP_API_ALLOWED_CIDRS`), for a runtime that records none of its own.
    operator_api_allowed_cidrs: Option<Vec<String>>,
}

impl Renderer {
    pub fn new() -> Result<Self> {
        let mut registry = Handlebars::new();
        // A misspelt or missing value fails the render instead of silently becoming an empty string.
        registry.set_strict_mode(true);
        registry.register_escape_fn(escape_hcl_string);
        registry
            .register_partial("worker_pools", WORKER_POOLS_PARTIAL)
            .map_err(|source| Error::Template { topology: "worker_pools", source: Box::new(source) })?;
        for (topology, source) in TEMPLATES {
            registry
                .register_template_string(topology.as_str(), source)
                .map_err(|source| Error::Template { topology: topology.as_str(), source: Box::new(source) })?;
        }
        Ok(Renderer { registry, operator_api_allowed_cidrs: None })
    }

    /// This renderer, rendering `cidrs` (the operator's `APP_API_ALLOWED_CIDRS`) as the ranges that may reach the
    /// API of a runtime that records none: one provisioned before runtimes recorded them, or by a replica of the
    /// previous release during a rolling update. A runtime's own list always wins.
    pub fn with_operator_api_allowed_cidrs(mut self, cidrs: Option<&[Ipv4Net]>) -> Self {
        self.operator_api_allowed_cidrs = cidrs.map(|cidrs| cidrs.iter().map(ToString::to_string).collect());
        self
    }

    /// The configuration of `action` for an operation of `operation_type` on `runtime`, requiring exactly `provider`
    /// (the pin of this release for a new cluster, the one its apply recorded for later runs); `run`: what this
    /// run does beyond the operation's type.
    pub fn render(
        &self,
        runtime: &Runtime,
        operation_type: OperationType,
        action: RunAction,
        provider: &ProviderVersion,
        run: RunInputs<'_>,
    ) -> Result<RenderedConfig> {
        let config = &runtime.cluster_config;
        let topology = config.topology;
        let cloud = topology.cloud();
        if !provider.is_exact() || provider.name() != ProviderVersion::pinned(cloud).name() {
            return Err(Error::Provider { provider: provider.clone(), cloud: cloud.as_str(), runtime_id: runtime.id });
        }
        let state_bucket = runtime.state_bucket.clone();
        let scaling = WorkerScaling::of(operation_type);
        let api_allowed_cidrs = (config.api_allowed_cidrs.as_deref())
            .or(self.operator_api_allowed_cidrs.as_deref())
            .ok_or(Error::NoApiAllowedCidrs { runtime_id: runtime.id })?;
        let data = TemplateData::new(runtime, &state_bucket, provider, scaling, api_allowed_cidrs)?;
        let main_tf = self
            .registry
            .render(topology.as_str(), &data)
            .map_err(|source| Error::Render { topology: topology.as_str(), source })?;

        let manifest = RunnerManifest {
            action,
            topology,
            cloud,
            region: config.region.clone(),
            state_bucket: state_bucket.clone(),
            runtime_id: runtime.id,
            runtime_name: runtime.name.clone(),
            gcp_project: data.project_id.map(str::to_owned),
            ssm_parameter_prefix: data.ssm_parameter_prefix.clone(),
            provider: provider.clone(),
            // Only vanilla's control plane sleeps; the managed ones keep answering.
            wait_for_api_server: scaling == WorkerScaling::Minimum && topology == Topology::VanillaKubeadm,
            plan_from_empty_state: operation_type == OperationType::Provision && action == RunAction::Plan,
            control_plane_upgrade: data
                .control_plane
                .as_ref()
                .filter(|_| operation_type == OperationType::Upgrade)
                .map(|control_plane| ControlPlaneUpgrade {
                    machines: "module.compute.aws_instance.control_plane".to_owned(),
                    machine_type: control_plane.machine_type.to_owned(),
                    resource: "module.compute.aws_ssm_parameter.upgrade_target".to_owned(),
                    last_node: control_plane.count.saturating_sub(1).unsigned_abs(),
                    version: config.kubernetes_version.clone(),
                }),
            certificate_renewal: (run.certificate_renewal)
                .zip(data.control_plane.as_ref())
                .filter(|_| operation_type == OperationType::RenewCertificates)
                .map(|(request, control_plane)| CertificateRenewal {
                    request: request.to_owned(),
                    last_node: control_plane.count.saturating_sub(1).unsigned_abs(),
                }),
            approval_policy: runtime.approval_policy,
            approved_plan_sha256: run.approved_plan.map(str::to_owned),
            // Runs that change the cluster's configuration make the binding what it says, if it names
            // administrators at all (`[]`: none any more); the others, and a runtime that never named any, leave it.
            administrators: config
                .kubernetes
                .as_ref()
                .and_then(|access| access.administrators.clone())
                .filter(|_| matches!(operation_type, OperationType::Provision | OperationType::Upgrade)),
        };
        let mut runner_json = serde_json::to_string_pretty(&manifest)?;
        runner_json.push('\n');

        let files =
            BTreeMap::from([(MAIN_TF_FILE.to_owned(), main_tf), (RUNNER_MANIFEST_FILE.to_owned(), runner_json)]);
        let size = files.iter().map(|(name, content)| name.len() + content.len()).sum();
        if size > MAX_RENDERED_BYTES {
            return Err(Error::TooLarge { size, limit: MAX_RENDERED_BYTES });
        }
        Ok(RenderedConfig { files })
    }
}

/// What a run does beyond its operation's type.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunInputs<'a> {
    /// The digest of the saved plan a caller approved, which the run applies instead of planning.
    pub approved_plan: Option<&'a str>,
    /// A vanilla upgrade that renews the control plane's certificates: the request's name (the operation's id).
    pub certificate_renewal: Option<&'a str>,
}

/// What the templates see. Strings are only ever placed between quotes (and escaped there); everything a
/// template writes unquoted is a number or a boolean here, so it cannot carry HCL syntax. Sections a topology
/// does not have are left out, so strict mode fails a template that uses them.
#[derive(Serialize)]
struct TemplateData<'a> {
    /// The exact version `required_providers` pins.
    provider_version: &'a str,
    /// Where the modules are, relative to the configuration's folder.
    modules: &'static str,
    name: &'a str,
    description: &'a str,
    region: &'a str,
    kubernetes_version: &'a str,
    state_bucket: &'a str,
    zones: &'a [String],
    network: NetworkData<'a>,
    /// The IPv4 ranges that may reach the Kubernetes API from outside the cluster's network.
    api_allowed_cidrs: &'a [String],
    /// The run's sizing of every pool (and whether a vanilla control plane runs).
    scaling: WorkerScaling,
    pools: Vec<PoolData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    control_plane: Option<ControlPlaneData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ssm_parameter_prefix: Option<String>,
    /// vanilla_kubeadm: kube-apiserver's authentication configuration (JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    authentication_config: Option<String>,
    /// EKS: its OIDC identity provider; null without one (the template tests it).
    oidc: Option<EksIdentityProvider>,
    #[serde(skip_serializing_if = "Option::is_none")]
    project_id: Option<&'a str>,
    /// AWS resource tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<MapEntry>>,
    /// GCP resource labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<Vec<MapEntry>>,
}

/// One entry of an HCL map, with the spaces after its key that align the `=` signs the way `terraform fmt` does.
#[derive(Serialize)]
struct MapEntry {
    key: String,
    value: String,
    padding: String,
}

impl MapEntry {
    fn aligned(map: BTreeMap<String, String>) -> Vec<MapEntry> {
        // Width as written, after escaping; counting chars is exact for the ASCII that valid labels are made of.
        let width = |key: &str| escape_hcl_string(key).chars().count();
        let widest = map.keys().map(|key| width(key)).max().unwrap_or_default();
        map.into_iter().map(|(key, value)| MapEntry { padding: " ".repeat(widest - width(&key)), key, value }).collect()
    }
}

#[derive(Serialize)]
struct NetworkData<'a> {
    vpc_cidr: &'a str,
    pod_cidr: &'a str,
    service_cidr: &'a str,
}

/// How a run sizes the workers (the modules' `worker_scaling`). The configuration keeps the sizes; only a
/// hibernation takes the workers (and a vanilla control plane) away, and the wake-up brings back the minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum WorkerScaling {
    /// A new cluster: its workers start at the minimum (a destroy renders this too; it sizes nothing).
    Initial,
    /// A change of a running cluster: the count the cluster autoscaler chose stays (within the new bounds).
    KeepCurrent,
    /// Hibernated: no workers, and a vanilla control plane stopped.
    Zero,
    /// Woken up: a vanilla control plane started again, the workers at the minimum.
    Minimum,
}

impl WorkerScaling {
    fn of(operation_type: OperationType) -> Self {
        match operation_type {
            OperationType::Provision | OperationType::Deprovision => WorkerScaling::Initial,
            OperationType::Upgrade | OperationType::RenewCertificates => WorkerScaling::KeepCurrent,
            OperationType::Hibernate => WorkerScaling::Zero,
            OperationType::WakeUp => WorkerScaling::Minimum,
        }
    }
}

#[derive(Serialize)]
struct ControlPlaneData<'a> {
    count: i32,
    machine_type: &'a str,
    load_balancer: bool,
}

impl<'a> TemplateData<'a> {
    fn new(
        runtime: &'a Runtime,
        state_bucket: &'a str,
        provider: &'a ProviderVersion,
        scaling: WorkerScaling,
        api_allowed_cidrs: &'a [String],
    ) -> Result<Self> {
        let config = &runtime.cluster_config;
        let topology = config.topology;
        let missing = |section| Error::MissingSection { topology: topology.as_str(), section, runtime_id: runtime.id };
        let network = match &config.network {
            Some(network) => NetworkData {
                vpc_cidr: &network.vpc_cidr,
                pod_cidr: &network.pod_cidr,
                service_cidr: &network.service_cidr,
            },
            None => NetworkData {
                vpc_cidr: DEFAULT_VPC_CIDR,
                pod_cidr: DEFAULT_POD_CIDR,
                service_cidr: DEFAULT_SERVICE_CIDR,
            },
        };

        let mut data = TemplateData {
            provider_version: &provider.version,
            modules: runner_contract::environment::mount::MODULES_FROM_WORK_DIR,
            name: &runtime.name,
            description: runtime.description.as_deref().unwrap_or_default(),
            region: &config.region,
            kubernetes_version: &config.kubernetes_version,
            state_bucket,
            zones: &[],
            network,
            api_allowed_cidrs,
            scaling,
            pools: PoolData::of(config.pools()),
            control_plane: None,
            ssm_parameter_prefix: None,
            authentication_config: None,
            oidc: None,
            project_id: None,
            tags: None,
            labels: None,
        };
        match topology {
            Topology::VanillaKubeadm | Topology::Eks => {
                data.zones = &config.aws.as_ref().ok_or_else(|| missing("aws"))?.zones;
                data.tags = Some(MapEntry::aligned(aws_tags(runtime)));
                data.oidc = EksIdentityProvider::of(config.kubernetes.as_ref()).filter(|_| topology == Topology::Eks);
            }
            Topology::Gke => {
                let gcp = config.gcp.as_ref().ok_or_else(|| missing("gcp"))?;
                data.zones = &gcp.zones;
                data.project_id = Some(&gcp.project_id);
                data.labels = Some(MapEntry::aligned(gcp_labels(runtime)));
            }
        }
        if topology == Topology::VanillaKubeadm {
            let control_plane = config.control_plane.as_ref().ok_or_else(|| missing("controlPlane"))?;
            data.control_plane = Some(ControlPlaneData {
                count: control_plane.count,
                machine_type: &control_plane.machine_type,
                load_balancer: control_plane.count > 1,
            });
            data.ssm_parameter_prefix = Some(format!("/kubeopera/{}/", runtime.id));
            data.authentication_config = Some(access::authentication_config(config.kubernetes.as_ref()));
        }
        Ok(data)
    }
}

/// The user's labels plus the runtime's identity. The identity goes in last so that a user label cannot pass
/// itself off as another runtime's.
fn aws_tags(runtime: &Runtime) -> BTreeMap<String, String> {
    let mut tags = runtime.labels.0.clone();
    tags.insert(runner_contract::failure::RUNTIME_ID_TAG.to_owned(), runtime.id.to_string());
    tags.insert("kubeopera.io/runtime-name".to_owned(), runtime.name.clone());
    tags
}

/// Like [`aws_tags`], mapped onto GCP's label rules, which reject most Kubernetes label keys
/// (`app.kubernetes.io/name`) and capital letters: at most 63 lowercase letters, digits, `_` and `-`, and keys
/// start with a letter.
fn gcp_labels(runtime: &Runtime) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> =
        runtime.labels.0.iter().map(|(key, value)| (gcp_label_key(key), gcp_label_text(value))).collect();
    labels.insert(runner_contract::failure::RUNTIME_ID_LABEL.to_owned(), runtime.id.to_string());
    labels.insert("kubeopera-runtime-name".to_owned(), gcp_label_text(&runtime.name));
    labels
}

fn gcp_label_text(value: &str) -> String {
    value
        .chars()
        .map(|character| match character.to_ascii_lowercase() {
            allowed @ ('a'..='z' | '0'..='9' | '_' | '-') => allowed,
            _ => '_',
        })
        .take(63)
        .collect()
}

fn gcp_label_key(key: &str) -> String {
    let key = gcp_label_text(key);
    if key.starts_with(|character: char| character.is_ascii_lowercase()) {
        key
    } else {
        gcp_label_text(&format!("k_{key}"))
    }
}

#[cfg(test)]
mod tests;
