use super::*;
use crate::domain::Network;

fn runtime(topology: Topology) -> Runtime {
    Runtime::example(topology)
}

fn pinned(runtime: &Runtime) -> ProviderVersion {
    ProviderVersion::pinned(runtime.cluster_config.topology.cloud())
}

/// What the worker renders for an apply (a provisioning) or a destroy (a deprovisioning).
fn render(runtime: &Runtime, action: RunAction) -> RenderedConfig {
    let operation_type =
        if action == RunAction::Destroy { OperationType::Deprovision } else { OperationType::Provision };
    render_for(runtime, operation_type, action)
}

fn render_for(runtime: &Runtime, operation_type: OperationType, action: RunAction) -> RenderedConfig {
    let renderer = Renderer::new().expect("templates compile");
    renderer.render(runtime, operation_type, action, &pinned(runtime), RunInputs::default()).expect("renders")
}

#[test]
fn every_topology_renders_main_tf_that_parses_and_runner_json() {
    for topology in [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke] {
        let rendered = render(&runtime(topology), RunAction::Apply);
        let names: Vec<&str> = rendered.files.keys().map(String::as_str).collect();
        assert_eq!(names, ["main.tf", "runner.json"]);
        hcl::parse(&rendered.files["main.tf"]).unwrap_or_else(|error| panic!("{topology:?} does not parse: {error}"));
    }
}

#[test]
fn only_runs_that_change_the_configuration_bind_administrators_and_only_of_runtimes_that_name_them() {
    use crate::domain::{Administrator, KubernetesAccess, SubjectKind};
    let administrators = |runtime: &Runtime, operation_type| {
        let rendered = render_for(runtime, operation_type, RunAction::Apply);
        let manifest: serde_json::Value = serde_json::from_str(&rendered.files["runner.json"]).unwrap();
        manifest.get("administrators").cloned()
    };
    let mut eks = runtime(Topology::Eks);
    assert_eq!(administrators(&eks, OperationType::Upgrade), None, "a runtime that never named any");
    let alice = Administrator { kind: SubjectKind::User, name: "oidc:alice".into() };
    eks.cluster_config.kubernetes = Some(KubernetesAccess { oidc: None, administrators: Some(vec![alice]) });
    let named = Some(serde_json::json!([{ "kind": "User", "name": "oidc:alice" }]));
    assert_eq!(administrators(&eks, OperationType::Provision), named);
    assert_eq!(administrators(&eks, OperationType::Upgrade), named);
    assert_eq!(administrators(&eks, OperationType::Hibernate), None);
    assert_eq!(administrators(&eks, OperationType::WakeUp), None);
    let removed = KubernetesAccess::default().replacing(eks.cluster_config.kubernetes.as_ref());
    eks.cluster_config.kubernetes = Some(removed);
    assert_eq!(administrators(&eks, OperationType::Upgrade), Some(serde_json::json!([])), "the binding goes");
}

#[test]
fn runner_json_names_the_action_and_where_the_state_lives() {
    let gke = runtime(Topology::Gke);
    let rendered = render(&gke, RunAction::Destroy);
    let manifest: serde_json::Value = serde_json::from_str(&rendered.files["runner.json"]).unwrap();
    assert!(gke.state_bucket.starts_with("kubeopera-state-dev-team-a-"), "{}", gke.state_bucket);
    assert_eq!(
        manifest,
        serde_json::json!({
            "action": "destroy",
            "topology": "gke",
            "cloud": "gcp",
            "region": "europe-west3",
            "stateBucket": gke.state_bucket,
            "runtimeId": "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10",
            "runtimeName": "team-a",
            "gcpProject": "my-project-1",
            "provider": { "source": "hashicorp/google", "version": runner_contract::providers::GOOGLE_VERSION },
        })
    );

    let rendered = render(&runtime(Topology::Eks), RunAction::Apply);
    let manifest: serde_json::Value = serde_json::from_str(&rendered.files["runner.json"]).unwrap();
    assert_eq!(manifest["action"], "apply");
    assert_eq!(manifest["cloud"], "aws");
    assert!(manifest.get("gcpProject").is_none());
}

