//! The Terraform renderer from the outside: every topology renders HCL that parses, has the blocks the Job
//! needs, matches its golden file, keeps hostile request values inert and contains no credentials.
//!
//! Golden files are `tests/golden/<topology>.tf`. After an intended template change, regenerate them with
//!
//!     UPDATE_GOLDEN=1 cargo test -p provisioner --test integration render::
//!
//! and review the diff like any other code change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use hcl::{Block, Body, Expression, ObjectKey};
use provisioner::domain::state_bucket::state_bucket_name;
use provisioner::domain::{
    AwsConfig, Labels, NamedWorkerPool, Network, Runtime, Taint, TaintEffect, Topology, WorkerPool,
};
use provisioner::render::{RenderedConfig, RunAction};

const TOPOLOGIES: [Topology; 3] = [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke];

/// Tries to end the string, open a block, interpolate, run a directive, end a comment, smuggle control and
/// bidi characters, and includes an already-escaped marker and non-ASCII text.
const HOSTILE: &str = "x\" }\nresource \"aws_instance\" \"evil\" {\n  ami = \"${file(\"/etc/passwd\")}\"\n}\n\
    %{ if true }yes%{ endif } \\ \\\" \\n */ /* # // <<EOF\r\t\u{0}\u{1B}[0m \u{202E}txt $${literal} Zürich 東京 ☃";

/// The example runtime of each topology, varied so that the golden files cover more than one spelling: vanilla
/// with an explicit network, EKS and GKE on the network defaults, each in its own region, version and environment.
fn runtime(topology: Topology) -> Runtime {
    let mut runtime = Runtime::example(topology);
    runtime.name = format!("team-a-{}", topology.as_str().replace('_', "-"));
    runtime.labels = Labels(BTreeMap::from([
        ("app.kubernetes.io/part-of".to_owned(), "Payments".to_owned()),
        ("owner".to_owned(), "team-a".to_owned()),
    ]));
    let config = &mut runtime.cluster_config;
    config.credential_id = "cred-not-rendered".into();
    let mut pool = WorkerPool { machine_type: String::new(), min_size: 1, max_size: 5, disk_size_gb: 80 };
    match topology {
        Topology::VanillaKubeadm => {
            pool.machine_type = "t3.xlarge".into();
            config.network = Some(Network {
                vpc_cidr: "10.10.0.0/16".into(),
                pod_cidr: "172.16.0.0/16".into(),
                service_cidr: "10.96.0.0/12".into(),
            });
        }
        Topology::Eks => {
            config.region = "us-east-1".into();
            config.kubernetes_version = "1.33".into();
            config.environment = "prod".into();
            pool.machine_type = "m5.large".into();
            config.network = None;
            config.aws = Some(AwsConfig { zones: vec!["us-east-1a".into(), "us-east-1b".into(), "us-east-1c".into()] });
        }
        Topology::Gke => {
            config.environment = "staging".into();
            pool.machine_type = "e2-standard-4".into();
            config.network = None;
        }
    }
    config.worker_pool = Some(pool);
    // Named as the service names it when it records the runtime.
    runtime.state_bucket = state_bucket_name(&runtime.cluster_config.environment, &runtime.name, runtime.id);
    runtime
}

fn vanilla() -> Runtime {
    runtime(Topology::VanillaKubeadm)
}

fn eks() -> Runtime {
    runtime(Topology::Eks)
}

fn gke() -> Runtime {
    runtime(Topology::Gke)
}

fn render(runtime: &Runtime) -> RenderedConfig {
    test_support::render(runtime, RunAction::Apply)
}

fn parse(rendered: &RenderedConfig) -> Body {
    let main_tf = &rendered.files["main.tf"];
    hcl::parse(main_tf).unwrap_or_else(|error| panic!("main.tf does not parse: {error}\n{main_tf}"))
}

fn block<'a>(body: &'a Body, identifier: &str, labels: &[&str]) -> &'a Block {
    body.blocks()
        .find(|block| {
            block.identifier() == identifier
                && block.labels().iter().map(|label| label.as_str()).eq(labels.iter().copied())
        })
        .unwrap_or_else(|| panic!("no block {identifier} {labels:?}"))
}

fn attribute<'a>(body: &'a Body, key: &str) -> &'a Expression {
    body.attributes().find(|attribute| attribute.key() == key).unwrap_or_else(|| panic!("no attribute {key}")).expr()
}

