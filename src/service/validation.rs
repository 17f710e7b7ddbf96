//! Validation of provisioning and upgrade requests, shared by both APIs. Every rejection names the field it is
//! about, as a path into `ProvisionRuntimeInput` (for example `clusterConfig.workerPool.minSize`), and a request
//! is checked whole: every invalid field is reported at once.

use ipnet::Ipv4Net;
use serde_json::Value;

use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::domain::{ClusterConfig, Labels, OperationId, ProvisionRequest, RuntimeId, Topology, UpgradeClusterInput};

/// The longest runtime name: the name ends up in cloud resource names with tighter limits than Kubernetes
/// (an AWS load balancer name is at most 32 characters, and the state bucket
/// `kubeopera-state-<environment>-<name>-<8 hex>` must stay within 63).
pub const MAX_NAME_LEN: usize = 24;
/// The longest environment name, for the same bucket name limit.
pub const MAX_ENVIRONMENT_LEN: usize = 12;
const MAX_DESCRIPTION_LEN: usize = 1024;
const MAX_LABELS: usize = 64;
const MAX_WORKERS: i32 = 500;
const MIN_DISK_GB: i32 = 20;
const MAX_DISK_GB: i32 = 16384;
const CONTROL_PLANE_COUNTS: [i32; 3] = [1, 3, 5];

/// A rejected input: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

impl Invalid {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid { field: field.into(), message: message.into() }
    }
}

/// Everything wrong with a request, in the order the fields are checked; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub first: Invalid,
    pub more: Vec<Invalid>,
}

impl Rejected {
    pub fn all(&self) -> impl Iterator<Item = &Invalid> {
        std::iter::once(&self.first).chain(&self.more)
    }
}

impl From<Invalid> for Rejected {
    fn from(first: Invalid) -> Self {
        Rejected { first, more: Vec::new() }
    }
}

type Check = Result<(), Invalid>;

/// Collects the problems of one request.
#[derive(Default)]
struct Findings(Vec<Invalid>);

impl Findings {
    /// Records the check's problem, if any; true when it passed.
    fn check(&mut self, result: Check) -> bool {
        match result {
            Ok(()) => true,
            Err(invalid) => {
                self.0.push(invalid);
                false
            }
        }
    }

    fn into_result(self) -> Result<(), Rejected> {
        let mut problems = self.0.into_iter();
        match problems.next() {
            None => Ok(()),
            Some(first) => Err(Rejected { first, more: problems.collect() }),
        }
    }
}

/// What an upgrade may change of the worker pool; the other fields of a cluster are fixed when it is provisioned.
const WORKER_POOL_FIELDS: [&str; 4] = ["machineType", "minSize", "maxSize", "diskSizeGb"];
/// Fields of `clusterConfig` (and the runtime's name) an upgrade names to be told they cannot change.
const FIXED_FIELDS: [&str; 9] =
    ["topology", "credentialId", "region", "environment", "network", "aws", "gcp", "name", "runtimeInput"];

impl ValidationPolicy {
    pub fn validate(&self, request: &ProvisionRequest) -> Result<(), Rejected> {
        let mut findings = Findings::default();
        let runtime = &request.runtime_input;
        findings.check(check_dns_label("runtimeInput.name", &runtime.name, MAX_NAME_LEN));
        if let Some(description) = &runtime.description {
            findings.check(check_text("runtimeInput.description", description, MAX_DESCRIPTION_LEN));
        }
        if let Some(labels) = &runtime.labels {
            findings.check(check_labels("runtimeInput.labels", labels));
        }
        self.check_cluster_config(&request.cluster_config, &mut findings);
        findings.into_result()
    }

    /// The configuration `upgrade` makes of `current`, checked by the provisioning's rules plus the upgrade's
    /// own: Kubernetes versions go up one minor at a time, and the control plane's machine type only changes
    /// where there are control-plane nodes. An upgrade that changes nothing is `Ok(None)`.
    pub fn validate_upgrade(
        &self,
        current: &ClusterConfig,
        upgrade: &UpgradeClusterInput,
    ) -> Result<Option<ClusterConfig>, Rejected> {
        let mut findings = Findings::default();
        if upgrade.control_plane.is_some() && current.control_plane.is_none() {
            findings.check(Err(Invalid::new(
                "clusterConfig.controlPlane",
                format!(
                    "cannot be changed for topology {}: its control plane is managed by the cloud",
                    current.topology.as_str()
                ),
            )));
        }
        let target = current.upgraded(upgrade);
        if let Some(version) = &upgrade.kubernetes_version {
            findings.check(check_version_step(&current.kubernetes_version, version));
        }
        self.check_cluster_config(&target, &mut findings);
        findings.into_result()?;
        Ok((target != *current).then_some(target))
    }