#[test]
fn the_configuration_does_not_depend_on_the_action() {
    let runtime = runtime(Topology::VanillaKubeadm);
    assert_eq!(
        render(&runtime, RunAction::Apply).files["main.tf"],
        render(&runtime, RunAction::Destroy).files["main.tf"]
    );
}

#[test]
fn hibernation_takes_the_workers_away_and_a_vanilla_wake_up_waits_for_the_api_server() {
    let scaling = |operation_type| WorkerScaling::of(operation_type);
    assert_eq!(scaling(OperationType::Provision), WorkerScaling::Initial);
    assert_eq!(scaling(OperationType::Upgrade), WorkerScaling::KeepCurrent);
    assert_eq!(scaling(OperationType::Hibernate), WorkerScaling::Zero);
    assert_eq!(scaling(OperationType::WakeUp), WorkerScaling::Minimum);
    for topology in [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke] {
        let runtime = runtime(topology);
        for (operation_type, spelling) in [
            (OperationType::Provision, "initial"),
            (OperationType::Upgrade, "keep_current"),
            (OperationType::Hibernate, "zero"),
            (OperationType::WakeUp, "minimum"),
        ] {
            let rendered = render_for(&runtime, operation_type, RunAction::Apply);
            let main_tf = hcl::parse(&rendered.files["main.tf"]).expect("parses");
            let module = main_tf
                .blocks()
                .find(|block| {
                    block.identifier() == "module"
                        && block.labels().len() == 1
                        && ["eks", "compute", "gke"].contains(&block.labels()[0].as_str())
                })
                .expect("the cluster module");
            let value = module
                .body()
                .attributes()
                .find(|attribute| attribute.key() == "worker_scaling")
                .map(|attribute| attribute.expr().to_string());
            assert_eq!(value.as_deref(), Some(format!("\"{spelling}\"").as_str()), "{topology:?} {operation_type:?}");
            let manifest: serde_json::Value = serde_json::from_str(&rendered.files["runner.json"]).unwrap();
            let waits = operation_type == OperationType::WakeUp && topology == Topology::VanillaKubeadm;
            assert_eq!(manifest.get("waitForApiServer").is_some(), waits, "{topology:?} {operation_type:?}");
            let control_plane_first = operation_type == OperationType::Upgrade && topology == Topology::VanillaKubeadm;
            let expected = control_plane_first.then(|| {
                let count = runtime.cluster_config.control_plane.as_ref().unwrap().count;
                serde_json::json!({
                    "machines": "module.compute.aws_instance.control_plane",
                    "machineType": runtime.cluster_config.control_plane.as_ref().unwrap().machine_type,
                    "resource": "module.compute.aws_ssm_parameter.upgrade_target",
                    "lastNode": count - 1,
                    "version": runtime.cluster_config.kubernetes_version,
                })
            });
            assert_eq!(manifest.get("controlPlaneUpgrade"), expected.as_ref(), "{topology:?} {operation_type:?}");
        }
    }
}

#[test]
fn the_load_balancer_comes_with_more_than_one_control_plane_node() {
    let mut runtime = runtime(Topology::VanillaKubeadm);
    assert!(render(&runtime, RunAction::Apply).files["main.tf"].contains("create_api_load_balancer = true"));
    runtime.cluster_config.control_plane.as_mut().unwrap().count = 1;
    assert!(render(&runtime, RunAction::Apply).files["main.tf"].contains("create_api_load_balancer = false"));
}

