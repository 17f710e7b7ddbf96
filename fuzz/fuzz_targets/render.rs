//! Arbitrary strings in a valid request's name, description, labels and environment: when validation accepts
//! the request, `Renderer::render` succeeds, `main.tf` parses as HCL and has the same top-level blocks as the
//! render of the benign request (no value can add, remove or rename a block).
#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use provisioner::domain::{
    AwsConfig, ClusterConfig, ControlPlane, GcpConfig, Labels, ProvisionRequest, Runtime, RuntimeInput, Topology,
    WorkerPool,
};
use provisioner::render::{Renderer, RunAction};
use provisioner::service::{KubernetesVersion, ValidationPolicy};

#[derive(Debug, Arbitrary)]
struct Input {
    topology: u8,
    /// Each field is replaced only when its flag is set, so that validation often accepts the rest.
    name: Option<String>,
    description: Option<String>,
    labels: Option<Vec<(String, String)>>,
    environment: Option<String>,
}

static RENDERER: LazyLock<Renderer> = LazyLock::new(|| Renderer::new().expect("templates compile"));
static POLICY: ValidationPolicy = ValidationPolicy {
    min_kubernetes_version: KubernetesVersion { major: 1, minor: 32 },
    max_kubernetes_version: KubernetesVersion { major: 1, minor: 37 },
};

fn benign(topology: Topology) -> ProvisionRequest {
    let (region, zones, control_plane) = match topology {
        Topology::Gke => ("europe-west3", vec!["europe-west3-a".to_owned()], None),
        Topology::Eks => ("eu-central-1", vec!["eu-central-1a".to_owned()], None),
        Topology::VanillaKubeadm => (
            "eu-central-1",
            vec!["eu-central-1a".to_owned()],
            Some(ControlPlane { count: 3, machine_type: "t3.large".into() }),
        ),
    };
    let (aws, gcp) = match topology {
        Topology::Gke => (None, Some(GcpConfig { project_id: "my-project-1".into(), zones })),
        _ => (Some(AwsConfig { zones }), None),
    };
    ProvisionRequest {
        runtime_input: RuntimeInput {
            name: "demo".into(),
            description: Some("a cluster".into()),
            labels: Some(Labels(BTreeMap::from([("team".to_owned(), "platform".to_owned())]))),
        },
        cluster_config: ClusterConfig {
            topology,
            credential_id: "dev-aws".into(),
            region: region.into(),
            kubernetes_version: "1.34".into(),
            environment: "dev".into(),
            control_plane,
            worker_pool: WorkerPool { machine_type: "t3.large".into(), min_size: 1, max_size: 3, disk_size_gb: 50 },
            network: None,
            aws,
            gcp,
        },
    }
}

/// The top-level blocks of `main.tf`: identifier and labels.
fn blocks(request: ProvisionRequest) -> BTreeSet<String> {
    let (runtime, _) = Runtime::requested(request, chrono::Utc::now());
    let rendered = RENDERER.render(&runtime, RunAction::Apply).expect("an accepted request renders");
    let main_tf = &rendered.files["main.tf"];
    let body: hcl::Body =
        hcl::parse(main_tf).unwrap_or_else(|error| panic!("main.tf does not parse: {error}\n{main_tf}"));
    serde_json::from_str::<serde_json::Value>(&rendered.files["runner.json"]).expect("runner.json is JSON");
    body.blocks()
        .map(|block| {
            let labels: Vec<&str> = block.labels().iter().map(|label| label.as_str()).collect();
            format!("{} {}", block.identifier(), labels.join(" "))
        })
        .collect()
}

fuzz_target!(|input: Input| {
    let topology = [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke][usize::from(input.topology % 3)];
    let mut request = benign(topology);
    if let Some(name) = input.name {
        request.runtime_input.name = name;
    }
    if input.description.is_some() {
        request.runtime_input.description = input.description;
    }
    if let Some(labels) = input.labels {
        request.runtime_input.labels = Some(Labels(labels.into_iter().collect()));
    }
    if let Some(environment) = input.environment {
        request.cluster_config.environment = environment;
    }
    if POLICY.validate(&request).is_err() {
        return;
    }
    assert_eq!(blocks(request), blocks(benign(topology)), "a request value changed the set of top-level blocks");
});