    fn check_cluster_config(&self, config: &ClusterConfig, findings: &mut Findings) {
        findings.check(check_credential_id(&config.credential_id));
        findings.check(check_environment(&config.environment));
        findings.check(self.check_kubernetes_version(&config.kubernetes_version));
        let region_valid = findings.check(check_region(config.topology, &config.region));
        check_topology_sections(config, region_valid, findings);

        if let Some(control_plane) = &config.control_plane {
            if !CONTROL_PLANE_COUNTS.contains(&control_plane.count) {
                findings.check(Err(Invalid::new(
                    "clusterConfig.controlPlane.count",
                    format!("must be 1, 3 or 5 (an odd number keeps etcd quorum), got {}", control_plane.count),
                )));
            }
            findings.check(check_machine_type("clusterConfig.controlPlane.machineType", &control_plane.machine_type));
        }

        let workers = &config.worker_pool;
        findings.check(check_machine_type("clusterConfig.workerPool.machineType", &workers.machine_type));
        let min_valid = (0..=MAX_WORKERS).contains(&workers.min_size);
        if !min_valid {
            findings.check(Err(Invalid::new(
                "clusterConfig.workerPool.minSize",
                format!("must be between 0 and {MAX_WORKERS}, got {}", workers.min_size),
            )));
        }
        let max_valid = (1..=MAX_WORKERS).contains(&workers.max_size);
        if !max_valid {
            findings.check(Err(Invalid::new(
                "clusterConfig.workerPool.maxSize",
                format!("must be between 1 and {MAX_WORKERS}, got {}", workers.max_size),
            )));
        }
        if min_valid && max_valid && workers.min_size > workers.max_size {
            findings.check(Err(Invalid::new(
                "clusterConfig.workerPool.minSize",
                format!("must not exceed maxSize ({} > {})", workers.min_size, workers.max_size),
            )));
        }
        if !(MIN_DISK_GB..=MAX_DISK_GB).contains(&workers.disk_size_gb) {
            findings.check(Err(Invalid::new(
                "clusterConfig.workerPool.diskSizeGb",
                format!("must be between {MIN_DISK_GB} and {MAX_DISK_GB}, got {}", workers.disk_size_gb),
            )));
        }

        if let Some(network) = &config.network {
            let mut parse =
                |field, value| parse_cidr(field, value).map_err(|invalid| findings.check(Err(invalid))).ok();
            let vpc = parse("clusterConfig.network.vpcCidr", &network.vpc_cidr);
            let pods = parse("clusterConfig.network.podCidr", &network.pod_cidr);
            let services = parse("clusterConfig.network.serviceCidr", &network.service_cidr);
            if let (Some(pods), Some(vpc)) = (pods, vpc) {
                findings.check(check_disjoint("clusterConfig.network.podCidr", pods, "vpcCidr", vpc));
            }
            if let (Some(services), Some(vpc)) = (services, vpc) {
                findings.check(check_disjoint("clusterConfig.network.serviceCidr", services, "vpcCidr", vpc));
            }
            if let (Some(services), Some(pods)) = (services, pods) {
                findings.check(check_disjoint("clusterConfig.network.serviceCidr", services, "podCidr", pods));
            }
        }
    }

    fn check_kubernetes_version(&self, value: &str) -> Check {
        let field = "clusterConfig.kubernetesVersion";
        let version: KubernetesVersion = value.parse().map_err(|message: String| Invalid::new(field, message))?;
        if version < self.min_kubernetes_version || version > self.max_kubernetes_version {
            return Err(Invalid::new(
                field,
                format!(
                    "{version} is outside the supported window {} to {}",
                    self.min_kubernetes_version, self.max_kubernetes_version
                ),
            ));
        }
        Ok(())
    }
}

/// EKS, GKE and kubeadm all upgrade one minor version at a time, and none goes back.
fn check_version_step(current: &str, requested: &str) -> Check {
    let field = "clusterConfig.kubernetesVersion";
    // An unparsable request is reported by the window check; an unparsable stored version cannot be compared.
    let (Ok(from), Ok(to)) = (current.parse::<KubernetesVersion>(), requested.parse::<KubernetesVersion>()) else {
        return Ok(());
    };
    if to < from {
        return Err(Invalid::new(field, format!("{to} is older than the cluster's {from}: versions only go up")));
    }
    if to.major != from.major || to.minor > from.minor + 1 {
        let next = KubernetesVersion { minor: from.minor + 1, ..from };
        return Err(Invalid::new(
            field,
            format!("{to} skips a minor version: the cluster runs {from}, so the next upgrade is to {next}"),
        ));
    }
    Ok(())
}