/// The literal string value of an attribute; a template (interpolation or directive) fails the test.
fn string<'a>(body: &'a Body, key: &str) -> &'a str {
    match attribute(body, key) {
        Expression::String(value) => value,
        other => panic!("{key} is not a literal string: {other:?}"),
    }
}

fn object_key(key: &ObjectKey) -> &str {
    match key {
        ObjectKey::Expression(Expression::String(key)) => key,
        other => panic!("object key is not a literal string: {other:?}"),
    }
}

/// A map attribute whose keys and values are all literal strings.
fn string_map(body: &Body, key: &str) -> BTreeMap<String, String> {
    let Expression::Object(object) = attribute(body, key) else { panic!("{key} is not an object") };
    object
        .iter()
        .map(|(key, value)| match value {
            Expression::String(value) => (object_key(key).to_owned(), value.clone()),
            other => panic!("value of {key:?} is not a literal string: {other:?}"),
        })
        .collect()
}

fn traversal(body: &Body, key: &str) -> String {
    match attribute(body, key) {
        expression @ Expression::Traversal(_) => hcl::format::to_string(expression).unwrap(),
        other => panic!("{key} is not a reference: {other:?}"),
    }
}

fn top_level_blocks(body: &Body) -> BTreeSet<String> {
    body.blocks().map(block_name).collect()
}

fn block_name(block: &Block) -> String {
    let labels: Vec<&str> = block.labels().iter().map(|label| label.as_str()).collect();
    format!("{} {}", block.identifier(), labels.join(" ")).trim_end().to_owned()
}

/// Every block and attribute with the kind of its value (object keys left out, their count kept): two configs
/// with the same shape differ only in literal values.
fn shape(body: &Body) -> BTreeSet<String> {
    fn walk(body: &Body, path: &str, shape: &mut BTreeSet<String>) {
        for attribute in body.attributes() {
            shape.insert(format!("{path}{} = {}", attribute.key(), kind(attribute.expr())));
        }
        for block in body.blocks() {
            let path = format!("{path}{}/", block_name(block));
            shape.insert(path.clone());
            walk(block.body(), &path, shape);
        }
    }
    fn kind(expression: &Expression) -> String {
        match expression {
            Expression::String(_) => "string".into(),
            Expression::Number(_) => "number".into(),
            Expression::Bool(_) => "bool".into(),
            Expression::Array(items) => format!("[{}]", items.iter().map(kind).collect::<Vec<_>>().join(", ")),
            Expression::Object(object) => {
                let entries: Vec<String> = object
                    .iter()
                    .map(|(key, value)| {
                        // Identifier keys are structure; string keys carry data, so only their presence counts.
                        let key = match key {
                            ObjectKey::Identifier(identifier) => identifier.to_string(),
                            ObjectKey::Expression(Expression::String(_)) => "\"…\"".to_owned(),
                            other => format!("unexpected key {other:?}"),
                        };
                        format!("{key} = {}", kind(value))
                    })
                    .collect();
                format!("{{{}}}", entries.join(", "))
            }
            Expression::Traversal(_) => hcl::format::to_string(expression).unwrap(),
            other => format!("unexpected {other:?}"),
        }
    }
    let mut shape = BTreeSet::new();
    walk(body, "", &mut shape);
    shape
}

/// Attribute names and object keys anywhere in the body, lowercased.
fn all_keys(body: &Body) -> Vec<String> {
    fn expression_keys(expression: &Expression, keys: &mut Vec<String>) {
        match expression {
            Expression::Object(object) => {
                for (key, value) in object.iter() {
                    if let ObjectKey::Identifier(identifier) = key {
                        keys.push(identifier.to_lowercase());
                    }
                    expression_keys(value, keys);
                }
            }
            Expression::Array(items) => items.iter().for_each(|item| expression_keys(item, keys)),
            _ => {}
        }
    }
    let mut keys = Vec::new();
    for attribute in body.attributes() {
        keys.push(attribute.key().to_lowercase());
        expression_keys(attribute.expr(), &mut keys);
    }
    for block in body.blocks() {
        keys.extend(all_keys(block.body()));
    }
    keys
}

fn module_source(body: &Body, name: &str) -> String {
    string(block(body, "module", &[name]).body(), "source").to_owned()
}

