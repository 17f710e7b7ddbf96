//! One valid request per topology, for tests, benchmarks and fuzzing (feature `examples`): callers change the
//! fields they are about instead of spelling a whole request again.

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use super::{
    AwsConfig, ClusterConfig, ControlPlane, GcpConfig, Labels, Network, ProvisionRequest, Runtime, RuntimeInput,
    Topology, WorkerPool,
};

impl ProvisionRequest {
    /// A request that validation accepts, with the credential the tests' fake auth-service holds for the
    /// topology's cloud (`cred-aws-1`, `cred-gcp-1`) and an explicit network.
    pub fn example(topology: Topology) -> ProvisionRequest {
        let aws = |zones: [&str; 2]| Some(AwsConfig { zones: zones.map(str::to_owned).to_vec() });
        let (credential_id, region, aws, gcp) = match topology {
            Topology::VanillaKubeadm | Topology::Eks => {
                ("cred-aws-1", "eu-central-1", aws(["eu-central-1a", "eu-central-1b"]), None)
            }
            Topology::Gke => (
                "cred-gcp-1",
                "europe-west3",
                None,
                Some(GcpConfig {
                    project_id: "my-project-1".into(),
                    zones: vec!["europe-west3-a".into(), "europe-west3-b".into()],
                }),
            ),
        };
        ProvisionRequest {
            runtime_input: RuntimeInput {
                name: "team-a".into(),
                description: Some("Team A's cluster".into()),
                labels: Some(Labels([("owner".to_owned(), "team-a".to_owned())].into())),
                deletion_protection: None,
                approval_policy: None,
            },
            cluster_config: ClusterConfig {
                topology,
                credential_id: credential_id.into(),
                region: region.into(),
                kubernetes_version: "1.34".into(),
                environment: "dev".into(),
                control_plane: (topology == Topology::VanillaKubeadm)
                    .then(|| ControlPlane { count: 3, machine_type: "t3.large".into() }),
                worker_pool: Some(WorkerPool {
                    machine_type: "t3.large".into(),
                    min_size: 1,
                    max_size: 3,
                    disk_size_gb: 50,
                }),
                worker_pools: None,
                network: Some(Network {
                    vpc_cidr: "10.0.0.0/16".into(),
                    pod_cidr: "192.168.0.0/16".into(),
                    service_cidr: "10.96.0.0/12".into(),
                }),
                // As Kyma's clients send it: the operator's list applies.
                api_allowed_cidrs: None,
                aws,
                gcp,
                kubernetes: None,
            },
        }
    }

    /// The example with another runtime name.
    pub fn example_named(topology: Topology, name: &str) -> ProvisionRequest {
        let mut request = ProvisionRequest::example(topology);
        request.runtime_input.name = name.to_owned();
        request
    }
}

/// The ranges [`Runtime::example`] records (documentation ranges, RFC 5737).
pub const EXAMPLE_API_ALLOWED_CIDRS: [&str; 2] = ["203.0.113.0/24", "198.51.100.7/32"];

impl Runtime {
    /// The runtime the example request creates, with a fixed id and creation time so that renders of it are
    /// reproducible (golden files), and the ranges that may reach its API recorded as the service records them.
    pub fn example(topology: Topology) -> Runtime {
        let created: DateTime<Utc> = Utc.with_ymd_and_hms(2025, 6, 1, 12, 0, 0).single().expect("a valid time");
        let (mut runtime, _) = Runtime::requested(ProvisionRequest::example(topology), false, created);
        runtime.cluster_config.api_allowed_cidrs = Some(EXAMPLE_API_ALLOWED_CIDRS.map(str::to_owned).to_vec());
        runtime.id = Uuid::from_u128(0x0190b8a6_7f3e_7c4a_9a41_3f2d3c1b2a10);
        let config = &runtime.cluster_config;
        runtime.state_bucket = super::state_bucket::state_bucket_name(&config.environment, &runtime.name, runtime.id);
        runtime.last_operation_id = None;
        runtime
    }
}