/// Reads the body of an upgrade (REST's PATCH: the changeable part of `clusterConfig`, JSON merge semantics),
/// naming every field it may not contain: fixed ones get told so, unknown ones too, and `null` (which would
/// remove a field in a merge patch) is refused since every changeable field is required.
pub fn upgrade_from_json(body: &Value) -> Result<UpgradeClusterInput, Rejected> {
    let Some(fields) = body.as_object() else {
        return Err(Invalid::new("clusterConfig", "must be a JSON object").into());
    };
    let mut findings = Findings::default();
    for (key, value) in fields {
        let field = format!("clusterConfig.{key}");
        let allowed: &[&str] = match key.as_str() {
            "workerPool" => &WORKER_POOL_FIELDS,
            "controlPlane" => &["machineType"],
            "kubernetesVersion" => &[],
            fixed if FIXED_FIELDS.contains(&fixed) => {
                findings.check(Err(Invalid::new(field, fixed_message())));
                continue;
            }
            _ => {
                findings.check(Err(Invalid::new(field, format!("unknown field; {}", fixed_message()))));
                continue;
            }
        };
        if value.is_null() {
            findings.check(Err(Invalid::new(field, "must not be null: leave it out to keep it as it is")));
            continue;
        }
        let Some(inner) = value.as_object().filter(|_| !allowed.is_empty()) else { continue };
        for (inner_key, inner_value) in inner {
            let field = format!("{field}.{inner_key}");
            if !allowed.contains(&inner_key.as_str()) {
                let message = match (key.as_str(), inner_key.as_str()) {
                    ("controlPlane", "count") => fixed_message().to_owned(),
                    _ => format!("unknown field; {}", fixed_message()),
                };
                findings.check(Err(Invalid::new(field, message)));
            } else if inner_value.is_null() {
                findings.check(Err(Invalid::new(field, "must not be null: leave it out to keep it as it is")));
            }
        }
    }
    findings.into_result()?;
    serde_path_to_error::deserialize(body.clone()).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." { "clusterConfig".to_owned() } else { format!("clusterConfig.{path}") };
        Rejected::from(Invalid::new(field, error.inner().to_string()))
    })
}

fn fixed_message() -> &'static str {
    "only kubernetesVersion, workerPool.machineType, workerPool.minSize, workerPool.maxSize, workerPool.diskSizeGb \
     and controlPlane.machineType can change after provisioning"
}

fn check_credential_id(value: &str) -> Check {
    check_text("clusterConfig.credentialId", value, 255)?;
    if value.trim().is_empty() {
        return Err(Invalid::new("clusterConfig.credentialId", "must not be empty"));
    }
    Ok(())
}

/// Each topology needs its own cloud section and no other; vanilla_kubeadm alone has control-plane nodes. Zones
/// are checked against the region only when the region is valid.
fn check_topology_sections(config: &ClusterConfig, region_valid: bool, findings: &mut Findings) {
    let topology = config.topology.as_str();
    match config.topology {
        Topology::VanillaKubeadm | Topology::Eks => {
            if config.gcp.is_some() {
                findings
                    .check(Err(Invalid::new("clusterConfig.gcp", format!("must be absent for topology {topology}"))));
            }
            match &config.aws {
                None => {
                    findings
                        .check(Err(Invalid::new("clusterConfig.aws", format!("is required for topology {topology}"))));
                }
                Some(aws) if region_valid => {
                    findings.check(check_zones(
                        "clusterConfig.aws.zones",
                        &config.region,
                        &aws.zones,
                        is_aws_zone_suffix,
                    ));
                }
                Some(_) => {}
            }
        }
        Topology::Gke => {
            if config.aws.is_some() {
                findings.check(Err(Invalid::new("clusterConfig.aws", "must be absent for topology gke")));
            }
            match &config.gcp {
                None => {
                    findings.check(Err(Invalid::new("clusterConfig.gcp", "is required for topology gke")));
                }
                Some(gcp) => {
                    findings.check(check_gcp_project("clusterConfig.gcp.projectId", &gcp.project_id));
                    if region_valid {
                        findings.check(check_zones(
                            "clusterConfig.gcp.zones",
                            &config.region,
                            &gcp.zones,
                            is_gcp_zone_suffix,
                        ));
                    }
                }
            }
        }
    }
    let control_plane = match (config.topology, &config.control_plane) {
        (Topology::VanillaKubeadm, None) => {
            Err(Invalid::new("clusterConfig.controlPlane", "is required for topology vanilla_kubeadm"))
        }
        (Topology::Eks | Topology::Gke, Some(_)) => Err(Invalid::new(
            "clusterConfig.controlPlane",
            format!("must be absent for topology {topology}: its control plane is managed by the cloud"),
        )),
        _ => Ok(()),
    };
    findings.check(control_plane);
}

fn check_dns_label(field: &str, value: &str, max_len: usize) -> Check {
    if value.is_empty() || value.len() > max_len {
        return Err(Invalid::new(field, format!("must be 1 to {max_len} characters long")));
    }
    let valid_chars = value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    let starts_with_letter = value.as_bytes()[0].is_ascii_lowercase();
    let ends_alphanumeric = value.as_bytes()[value.len() - 1] != b'-';
    if !(valid_chars && starts_with_letter && ends_alphanumeric) {
        return Err(Invalid::new(
            field,
            "must be a DNS-1123 label: lowercase letters, digits and '-', starting with a letter and ending with a \
             letter or digit",
        ));
    }
    Ok(())
}