#[test]
fn network_defaults_apply_when_no_network_is_given() {
    let mut runtime = runtime(Topology::Gke);
    runtime.cluster_config.network = None;
    let main_tf = &render(&runtime, RunAction::Apply).files["main.tf"];
    for cidr in [DEFAULT_VPC_CIDR, DEFAULT_POD_CIDR, DEFAULT_SERVICE_CIDR] {
        assert!(main_tf.contains(&format!("\"{cidr}\"")), "{cidr}");
    }
    runtime.cluster_config.network = Some(Network {
        vpc_cidr: "10.10.0.0/16".into(),
        pod_cidr: "10.20.0.0/16".into(),
        service_cidr: "10.30.0.0/16".into(),
    });
    let main_tf = &render(&runtime, RunAction::Apply).files["main.tf"];
    assert!(main_tf.contains("\"10.20.0.0/16\""));
    assert!(!main_tf.contains(DEFAULT_POD_CIDR));
}

#[test]
fn a_missing_topology_section_is_an_error_not_a_panic() {
    let renderer = Renderer::new().unwrap();
    let mut vanilla = runtime(Topology::VanillaKubeadm);
    vanilla.cluster_config.control_plane = None;
    let error = renderer
        .render(&vanilla, OperationType::Provision, RunAction::Apply, &pinned(&vanilla), RunInputs::default())
        .unwrap_err();
    assert!(matches!(error, Error::MissingSection { section: "controlPlane", .. }), "{error}");

    let mut gke = runtime(Topology::Gke);
    gke.cluster_config.gcp = None;
    let error = renderer
        .render(&gke, OperationType::Provision, RunAction::Apply, &pinned(&gke), RunInputs::default())
        .unwrap_err();
    assert!(matches!(error, Error::MissingSection { section: "gcp", .. }));
}

/// The module input of each topology that holds the ranges allowed to reach the API, as rendered.
fn rendered_api_allowed_cidrs(rendered: &RenderedConfig, topology: Topology) -> hcl::Expression {
    let (module, input) = match topology {
        Topology::VanillaKubeadm => ("security", "api_allowed_cidrs"),
        Topology::Eks => ("eks", "endpoint_public_access_cidrs"),
        Topology::Gke => ("gke", "master_authorized_cidrs"),
    };
    let main_tf = hcl::parse(&rendered.files["main.tf"]).expect("parses");
    let module = main_tf
        .blocks()
        .find(|block| block.identifier() == "module" && block.labels()[0].as_str() == module)
        .unwrap_or_else(|| panic!("{topology:?} has no module {module}"));
    let attribute = module.body().attributes().find(|attribute| attribute.key() == input);
    attribute.unwrap_or_else(|| panic!("{topology:?} passes no {input}")).expr().clone()
}

#[test]
fn every_topology_passes_the_runtimes_api_ranges_to_its_module() {
    for topology in [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke] {
        let mut runtime = runtime(topology);
        runtime.cluster_config.api_allowed_cidrs = Some(vec!["203.0.113.0/24".into(), "198.51.100.7/32".into()]);
        let operator = ["192.0.2.0/24".parse().unwrap()];
        let renderer = Renderer::new().unwrap().with_operator_api_allowed_cidrs(Some(&operator));
        for operation_type in [OperationType::Provision, OperationType::Upgrade, OperationType::WakeUp] {
            let rendered = renderer
                .render(&runtime, operation_type, RunAction::Apply, &pinned(&runtime), RunInputs::default())
                .unwrap();
            assert_eq!(
                rendered_api_allowed_cidrs(&rendered, topology),
                hcl::Expression::Array(vec!["203.0.113.0/24".into(), "198.51.100.7/32".into()]),
                "{topology:?} {operation_type:?}: the runtime's own list wins"
            );
        }
    }
}

