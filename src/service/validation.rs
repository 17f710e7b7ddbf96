//! Validation of provisioning requests, shared by both APIs. Every rejection names the field it is about, as a
//! path into `ProvisionRuntimeInput` (for example `clusterConfig.workerPool.minSize`).

use ipnet::Ipv4Net;

use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::domain::{ClusterConfig, Labels, ProvisionRequest, Topology};

/// The longest runtime name: the name ends up in cloud resource names with tighter limits than Kubernetes
/// (an AWS load balancer name is at most 32 characters, and the state bucket
/// `kubeopera-terraform-state-<environment>-<name>` must stay within 63).
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
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid { field: field.into(), message: message.into() }
    }
}

type Check = Result<(), Invalid>;

impl ValidationPolicy {
    pub fn validate(&self, request: &ProvisionRequest) -> Check {
        let runtime = &request.runtime_input;
        check_dns_label("runtimeInput.name", &runtime.name, MAX_NAME_LEN)?;
        if let Some(description) = &runtime.description {
            check_text("runtimeInput.description", description, MAX_DESCRIPTION_LEN)?;
        }
        if let Some(labels) = &runtime.labels {
            check_labels("runtimeInput.labels", labels)?;
        }
        self.check_cluster_config(&request.cluster_config)
    }

    fn check_cluster_config(&self, config: &ClusterConfig) -> Check {
        check_text("clusterConfig.credentialId", &config.credential_id, 255)?;
        if config.credential_id.trim().is_empty() {
            return Err(Invalid::new("clusterConfig.credentialId", "must not be empty"));
        }
        check_environment(&config.environment)?;
        self.check_kubernetes_version(&config.kubernetes_version)?;
        check_region(config.topology, &config.region)?;
        check_topology_sections(config)?;

        if let Some(control_plane) = &config.control_plane {
            if !CONTROL_PLANE_COUNTS.contains(&control_plane.count) {
                return Err(Invalid::new(
                    "clusterConfig.controlPlane.count",
                    format!("must be 1, 3 or 5 (an odd number keeps etcd quorum), got {}", control_plane.count),
                ));
            }
            check_machine_type("clusterConfig.controlPlane.machineType", &control_plane.machine_type)?;
        }

        let workers = &config.worker_pool;
        check_machine_type("clusterConfig.workerPool.machineType", &workers.machine_type)?;
        if !(0..=MAX_WORKERS).contains(&workers.min_size) {
            return Err(Invalid::new(
                "clusterConfig.workerPool.minSize",
                format!("must be between 0 and {MAX_WORKERS}, got {}", workers.min_size),
            ));
        }
        if !(1..=MAX_WORKERS).contains(&workers.max_size) {
            return Err(Invalid::new(
                "clusterConfig.workerPool.maxSize",
                format!("must be between 1 and {MAX_WORKERS}, got {}", workers.max_size),
            ));
        }
        if workers.min_size > workers.max_size {
            return Err(Invalid::new(
                "clusterConfig.workerPool.minSize",
                format!("must not exceed maxSize ({} > {})", workers.min_size, workers.max_size),
            ));
        }
        if !(MIN_DISK_GB..=MAX_DISK_GB).contains(&workers.disk_size_gb) {
            return Err(Invalid::new(
                "clusterConfig.workerPool.diskSizeGb",
                format!("must be between {MIN_DISK_GB} and {MAX_DISK_GB}, got {}", workers.disk_size_gb),
            ));
        }

        if let Some(network) = &config.network {
            let vpc = parse_cidr("clusterConfig.network.vpcCidr", &network.vpc_cidr)?;
            let pods = parse_cidr("clusterConfig.network.podCidr", &network.pod_cidr)?;
            let services = parse_cidr("clusterConfig.network.serviceCidr", &network.service_cidr)?;
            check_disjoint("clusterConfig.network.podCidr", pods, "vpcCidr", vpc)?;
            check_disjoint("clusterConfig.network.serviceCidr", services, "vpcCidr", vpc)?;
            check_disjoint("clusterConfig.network.serviceCidr", services, "podCidr", pods)?;
        }
        Ok(())
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

/// Each topology needs its own cloud section and no other; vanilla_kubeadm alone has control-plane nodes.
fn check_topology_sections(config: &ClusterConfig) -> Check {
    let topology = config.topology.as_str();
    match config.topology {
        Topology::VanillaKubeadm | Topology::Eks => {
            if config.gcp.is_some() {
                return Err(Invalid::new("clusterConfig.gcp", format!("must be absent for topology {topology}")));
            }
            let aws = config
                .aws
                .as_ref()
                .ok_or_else(|| Invalid::new("clusterConfig.aws", format!("is required for topology {topology}")))?;
            check_zones("clusterConfig.aws.zones", &config.region, &aws.zones, is_aws_zone_suffix)?;
        }
        Topology::Gke => {
            if config.aws.is_some() {
                return Err(Invalid::new("clusterConfig.aws", "must be absent for topology gke"));
            }
            let gcp =
                config.gcp.as_ref().ok_or_else(|| Invalid::new("clusterConfig.gcp", "is required for topology gke"))?;
            check_gcp_project("clusterConfig.gcp.projectId", &gcp.project_id)?;
            check_zones("clusterConfig.gcp.zones", &config.region, &gcp.zones, is_gcp_zone_suffix)?;
        }
    }
    match (config.topology, &config.control_plane) {
        (Topology::VanillaKubeadm, None) => {
            Err(Invalid::new("clusterConfig.controlPlane", "is required for topology vanilla_kubeadm"))
        }
        (Topology::Eks | Topology::Gke, Some(_)) => Err(Invalid::new(
            "clusterConfig.controlPlane",
            format!("must be absent for topology {topology}: its control plane is managed by the cloud"),
        )),
        _ => Ok(()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AwsConfig, ControlPlane, Network};

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
        policy().validate(request).expect_err("request should be rejected").field
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
        let invalid = policy().validate(&with_network("10.0.0.0/8", "10.244.0.0/16", "172.16.0.0/16")).unwrap_err();
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
}