/// Letters and digits only: the state bucket joins environment and name with `-`, so a hyphen in the
/// environment could make two clusters share a bucket (`dev-a` + `b` and `dev` + `a-b`).
fn check_environment(value: &str) -> Check {
    let valid = !value.is_empty()
        && value.len() <= MAX_ENVIRONMENT_LEN
        && value.as_bytes()[0].is_ascii_lowercase()
        && value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit());
    if !valid {
        return Err(Invalid::new(
            "clusterConfig.environment",
            format!("must be 1 to {MAX_ENVIRONMENT_LEN} lowercase letters and digits, starting with a letter"),
        ));
    }
    Ok(())
}

fn check_text(field: &str, value: &str, max_len: usize) -> Check {
    if value.chars().count() > max_len {
        return Err(Invalid::new(field, format!("must be at most {max_len} characters long")));
    }
    if value.chars().any(|character| character.is_control() && character != '\n') {
        return Err(Invalid::new(field, "must not contain control characters"));
    }
    Ok(())
}

fn check_machine_type(field: &str, value: &str) -> Check {
    let valid = !value.is_empty()
        && value.len() <= 64
        && value.as_bytes()[0].is_ascii_alphanumeric()
        && value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-._".contains(&byte));
    if !valid {
        return Err(Invalid::new(field, format!("{value:?} is not a machine type such as t3.large or e2-standard-4")));
    }
    Ok(())
}

fn check_region(topology: Topology, region: &str) -> Check {
    let field = "clusterConfig.region";
    let valid = match topology {
        Topology::VanillaKubeadm | Topology::Eks => is_aws_region(region),
        Topology::Gke => is_gcp_region(region),
    };
    if !valid {
        let example = match topology {
            Topology::VanillaKubeadm | Topology::Eks => "eu-central-1",
            Topology::Gke => "europe-west3",
        };
        return Err(Invalid::new(
            field,
            format!("{region:?} is not a region of {} (for example {example})", topology.cloud().as_str()),
        ));
    }
    Ok(())
}

fn is_lowercase_word(part: &str) -> bool {
    !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_lowercase())
}

/// `us-east-1`, `eu-central-2`, `us-gov-west-1`.
fn is_aws_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    let (Some(number), words) = (parts.last(), &parts[..parts.len().saturating_sub(1)]) else {
        return false;
    };
    (2..=3).contains(&words.len())
        && words[0].len() == 2
        && words.iter().all(|word| is_lowercase_word(word))
        && !number.is_empty()
        && number.len() <= 2
        && number.bytes().all(|byte| byte.is_ascii_digit())
}

/// `europe-west3`, `us-central1`, `northamerica-northeast2`.
fn is_gcp_region(region: &str) -> bool {
    let Some((area, rest)) = region.split_once('-') else {
        return false;
    };
    let letters = rest.trim_end_matches(|character: char| character.is_ascii_digit());
    is_lowercase_word(area)
        && is_lowercase_word(letters)
        && letters.len() < rest.len()
        && rest.len() - letters.len() <= 2
}

fn is_aws_zone_suffix(suffix: &str) -> bool {
    suffix.len() == 1 && is_lowercase_word(suffix)
}

fn is_gcp_zone_suffix(suffix: &str) -> bool {
    suffix.len() == 2 && suffix.starts_with('-') && is_lowercase_word(&suffix[1..])
}

/// Zones are the region followed by the cloud's zone suffix (`eu-central-1a`, `europe-west3-b`).
fn check_zones(field: &str, region: &str, zones: &[String], valid_suffix: fn(&str) -> bool) -> Check {
    if zones.is_empty() || zones.len() > 6 {
        return Err(Invalid::new(field, "must list 1 to 6 zones"));
    }
    for (index, zone) in zones.iter().enumerate() {
        let in_region = zone.strip_prefix(region).is_some_and(valid_suffix);
        if !in_region {
            return Err(Invalid::new(
                format!("{field}[{index}]"),
                format!("{zone:?} is not a zone of region {region}"),
            ));
        }
        if zones[..index].contains(zone) {
            return Err(Invalid::new(format!("{field}[{index}]"), format!("{zone:?} is listed twice")));
        }
    }
    Ok(())
}

/// GCP project ids: 6 to 30 characters, lowercase letters, digits and hyphens, starting with a letter.
fn check_gcp_project(field: &str, value: &str) -> Check {
    let valid = (6..=30).contains(&value.len())
        && value.as_bytes()[0].is_ascii_lowercase()
        && !value.ends_with('-')
        && value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    if !valid {
        return Err(Invalid::new(field, format!("{value:?} is not a GCP project id")));
    }
    Ok(())
}

fn parse_cidr(field: &str, value: &str) -> Result<Ipv4Net, Invalid> {
    let network: Ipv4Net =
        value.parse().map_err(|_| Invalid::new(field, format!("{value:?} is not an IPv4 CIDR such as 10.0.0.0/16")))?;
    if network.trunc() != network {
        return Err(Invalid::new(field, format!("{value:?} has host bits set; did you mean {}?", network.trunc())));
    }
    if !(8..=28).contains(&network.prefix_len()) {
        return Err(Invalid::new(field, format!("{value:?} must have a prefix length between 8 and 28")));
    }
    Ok(network)
}

