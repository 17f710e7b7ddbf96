//! Validation of provisioning and upgrade requests, shared by both APIs. Every rejection names the field it is
//! about, as a path into `ProvisionRuntimeInput` (for example `clusterConfig.workerPools[1].minSize`), and a request
//! is checked whole: every invalid field is reported at once.

mod access;
mod cloud;
mod fields;
mod json;
mod pools;
mod reason;
mod runtime_patch;
mod upgrade;

use crate::domain::api_access::{ListProblem, parse_api_allowed_cidrs};
use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::domain::{ClusterConfig, ProvisionRequest};
use cloud::{check_disjoint, check_region, check_topology_sections, parse_cidr};
use fields::{check_credential_id, check_dns_label, check_environment, check_labels, check_machine_type, check_text};
pub use fields::{parse_id, parse_label_filter, parse_operation_id, parse_runtime_id};
pub use json::deserialize_naming_every_field;
pub use reason::InvalidReason;
pub use runtime_patch::{ApprovalPolicyChange, DeletionProtectionChange, RuntimePatch, runtime_patch_from_json};
pub use upgrade::upgrade_from_json;

/// The longest runtime name: the name ends up in cloud resource names with tighter limits than Kubernetes
/// (an AWS load balancer name is at most 32 characters, and the state bucket
/// `kubeopera-state-<environment>-<name>-<8 hex>` must stay within 63).
pub const MAX_NAME_LEN: usize = 24;
/// The longest environment name, for the same bucket name limit.
pub const MAX_ENVIRONMENT_LEN: usize = 12;
const MAX_DESCRIPTION_LEN: usize = 1024;
const MAX_LABELS: usize = 64;
const CONTROL_PLANE_COUNTS: [i32; 3] = [1, 3, 5];
const API_ALLOWED_CIDRS: &str = "clusterConfig.apiAllowedCidrs";

/// A rejected input: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub reason: InvalidReason,
    pub message: String,
}