/// Each pool of a module call's `worker_pools`: its name, machine type and maximum.
fn pools(module: &Body) -> Vec<(String, String, u64)> {
    let Expression::Object(pools) = attribute(module, "worker_pools") else { panic!("worker_pools is not an object") };
    pools
        .iter()
        .map(|(name, pool)| {
            let Expression::Object(pool) = pool else { panic!("pool {name:?} is not an object") };
            let field = |key: &str| {
                let named = |field: &ObjectKey| matches!(field, ObjectKey::Identifier(name) if name.as_str() == key);
                pool.iter().find(|(field, _)| named(field)).map(|(_, value)| value.clone()).unwrap()
            };
            let Expression::String(machine_type) = field("machine_type") else { panic!("machine_type") };
            let Expression::Number(max_size) = field("max_size") else { panic!("max_size") };
            (object_key(name).to_owned(), machine_type, max_size.as_u64().unwrap())
        })
        .collect()
}

#[test]
fn vanilla_kubeadm_calls_vpc_security_and_compute() {
    let runtime = vanilla();
    let body = parse(&render(&runtime));
    assert_eq!(
        top_level_blocks(&body),
        BTreeSet::from(
            [
                "terraform",
                "provider aws",
                "locals",
                "module vpc",
                "module security",
                "module compute",
                "output kubeconfig_ssm_parameter",
                "output api_endpoint",
            ]
            .map(String::from)
        )
    );
    for module in ["vpc", "security", "compute"] {
        assert_eq!(module_source(&body, module), format!("../modules/{module}"));
    }

    let compute = block(&body, "module", &["compute"]).body();
    assert!(
        matches!(attribute(compute, "control_plane_count"), Expression::Number(count) if count.as_u64() == Some(3))
    );
    assert_eq!(attribute(compute, "create_api_load_balancer"), &Expression::Bool(true));
    assert_eq!(string(compute, "ssm_parameter_prefix"), format!("/kubeopera/{}/", runtime.id));
    assert_eq!(string(compute, "kubernetes_version"), "1.34");
    assert_eq!(string(compute, "control_plane_instance_type"), "t3.large");
    assert_eq!(pools(compute), [("default".to_owned(), "t3.xlarge".to_owned(), 5)]);
    assert_eq!(string(compute, "pod_cidr"), "172.16.0.0/16");
    assert_eq!(
        attribute(compute, "availability_zones"),
        &Expression::Array(vec!["eu-central-1a".into(), "eu-central-1b".into()])
    );
    assert_eq!(traversal(compute, "tags"), "local.tags");
    assert_eq!(string(block(&body, "module", &["vpc"]).body(), "cidr_block"), "10.10.0.0/16");
    assert_eq!(
        traversal(block(&body, "output", &["kubeconfig_ssm_parameter"]).body(), "value"),
        "module.compute.kubeconfig_ssm_parameter"
    );
}

#[test]
fn a_single_control_plane_node_has_no_load_balancer() {
    let mut runtime = vanilla();
    runtime.cluster_config.control_plane.as_mut().unwrap().count = 1;
    let body = parse(&render(&runtime));
    assert_eq!(
        attribute(block(&body, "module", &["compute"]).body(), "create_api_load_balancer"),
        &Expression::Bool(false)
    );
}

#[test]
fn eks_calls_vpc_and_eks_with_the_default_network() {
    let body = parse(&render(&eks()));
    assert_eq!(
        top_level_blocks(&body),
        BTreeSet::from(
            [
                "terraform",
                "provider aws",
                "locals",
                "module vpc",
                "module eks",
                "output cluster_name",
                "output cluster_endpoint",
                "output cluster_certificate_authority_data",
            ]
            .map(String::from)
        )
    );
    assert_eq!(module_source(&body, "vpc"), "../modules/vpc");
    assert_eq!(module_source(&body, "eks"), "../modules/eks");
    assert_eq!(string(block(&body, "module", &["vpc"]).body(), "cidr_block"), "10.0.0.0/16");
    let eks = block(&body, "module", &["eks"]).body();
    assert_eq!(string(eks, "service_cidr"), "10.96.0.0/12");
    assert_eq!(pools(eks), [("default".to_owned(), "m5.large".to_owned(), 5)]);
    assert_eq!(traversal(eks, "subnet_ids"), "module.vpc.private_subnet_ids");
}