fn check_disjoint(field: &str, network: Ipv4Net, other_name: &str, other: Ipv4Net) -> Check {
    if network.contains(&other.network()) || other.contains(&network.network()) {
        return Err(Invalid::new(field, format!("{network} overlaps {other_name} {other}")));
    }
    Ok(())
}

/// Kubernetes label rules: an optional DNS-subdomain prefix and a name of at most 63 characters; values of at
/// most 63 characters from the same alphabet.
/// A `key=value` filter of the runtime list: the key and the value follow the label rules.
pub fn parse_label_filter(field: &str, filter: &str) -> Result<(String, String), Invalid> {
    let (key, value) =
        filter.split_once('=').ok_or_else(|| Invalid::new(field, format!("{filter:?} is not key=value")))?;
    let labels = Labels([(key.to_owned(), value.to_owned())].into());
    check_labels(field, &labels).map_err(|invalid| Invalid { field: field.to_owned(), ..invalid })?;
    Ok((key.to_owned(), value.to_owned()))
}

fn check_labels(field: &str, labels: &Labels) -> Check {
    if labels.0.len() > MAX_LABELS {
        return Err(Invalid::new(field, format!("at most {MAX_LABELS} labels are allowed")));
    }
    for (key, value) in &labels.0 {
        let (prefix, name) = match key.split_once('/') {
            Some((prefix, name)) => (Some(prefix), name),
            None => (None, key.as_str()),
        };
        let key_field = format!("{field}.{key}");
        if let Some(prefix) = prefix {
            let valid_prefix = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(|part| check_dns_label(&key_field, part, 63).is_ok());
            if !valid_prefix {
                return Err(Invalid::new(key_field, "the key prefix must be a DNS subdomain"));
            }
        }
        if name.is_empty() || !is_label_value(name) {
            return Err(Invalid::new(
                key_field,
                "the key name must be 1 to 63 characters of letters, digits, '-', '_' or '.', starting and ending \
                 with a letter or digit",
            ));
        }
        if !value.is_empty() && !is_label_value(value) {
            return Err(Invalid::new(
                key_field,
                "the value must be at most 63 characters of letters, digits, '-', '_' or '.', starting and ending \
                 with a letter or digit",
            ));
        }
    }
    Ok(())
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.iter().all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(byte))
}

/// Checks a string id argument and names the field when it is not a UUID.
pub fn parse_id(field: &str, value: &str) -> Result<uuid::Uuid, Invalid> {
    uuid::Uuid::parse_str(value).map_err(|_| Invalid::new(field, format!("{value:?} is not a UUID")))
}

/// A runtime id as a request names it in `field`.
pub fn parse_runtime_id(field: &str, value: &str) -> Result<RuntimeId, Invalid> {
    parse_id(field, value).map(RuntimeId)
}