/// A runtime recorded before runtimes recorded their ranges renders the operator's; without those its render
/// fails, naming what to set, rather than opening the API.
#[test]
fn a_runtime_without_ranges_renders_the_operators_or_fails() {
    for topology in [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke] {
        let mut legacy = runtime(topology);
        legacy.cluster_config.api_allowed_cidrs = None;
        let operator = ["192.0.2.0/24".parse().unwrap()];
        let renderer = Renderer::new().unwrap().with_operator_api_allowed_cidrs(Some(&operator));
        let rendered = renderer.render(
            &legacy,
            OperationType::Deprovision,
            RunAction::Destroy,
            &pinned(&legacy),
            RunInputs::default(),
        );
        let operators = hcl::Expression::Array(vec!["192.0.2.0/24".into()]);
        assert_eq!(rendered_api_allowed_cidrs(&rendered.unwrap(), topology), operators);

        let error = Renderer::new()
            .unwrap()
            .render(&legacy, OperationType::Deprovision, RunAction::Destroy, &pinned(&legacy), RunInputs::default())
            .unwrap_err();
        assert!(matches!(error, Error::NoApiAllowedCidrs { .. }), "{error}");
        assert!(error.to_string().contains("APP_API_ALLOWED_CIDRS is not set"), "{error}");
    }
}

#[test]
fn an_oversized_configuration_is_refused() {
    let mut runtime = runtime(Topology::Eks);
    runtime.description = Some("x".repeat(MAX_RENDERED_BYTES));
    let error = Renderer::new()
        .unwrap()
        .render(&runtime, OperationType::Provision, RunAction::Apply, &pinned(&runtime), RunInputs::default())
        .unwrap_err();
    assert!(matches!(error, Error::TooLarge { .. }), "{error}");
}

#[test]
fn the_provider_is_pinned_exactly_and_named_in_runner_json() {
    let runtime = runtime(Topology::Eks);
    let provider = ProviderVersion { source: "hashicorp/aws".into(), version: "6.40.1".into() };
    let rendered = Renderer::new()
        .unwrap()
        .render(&runtime, OperationType::Deprovision, RunAction::Destroy, &provider, RunInputs::default())
        .unwrap();
    assert!(rendered.files["main.tf"].contains("version = \"6.40.1\""), "{}", rendered.files["main.tf"]);
    let manifest: serde_json::Value = serde_json::from_str(&rendered.files["runner.json"]).unwrap();
    assert_eq!(manifest["provider"], serde_json::json!({"source": "hashicorp/aws", "version": "6.40.1"}));

    for wrong in [
        ProviderVersion { source: "hashicorp/aws".into(), version: "~> 6.0".into() },
        ProviderVersion { source: "hashicorp/google".into(), version: "8.0.0".into() },
    ] {
        let error = Renderer::new()
            .unwrap()
            .render(&runtime, OperationType::Provision, RunAction::Apply, &wrong, RunInputs::default())
            .unwrap_err();
        assert!(matches!(error, Error::Provider { .. }), "{error}");
    }
}

#[test]
fn no_template_bypasses_the_escaper() {
    let partial = ("worker_pools", WORKER_POOLS_PARTIAL);
    for (topology, source) in
        TEMPLATES.map(|(topology, source)| (topology.as_str(), source)).into_iter().chain([partial])
    {
        assert!(!source.contains("{{{"), "{topology:?} uses triple braces");
        assert!(!source.contains("{{&"), "{topology:?} uses an unescaped output");
    }
}

#[test]
fn user_labels_cannot_override_the_runtime_identity() {
    let mut runtime = runtime(Topology::Eks);
    runtime.labels.0.insert("kubeopera.io/runtime-id".to_owned(), "someone-else".to_owned());
    assert_eq!(aws_tags(&runtime)["kubeopera.io/runtime-id"], runtime.id.to_string());
}

#[test]
fn kubernetes_labels_are_mapped_onto_gcp_label_rules() {
    assert_eq!(gcp_label_key("app.kubernetes.io/name"), "app_kubernetes_io_name");
    assert_eq!(gcp_label_key("Team"), "team");
    assert_eq!(gcp_label_key("1st"), "k_1st");
    assert_eq!(gcp_label_text("Web.Frontend"), "web_frontend");
    assert_eq!(gcp_label_text(""), "");
    assert_eq!(gcp_label_key(&"a".repeat(100)).len(), 63);
    assert_eq!(gcp_label_key(&"1".repeat(100)).len(), 63);
}