#[test]
fn gke_calls_gcp_network_and_gke() {
    let body = parse(&render(&gke()));
    assert_eq!(
        top_level_blocks(&body),
        BTreeSet::from(
            [
                "terraform",
                "provider google",
                "locals",
                "module gcp_network",
                "module gke",
                "output cluster_name",
                "output cluster_endpoint",
                "output cluster_ca_certificate",
                "output location",
            ]
            .map(String::from)
        )
    );
    assert_eq!(module_source(&body, "gcp_network"), "../modules/gcp-network");
    assert_eq!(module_source(&body, "gke"), "../modules/gke");

    let provider = block(&body, "provider", &["google"]).body();
    assert_eq!(string(provider, "project"), "my-project-1");
    assert_eq!(string(provider, "region"), "europe-west3");

    let network = block(&body, "module", &["gcp_network"]).body();
    assert_eq!(string(network, "subnet_cidr"), "10.0.0.0/16");
    assert_eq!(string(network, "pods_cidr"), "192.168.0.0/16");
    assert_eq!(string(network, "services_cidr"), "10.96.0.0/12");

    let gke = block(&body, "module", &["gke"]).body();
    assert_eq!(
        attribute(gke, "node_locations"),
        &Expression::Array(vec!["europe-west3-a".into(), "europe-west3-b".into()])
    );
    assert_eq!(traversal(gke, "labels"), "local.labels");
}

#[test]
fn aws_state_lives_in_the_clusters_own_s3_bucket() {
    for runtime in [vanilla(), eks()] {
        let body = parse(&render(&runtime));
        let backend = block(block(&body, "terraform", &[]).body(), "backend", &["s3"]).body();
        assert_eq!(string(backend, "bucket"), runtime.state_bucket, "the bucket the runtime recorded");
        assert_eq!(string(backend, "key"), "terraform.tfstate");
        assert_eq!(string(backend, "region"), runtime.cluster_config.region);
        assert_eq!(attribute(backend, "encrypt"), &Expression::Bool(true));
        assert_eq!(attribute(backend, "use_lockfile"), &Expression::Bool(true));
        assert_eq!(string(block(&body, "provider", &["aws"]).body(), "region"), runtime.cluster_config.region);
    }
}

#[test]
fn gcp_state_lives_in_the_clusters_own_gcs_bucket() {
    let runtime = gke();
    let body = parse(&render(&runtime));
    let backend = block(block(&body, "terraform", &[]).body(), "backend", &["gcs"]).body();
    assert_eq!(string(backend, "bucket"), "kubeopera-state-staging-team-a-gke-61863e05");
    assert_eq!(string(backend, "prefix"), "terraform");
}

#[test]
fn resources_are_tagged_with_the_runtime_and_the_users_labels() {
    let runtime = eks();
    let tags = string_map(block(&parse(&render(&runtime)), "locals", &[]).body(), "tags");
    assert_eq!(
        tags,
        BTreeMap::from(
            [
                ("app.kubernetes.io/part-of", "Payments"),
                ("owner", "team-a"),
                ("kubeopera.io/runtime-id", "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10"),
                ("kubeopera.io/runtime-name", "team-a-eks"),
            ]
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
        )
    );

    let labels = string_map(block(&parse(&render(&gke())), "locals", &[]).body(), "labels");
    assert_eq!(
        labels,
        BTreeMap::from(
            [
                ("app_kubernetes_io_part-of", "payments"),
                ("owner", "team-a"),
                ("kubeopera-runtime-id", "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10"),
                ("kubeopera-runtime-name", "team-a-gke"),
            ]
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
        )
    );
}

/// The AWS cluster modules confine their node roles to the runtime id the resources are tagged with (see
/// `modules::node_roles_cannot_write_the_provisioners_tags_or_tag_other_runtimes_resources`): the same tag's value.
#[test]
fn the_node_roles_are_confined_to_the_runtime_the_resources_are_tagged_with() {
    for (runtime, module) in [(vanilla(), "compute"), (eks(), "eks")] {
        let body = parse(&render(&runtime));
        let runtime_id = traversal(block(&body, "module", &[module]).body(), "runtime_id");
        assert_eq!(runtime_id, r#"local.tags["kubeopera.io/runtime-id"]"#, "{module}");
        let tags = string_map(block(&body, "locals", &[]).body(), "tags");
        assert_eq!(tags["kubeopera.io/runtime-id"], runtime.id.to_string(), "{module}");
    }
}

/// The ranges the runtime records (the request's, or the operator's it was given) reach the module of each
/// topology that opens the API to them: vanilla's security groups, EKS's public endpoint, GKE's authorized networks.
#[test]
fn the_runtimes_api_ranges_reach_the_module_that_opens_the_api() {
    for (runtime, module, input) in [
        (vanilla(), "security", "api_allowed_cidrs"),
        (eks(), "eks", "endpoint_public_access_cidrs"),
        (gke(), "gke", "master_authorized_cidrs"),
    ] {
        let recorded = runtime.cluster_config.api_allowed_cidrs.clone().expect("the example records its ranges");
        assert_eq!(recorded, provisioner::domain::EXAMPLE_API_ALLOWED_CIDRS);
        let body = parse(&render(&runtime));
        let expected = Expression::Array(recorded.iter().map(|cidr| cidr.as_str().into()).collect());
        assert_eq!(attribute(block(&body, "module", &[module]).body(), input), &expected, "{module}");
    }
}

#[test]
fn rendered_configs_match_their_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    for topology in TOPOLOGIES {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/{}.tf", topology.as_str()));
        let rendered = render(&runtime(topology)).files.remove("main.tf").unwrap();
        if update {
            std::fs::write(&path, &rendered).unwrap();
            continue;
        }
        let golden = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}; run with UPDATE_GOLDEN=1 to create it", path.display()));
        assert!(
            rendered == golden,
            "{} differs from the rendered configuration; if the change is intended, run \
             UPDATE_GOLDEN=1 cargo test -p provisioner --test integration render:: and review the diff.\n--- rendered:\n{rendered}",
            path.display()
        );
    }
}

