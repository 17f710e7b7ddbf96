//! Arbitrary strings in a valid request's name, description, labels and environment: when validation accepts
//! the request, `Renderer::render` succeeds, `main.tf` parses as HCL and has the same top-level blocks as the
//! render of the benign request (no value can add, remove or rename a block).
#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use provisioner::domain::{Labels, ProviderVersion, ProvisionRequest, Runtime, Topology};
use provisioner::render::{Renderer, RunAction};
use provisioner::service::ValidationPolicy;

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
static POLICY: ValidationPolicy = ValidationPolicy::DEFAULT;

/// The top-level blocks of `main.tf`: identifier and labels.
fn blocks(request: ProvisionRequest) -> BTreeSet<String> {
    let (runtime, _) = Runtime::requested(request, chrono::Utc::now());
    let provider = ProviderVersion::pinned(runtime.cluster_config.topology.cloud());
    let rendered = RENDERER.render(&runtime, RunAction::Apply, &provider).expect("an accepted request renders");
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
    let mut request = ProvisionRequest::example(topology);
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
    assert_eq!(blocks(request), blocks(ProvisionRequest::example(topology)), "a request value changed the set of top-level blocks");
});