impl Invalid {
    pub fn new(reason: InvalidReason, field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid { field: field.into(), reason, message: message.into() }
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
        if self.api_allowed_cidrs_for(&request.cluster_config).is_none() {
            findings.check(Err(Invalid::new(
                InvalidReason::Required,
                API_ALLOWED_CIDRS,
                "is required: name the IPv4 ranges that may reach the cluster's Kubernetes API (those of \
                 terraform-runner and host-cluster-controller among them); no default is configured \
                 (APP_API_ALLOWED_CIDRS)",
            )));
        }
        findings.into_result()
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
                    InvalidReason::UnsupportedValue,
                    "clusterConfig.controlPlane.count",
                    format!("must be 1, 3 or 5 (an odd number keeps etcd quorum), got {}", control_plane.count),
                )));
            }
            findings.check(check_machine_type("clusterConfig.controlPlane.machineType", &control_plane.machine_type));
        }

        pools::check_pools(config, findings);
        access::check_access(config, findings);

        if let Some(cidrs) = &config.api_allowed_cidrs {
            findings.check(check_api_allowed_cidrs(cidrs));
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
        let version: KubernetesVersion =
            value.parse().map_err(|message: String| Invalid::new(InvalidReason::Format, field, message))?;
        if version < self.min_kubernetes_version || version > self.max_kubernetes_version {
            return Err(Invalid::new(
                InvalidReason::UnsupportedValue,
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

/// The ranges a request names: each an IPv4 CIDR, none twice, 1 to 20 of them; a bad entry is named by its index.
fn check_api_allowed_cidrs(cidrs: &[String]) -> Check {
    parse_api_allowed_cidrs(cidrs.iter().map(String::as_str)).map(drop).map_err(|problem| match problem {
        ListProblem::Invalid { index, message } => {
            Invalid::new(InvalidReason::Format, format!("{API_ALLOWED_CIDRS}[{index}]"), message)
        }
        ListProblem::Repeated { index, message } => {
            Invalid::new(InvalidReason::Conflict, format!("{API_ALLOWED_CIDRS}[{index}]"), message)
        }
        ListProblem::Count { message } => Invalid::new(InvalidReason::OutOfRange, API_ALLOWED_CIDRS, message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AwsConfig, ControlPlane, Labels, Network, Topology};

    /// The defaults with an operator's list of API ranges, as every deployment but a bare one has.
    pub(super) fn policy() -> ValidationPolicy {
        let operator = Some(vec!["192.0.2.0/24".parse().unwrap()]);
        ValidationPolicy { api_allowed_cidrs: operator, ..ValidationPolicy::DEFAULT }
    }

    pub(super) fn vanilla() -> ProvisionRequest {
        ProvisionRequest::example(Topology::VanillaKubeadm)
    }

    pub(super) fn gke() -> ProvisionRequest {
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
        request.cluster_config.worker_pool.as_mut().unwrap().min_size = 4;
        assert_eq!(rejected_field(&request), "clusterConfig.workerPool.minSize");
        request.cluster_config.worker_pool.as_mut().unwrap().min_size = -1;
        assert_eq!(rejected_field(&request), "clusterConfig.workerPool.minSize");
        let mut request = vanilla();
        request.cluster_config.worker_pool.as_mut().unwrap().max_size = 501;
        assert_eq!(rejected_field(&request), "clusterConfig.workerPool.maxSize");
        let mut request = vanilla();
        request.cluster_config.worker_pool.as_mut().unwrap().disk_size_gb = 10;
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
    fn without_the_operators_list_a_request_must_name_its_api_ranges() {
        let bare = ValidationPolicy::DEFAULT;
        let rejected = bare.validate(&vanilla()).unwrap_err();
        assert_eq!(rejected.all().count(), 1, "{rejected:?}");
        let invalid = rejected.first;
        assert_eq!(
            (invalid.field.as_str(), invalid.reason),
            ("clusterConfig.apiAllowedCidrs", InvalidReason::Required)
        );
        assert!(invalid.message.contains("no default is configured (APP_API_ALLOWED_CIDRS)"), "{}", invalid.message);

        let mut request = vanilla();
        request.cluster_config.api_allowed_cidrs = Some(vec!["203.0.113.0/24".into()]);
        assert_eq!(bare.validate(&request), Ok(()));
        assert_eq!(bare.api_allowed_cidrs_for(&request.cluster_config), Some(vec!["203.0.113.0/24".to_owned()]));
        // The request's list wins over the operator's; without one, the operator's applies.
        assert_eq!(policy().api_allowed_cidrs_for(&request.cluster_config), Some(vec!["203.0.113.0/24".to_owned()]));
        assert_eq!(policy().api_allowed_cidrs_for(&vanilla().cluster_config), Some(vec!["192.0.2.0/24".to_owned()]));
        assert_eq!(policy().validate(&vanilla()), Ok(()));
    }

    #[test]
    fn api_ranges_are_ipv4_cidrs_named_by_their_index() {
        let with_cidrs = |cidrs: &[&str]| {
            let mut request = gke();
            request.cluster_config.api_allowed_cidrs = Some(cidrs.iter().map(|cidr| cidr.to_string()).collect());
            policy().validate(&request)
        };
        assert_eq!(with_cidrs(&["0.0.0.0/0"]), Ok(()));
        assert_eq!(with_cidrs(&["203.0.113.0/24", "198.51.100.7/32"]), Ok(()));
        for (cidrs, field, reason) in [
            (&["203.0.113.0/24", "203.0.113.1/24"][..], "clusterConfig.apiAllowedCidrs[1]", InvalidReason::Format),
            (&["fd00::/8"], "clusterConfig.apiAllowedCidrs[0]", InvalidReason::Format),
            (
                &["10.0.0.0/8", "192.0.2.0/24", "10.0.0.0/8"],
                "clusterConfig.apiAllowedCidrs[2]",
                InvalidReason::Conflict,
            ),
            (&[], "clusterConfig.apiAllowedCidrs", InvalidReason::OutOfRange),
        ] {
            let invalid = with_cidrs(cidrs).unwrap_err().first;
            assert_eq!((invalid.field.as_str(), invalid.reason), (field, reason), "{cidrs:?}: {}", invalid.message);
        }
        let many: Vec<String> = (0..21).map(|index| format!("10.{index}.0.0/16")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(with_cidrs(&many).unwrap_err().first.field, "clusterConfig.apiAllowedCidrs");
        assert_eq!(with_cidrs(&many[..20]), Ok(()));
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
        request.cluster_config.worker_pool.as_mut().unwrap().min_size = -1;
        request.cluster_config.worker_pool.as_mut().unwrap().disk_size_gb = 1;
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
}