/// The same runtime with hostile text in the name, the description, a label key and a label value.
fn hostilise(mut runtime: Runtime) -> Runtime {
    runtime.name = HOSTILE.to_owned();
    runtime.state_bucket = state_bucket_name(&runtime.cluster_config.environment, HOSTILE, runtime.id);
    runtime.description = Some(HOSTILE.to_owned());
    runtime.labels = Labels(BTreeMap::from([
        (format!("{HOSTILE}-key"), HOSTILE.to_owned()),
        ("owner".to_owned(), format!("{HOSTILE}-value")),
    ]));
    // Validation refuses anything but IPv4 CIDRs; the renderer does not rely on it.
    runtime.cluster_config.api_allowed_cidrs = Some(vec![HOSTILE.to_owned(), "203.0.113.0/24".to_owned()]);
    runtime
}

/// `runtime` with a second pool labelled and tainted with `text`, in its first zone.
fn with_labelled_pool(mut runtime: Runtime, text: &str) -> Runtime {
    let config = &mut runtime.cluster_config;
    let default = config.pools().remove(0);
    let zone =
        config.aws.as_ref().map_or_else(|| config.gcp.as_ref().unwrap().zones[0].clone(), |aws| aws.zones[0].clone());
    let labelled = NamedWorkerPool {
        name: format!("gpu{}", text.len()),
        zones: Some(vec![zone]),
        labels: Some(Labels(BTreeMap::from([(format!("{text}-key"), text.to_owned()), ("plain".into(), "a".into())]))),
        taints: Some(vec![Taint {
            key: text.to_owned(),
            value: Some(text.to_owned()),
            effect: TaintEffect::NoExecute,
        }]),
        spot: Some(true),
        ..default.clone()
    };
    config.worker_pool = None;
    config.worker_pools = Some(vec![default, labelled]);
    runtime
}

#[test]
fn hostile_pool_labels_and_taints_cannot_change_the_structure() {
    for topology in TOPOLOGIES {
        let benign = parse(&render(&with_labelled_pool(runtime(topology), "benign")));
        let hostile = parse(&render(&with_labelled_pool(runtime(topology), HOSTILE)));
        assert_eq!(shape(&hostile), shape(&benign), "{topology:?}");
        let module = ["eks", "compute", "gke"].iter().find_map(|name| {
            benign.blocks().find(|block| block.identifier() == "module" && block.labels()[0].as_str() == *name)
        });
        let names: Vec<String> =
            pools(module.expect("the cluster module").body()).into_iter().map(|pool| pool.0).collect();
        assert_eq!(names, ["default", "gpu6"], "{topology:?}");
    }
}

#[test]
fn hostile_values_cannot_change_the_structure() {
    for topology in TOPOLOGIES {
        let benign = parse(&render(&runtime(topology)));
        let hostile = parse(&render(&hostilise(runtime(topology))));
        assert_eq!(shape(&hostile), shape(&benign), "{topology:?}");
    }
}