/// An operation id as a request names it in `field`.
pub fn parse_operation_id(field: &str, value: &str) -> Result<OperationId, Invalid> {
    parse_id(field, value).map(OperationId)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AwsConfig, ControlPlane, ControlPlaneUpgrade, Network, WorkerPoolUpgrade};

    fn policy() -> ValidationPolicy {
        ValidationPolicy::DEFAULT
    }

    fn vanilla() -> ProvisionRequest {
        ProvisionRequest::example(Topology::VanillaKubeadm)
    }

    fn gke() -> ProvisionRequest {
        ProvisionRequest::example(Topology::Gke)
    }

    fn rejected_field(request: &ProvisionRequest) -> String {
        policy().validate(request).expect_err("request should be rejected").first.field
    }

    #[test]
    fn valid_requests_pass() {
        assert_eq!(policy().validate(&vanilla()), Ok(()));
        assert_eq!(policy().validate(&gke()), Ok(()));
        let mut eks = vanilla();
        eks.cluster_config.topology = Topology::Eks;
        eks.cluster_config.control_plane = None;
        eks.cluster_config.network = None;
        assert_eq!(policy().validate(&eks), Ok(()));
    }

    #[test]
    fn names_must_be_short_dns_labels() {
        for bad in ["", "Team", "-team", "team-", "team_a", "a234567890123456789012345", "tëam"] {
            let mut request = vanilla();
            request.runtime_input.name = bad.into();
            assert_eq!(rejected_field(&request), "runtimeInput.name", "{bad:?}");
        }
        let mut request = vanilla();
        request.runtime_input.name = "a23456789012345678901234".into();
        assert_eq!(policy().validate(&request), Ok(()));
    }

    #[test]
    fn environments_are_short_and_without_hyphens() {
        for bad in ["", "dev-a", "Dev", "1dev", "development12", "dev_a"] {
            let mut request = vanilla();
            request.cluster_config.environment = bad.into();
            assert_eq!(rejected_field(&request), "clusterConfig.environment", "{bad:?}");
        }
        let mut request = vanilla();
        request.cluster_config.environment = "prod2".into();
        assert_eq!(policy().validate(&request), Ok(()));
    }

    #[test]
    fn control_plane_count_is_odd_and_small() {
        for count in [0, 2, 4, 7] {
            let mut request = vanilla();
            request.cluster_config.control_plane.as_mut().unwrap().count = count;
            assert_eq!(rejected_field(&request), "clusterConfig.controlPlane.count");
        }
    }

    #[test]
    fn managed_topologies_refuse_a_control_plane_and_vanilla_needs_one() {
        let mut request = gke();
        request.cluster_config.control_plane = Some(ControlPlane { count: 1, machine_type: "e2-standard-4".into() });
        assert_eq!(rejected_field(&request), "clusterConfig.controlPlane");
        let mut request = vanilla();
        request.cluster_config.control_plane = None;
        assert_eq!(rejected_field(&request), "clusterConfig.controlPlane");
    }

    #[test]
    fn worker_bounds() {
        let mut request = vanilla();
        request.cluster_config.worker_pool.min_size = 4;
        assert_eq!(rejected_field(&request), "clusterConfig.workerPool.minSize");
        request.cluster_config.worker_pool.min_size = -1;
        assert_eq!(rejected_field(&request), "clusterConfig.workerPool.minSize");
        let mut request = vanilla();
        request.cluster_config.worker_pool.max_size = 501;
        assert_eq!(rejected_field(&request), "clusterConfig.workerPool.maxSize");
        let mut request = vanilla();
        request.cluster_config.worker_pool.disk_size_gb = 10;
        assert_eq!(rejected_field(&request), "clusterConfig.workerPool.diskSizeGb");
    }

    #[test]
    fn kubernetes_version_must_be_in_the_window() {
        for bad in ["1.31", "1.38", "1", "1.x", "v1.34", "1.34.2", ""] {
            let mut request = vanilla();
            request.cluster_config.kubernetes_version = bad.into();
            assert_eq!(rejected_field(&request), "clusterConfig.kubernetesVersion", "{bad:?}");
        }
        for good in ["1.32", "1.37"] {
            let mut request = vanilla();
            request.cluster_config.kubernetes_version = good.into();
            assert_eq!(policy().validate(&request), Ok(()), "{good}");
        }
    }

    #[test]
    fn regions_and_zones_follow_the_cloud() {
        for bad in ["eu-central", "europe-west3", "EU-central-1", "eu-central-1a", "e-central-1"] {
            let mut request = vanilla();
            request.cluster_config.region = bad.into();
            assert_eq!(rejected_field(&request), "clusterConfig.region", "{bad:?}");
        }
        let mut request = vanilla();
        request.cluster_config.region = "us-gov-west-1".into();
        request.cluster_config.aws = Some(AwsConfig { zones: vec!["us-gov-west-1a".into()] });
        assert_eq!(policy().validate(&request), Ok(()));

        let mut request = vanilla();
        request.cluster_config.aws.as_mut().unwrap().zones[1] = "us-east-1b".into();
        assert_eq!(rejected_field(&request), "clusterConfig.aws.zones[1]");
        let mut request = vanilla();
        request.cluster_config.aws.as_mut().unwrap().zones[1] = "eu-central-1a".into();
        assert_eq!(rejected_field(&request), "clusterConfig.aws.zones[1]");

        let mut request = gke();
        request.cluster_config.region = "eu-central-1".into();
        assert_eq!(rejected_field(&request), "clusterConfig.region");
        let mut request = gke();
        request.cluster_config.gcp.as_mut().unwrap().zones = vec!["europe-west3a".into()];
        assert_eq!(rejected_field(&request), "clusterConfig.gcp.zones[0]");
    }

    #[test]
    fn cloud_sections_match_the_topology() {
        let mut request = vanilla();
        request.cluster_config.aws = None;
        assert_eq!(rejected_field(&request), "clusterConfig.aws");
        let mut request = gke();
        request.cluster_config.gcp = None;
        assert_eq!(rejected_field(&request), "clusterConfig.gcp");
        let mut request = gke();
        request.cluster_config.gcp.as_mut().unwrap().project_id = "Bad_Project".into();
        assert_eq!(rejected_field(&request), "clusterConfig.gcp.projectId");
    }

    #[test]
    fn cidrs_parse_and_do_not_overlap() {
        let with_network = |vpc: &str, pods: &str, services: &str| {
            let mut request = vanilla();
            request.cluster_config.network =
                Some(Network { vpc_cidr: vpc.into(), pod_cidr: pods.into(), service_cidr: services.into() });
            request
        };
        assert_eq!(
            rejected_field(&with_network("10.0.0/16", "192.168.0.0/16", "10.96.0.0/12")),
            "clusterConfig.network.vpcCidr"
        );
        assert_eq!(
            rejected_field(&with_network("10.0.0.1/16", "192.168.0.0/16", "10.96.0.0/12")),
            "clusterConfig.network.vpcCidr"
        );
        assert_eq!(
            rejected_field(&with_network("10.0.0.0/16", "10.0.128.0/17", "10.96.0.0/12")),
            "clusterConfig.network.podCidr"
        );
        assert_eq!(
            rejected_field(&with_network("10.0.0.0/16", "192.168.0.0/16", "192.168.10.0/24")),
            "clusterConfig.network.serviceCidr"
        );
        let invalid =
            policy().validate(&with_network("10.0.0.0/8", "10.244.0.0/16", "172.16.0.0/16")).unwrap_err().first;
        assert_eq!(invalid.field, "clusterConfig.network.podCidr");
        assert!(invalid.message.contains("overlaps vpcCidr 10.0.0.0/8"), "{}", invalid.message);
    }

    #[test]
    fn labels_follow_kubernetes_rules() {
        let with_label = |key: &str, value: &str| {
            let mut request = vanilla();
            request.runtime_input.labels = Some(Labels([(key.to_owned(), value.to_owned())].into()));
            request
        };
        assert_eq!(policy().validate(&with_label("example.com/team", "a.b_c-d")), Ok(()));
        assert_eq!(policy().validate(&with_label("team", "")), Ok(()));
        assert_eq!(rejected_field(&with_label("-team", "a")), "runtimeInput.labels.-team");
        assert_eq!(rejected_field(&with_label("Example.com/team", "a")), "runtimeInput.labels.Example.com/team");
        assert_eq!(rejected_field(&with_label("team", &"x".repeat(64))), "runtimeInput.labels.team");
        assert_eq!(rejected_field(&with_label("team", "a\"}")), "runtimeInput.labels.team");
    }

    #[test]
    fn descriptions_are_bounded_and_free_of_control_characters() {
        let mut request = vanilla();
        request.runtime_input.description = Some("x".repeat(1025));
        assert_eq!(rejected_field(&request), "runtimeInput.description");
        request.runtime_input.description = Some("tab\there".into());
        assert_eq!(rejected_field(&request), "runtimeInput.description");
    }

    #[test]
    fn ids_must_be_uuids() {
        assert_eq!(parse_id("id", "nope").unwrap_err().field, "id");
        assert!(parse_id("id", "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10").is_ok());
    }

    #[test]
    fn every_invalid_field_is_reported_at_once() {
        let mut request = vanilla();
        request.runtime_input.name = "Bad Name".into();
        request.cluster_config.environment = "dev-a".into();
        request.cluster_config.worker_pool.min_size = -1;
        request.cluster_config.worker_pool.disk_size_gb = 1;
        request.cluster_config.network = Some(Network {
            vpc_cidr: "nope".into(),
            pod_cidr: "192.168.0.0/16".into(),
            service_cidr: "192.168.1.0/24".into(),
        });
        let rejected = policy().validate(&request).unwrap_err();
        let fields: Vec<&str> = rejected.all().map(|invalid| invalid.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "runtimeInput.name",
                "clusterConfig.environment",
                "clusterConfig.workerPool.minSize",
                "clusterConfig.workerPool.diskSizeGb",
                "clusterConfig.network.vpcCidr",
                // Overlaps are checked between the ranges that parsed.
                "clusterConfig.network.serviceCidr",
            ]
        );
        assert_eq!(rejected.first.field, "runtimeInput.name");
    }

    #[test]
    fn zones_are_not_judged_against_an_invalid_region() {
        let mut request = vanilla();
        request.cluster_config.region = "mars-1".into();
        let rejected = policy().validate(&request).unwrap_err();
        assert_eq!(rejected.all().map(|invalid| invalid.field.as_str()).collect::<Vec<_>>(), ["clusterConfig.region"]);
    }

    fn upgrade(version: Option<&str>, workers: Option<WorkerPoolUpgrade>) -> UpgradeClusterInput {
        UpgradeClusterInput {
            kubernetes_version: version.map(str::to_owned),
            worker_pool: workers,
            control_plane: None,
        }
    }

    fn eks() -> ProvisionRequest {
        ProvisionRequest::example(Topology::Eks)
    }

    #[test]
    fn upgrades_go_up_one_minor_version_at_a_time() {
        let current = eks().cluster_config;
        assert_eq!(current.kubernetes_version, "1.34");
        let target = policy().validate_upgrade(&current, &upgrade(Some("1.35"), None)).unwrap().unwrap();
        assert_eq!(target.kubernetes_version, "1.35");
        for (version, says) in
            [("1.33", "versions only go up"), ("1.36", "the next upgrade is to 1.35"), ("2.0", "skips")]
        {
            let rejected = policy().validate_upgrade(&current, &upgrade(Some(version), None)).unwrap_err();
            assert_eq!(rejected.first.field, "clusterConfig.kubernetesVersion", "{version}");
            assert!(rejected.first.message.contains(says), "{version}: {}", rejected.first.message);
        }
        // Beyond the supported window is refused by the provisioning's rule.
        let mut newest = current.clone();
        newest.kubernetes_version = "1.37".into();
        let rejected = policy().validate_upgrade(&newest, &upgrade(Some("1.38"), None)).unwrap_err();
        assert!(rejected.first.message.contains("outside the supported window"), "{}", rejected.first.message);
    }

    #[test]
    fn an_upgrade_that_changes_nothing_is_none() {
        let current = eks().cluster_config;
        assert_eq!(policy().validate_upgrade(&current, &UpgradeClusterInput::default()), Ok(None));
        let same = upgrade(
            Some(&current.kubernetes_version),
            Some(WorkerPoolUpgrade { max_size: Some(current.worker_pool.max_size), ..WorkerPoolUpgrade::default() }),
        );
        assert_eq!(policy().validate_upgrade(&current, &same), Ok(None));
    }

    #[test]
    fn an_upgraded_configuration_follows_the_provisioning_rules() {
        let current = eks().cluster_config;
        let shrink = WorkerPoolUpgrade { min_size: Some(5), max_size: Some(2), ..WorkerPoolUpgrade::default() };
        let rejected = policy().validate_upgrade(&current, &upgrade(None, Some(shrink))).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.workerPool.minSize");
        let bad = WorkerPoolUpgrade {
            machine_type: Some("Big One".into()),
            disk_size_gb: Some(5),
            ..WorkerPoolUpgrade::default()
        };
        let rejected = policy().validate_upgrade(&current, &upgrade(Some("1.40"), Some(bad))).unwrap_err();
        let fields: Vec<&str> = rejected.all().map(|invalid| invalid.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "clusterConfig.kubernetesVersion",
                "clusterConfig.kubernetesVersion",
                "clusterConfig.workerPool.machineType",
                "clusterConfig.workerPool.diskSizeGb"
            ]
        );
    }

    #[test]
    fn a_managed_control_plane_cannot_be_changed_and_a_vanilla_one_can() {
        let change = UpgradeClusterInput {
            control_plane: Some(ControlPlaneUpgrade { machine_type: Some("m6i.xlarge".into()) }),
            ..UpgradeClusterInput::default()
        };
        let rejected = policy().validate_upgrade(&gke().cluster_config, &change).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.controlPlane");
        assert!(rejected.first.message.contains("managed by the cloud"), "{}", rejected.first.message);

        let vanilla = vanilla().cluster_config;
        let target = policy().validate_upgrade(&vanilla, &change).unwrap().unwrap();
        assert_eq!(target.control_plane.unwrap().machine_type, "m6i.xlarge");
        let target = policy().validate_upgrade(&vanilla, &upgrade(Some("1.35"), None)).unwrap().unwrap();
        assert_eq!(target.kubernetes_version, "1.35");
        let workers = WorkerPoolUpgrade {
            max_size: Some(6),
            machine_type: Some("m6i.large".into()),
            ..WorkerPoolUpgrade::default()
        };
        let target = policy().validate_upgrade(&vanilla, &upgrade(None, Some(workers))).unwrap().unwrap();
        assert_eq!((target.worker_pool.max_size, target.worker_pool.machine_type.as_str()), (6, "m6i.large"));
    }

    #[test]
    fn an_upgrade_body_names_every_field_that_cannot_change() {
        let body = serde_json::json!({
            "kubernetesVersion": "1.35",
            "region": "eu-west-1",
            "topology": "gke",
            "network": null,
            "controlPlane": {"count": 3, "machineType": "m6i.large"},
            "workerPool": {"maxSize": 4, "spot": true, "minSize": null},
            "colour": "blue",
        });
        let rejected = upgrade_from_json(&body).unwrap_err();
        let fields: Vec<&str> = rejected.all().map(|invalid| invalid.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "clusterConfig.colour",
                "clusterConfig.controlPlane.count",
                "clusterConfig.network",
                "clusterConfig.region",
                "clusterConfig.topology",
                "clusterConfig.workerPool.minSize",
                "clusterConfig.workerPool.spot",
            ]
        );
        let messages: Vec<&str> = rejected.all().map(|invalid| invalid.message.as_str()).collect();
        assert!(messages[0].starts_with("unknown field"), "{}", messages[0]);
        assert!(messages[1].starts_with("only kubernetesVersion"), "{}", messages[1]);
        assert!(messages[5].contains("must not be null"), "{}", messages[5]);

        let body = serde_json::json!({"kubernetesVersion": "1.35", "workerPool": {"maxSize": 4}});
        let upgrade = upgrade_from_json(&body).unwrap();
        assert_eq!(upgrade.kubernetes_version.as_deref(), Some("1.35"));
        assert_eq!(upgrade.worker_pool.unwrap().max_size, Some(4));
        let rejected = upgrade_from_json(&serde_json::json!({"workerPool": {"maxSize": "four"}})).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.workerPool.maxSize");
        assert_eq!(upgrade_from_json(&serde_json::json!([1])).unwrap_err().first.field, "clusterConfig");
    }
}