#[test]
fn hostile_values_round_trip_as_literal_strings() {
    for topology in TOPOLOGIES {
        let runtime = hostilise(runtime(topology));
        let rendered = render(&runtime);
        let body = parse(&rendered);
        let locals = block(&body, "locals", &[]).body();
        assert_eq!(string(locals, "cluster_name"), HOSTILE, "{topology:?}");

        let cluster_module = match topology {
            Topology::VanillaKubeadm => "compute",
            Topology::Eks => "eks",
            Topology::Gke => "gke",
        };
        assert_eq!(string(block(&body, "module", &[cluster_module]).body(), "description"), HOSTILE);
        let (module, input) = match topology {
            Topology::VanillaKubeadm => ("security", "api_allowed_cidrs"),
            Topology::Eks => ("eks", "endpoint_public_access_cidrs"),
            Topology::Gke => ("gke", "master_authorized_cidrs"),
        };
        let ranges = Expression::Array(vec![HOSTILE.into(), "203.0.113.0/24".into()]);
        assert_eq!(attribute(block(&body, "module", &[module]).body(), input), &ranges, "{topology:?}");

        let manifest: serde_json::Value = serde_json::from_str(&rendered.files["runner.json"]).unwrap();
        assert_eq!(manifest["runtimeName"], HOSTILE);

        if topology == Topology::Gke {
            // GCP labels are mapped onto GCP's alphabet, so only that alphabet comes back.
            let labels = string_map(locals, "labels");
            assert_eq!(labels.len(), 4);
            for (key, value) in &labels {
                for text in [key, value] {
                    assert!(
                        text.len() <= 63
                            && text.bytes().all(|byte| matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-')),
                        "{text:?}"
                    );
                }
            }
        } else {
            let tags = string_map(locals, "tags");
            assert_eq!(tags[&format!("{HOSTILE}-key")], HOSTILE);
            assert_eq!(tags["owner"], format!("{HOSTILE}-value"));
            assert_eq!(tags["kubeopera.io/runtime-name"], HOSTILE);
            assert_eq!(tags.len(), 4);
        }
    }
}

#[test]
fn hostile_names_still_give_a_valid_state_bucket() {
    for topology in TOPOLOGIES {
        let runtime = hostilise(runtime(topology));
        let body = parse(&render(&runtime));
        let terraform = block(&body, "terraform", &[]).body();
        let backend = terraform.blocks().find(|block| block.identifier() == "backend").unwrap().body();
        let bucket = string(backend, "bucket");
        assert_eq!(bucket, runtime.state_bucket);
        assert!(bucket.len() <= 63 && bucket.bytes().all(|byte| matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'-')));
    }
}

#[test]
fn no_credentials_are_rendered() {
    const FORBIDDEN: [&str; 6] = ["secret", "access_key", "private_key", "password", "token", "credentials"];
    for topology in TOPOLOGIES {
        let runtime = runtime(topology);
        for action in [RunAction::Apply, RunAction::Destroy] {
            let rendered = test_support::render(&runtime, action);
            for key in all_keys(&parse(&rendered)) {
                assert!(!FORBIDDEN.iter().any(|word| key.contains(word)), "{topology:?} renders attribute {key}");
            }
            let manifest: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&rendered.files["runner.json"]).unwrap();
            for key in manifest.keys() {
                let key = key.to_lowercase();
                assert!(!FORBIDDEN.iter().any(|word| key.contains(word)), "runner.json has {key}");
            }
            for content in rendered.files.values() {
                assert!(!content.contains(&runtime.cluster_config.credential_id), "the credential reference leaks");
            }
        }
    }
}

#[test]
fn runner_json_tells_the_runner_what_to_do() {
    let runtime = vanilla();
    let rendered = test_support::render(&runtime, RunAction::Destroy);
    let manifest: serde_json::Value = serde_json::from_str(&rendered.files["runner.json"]).unwrap();
    assert_eq!(
        manifest,
        serde_json::json!({
            "action": "destroy",
            "topology": "vanilla_kubeadm",
            "cloud": "aws",
            "region": "eu-central-1",
            "stateBucket": "kubeopera-state-dev-team-a-vanilla-kubeadm-61863e05",
            "runtimeId": "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10",
            "runtimeName": "team-a-vanilla-kubeadm",
            "ssmParameterPrefix": "/kubeopera/0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10/",
            "provider": { "source": "hashicorp/aws", "version": runner_contract::providers::AWS_VERSION },
        })
    );
}

#[test]
fn file_names_are_configmap_keys_and_the_total_fits_a_configmap() {
    for topology in TOPOLOGIES {
        let rendered = render(&hostilise(runtime(topology)));
        let mut total = 0;
        for (name, content) in &rendered.files {
            assert!(name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-._".contains(&byte)), "{name}");
            total += name.len() + content.len();
        }
        assert!(total < 64 * 1024, "{topology:?} renders {total} bytes");
    }
}
