//! The Terraform modules under `resources/terraform/modules`, which the Job's init container clones to
//! `/workspace/modules` for the rendered root configurations:
//!
//! - they are `tofu fmt`-clean (`TEST_TOFU_BIN`) and every `.tf` file parses;
//! - their variables and outputs match what the rendered root configurations pass and read (a template and a
//!   module cannot drift apart), and every `var.`, `local.`, `data.` and resource reference inside a module
//!   resolves (there is no provider download here, so `tofu validate` cannot run);
//! - the vanilla bootstrap scripts pass shellcheck and fit EC2's 16 KB user data;
//! - the node roles' IAM policies, as tofu renders them, refuse the provisioner's tags, other runtimes' resources and
//!   every SSM parameter but the runtime's own and AWS's public ones to a cluster (evaluated by
//!   @cloud-copilot/iam-simulate through tests/iam/simulate.cjs, `TEST_IAM_TOOLS_DIR`: moto does not evaluate IAM
//!   conditions);
//!
//! The bootstrap scripts' coordination through SSM Parameter Store is [`super::control_plane_bootstrap`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hcl::expr::{Expression, TemplateExpr, TraversalOperator};
use hcl::template::{Directive, Element, Template};
use hcl::{Block, Body};
use provisioner::domain::{Cloud, Network, ProviderVersion, Runtime, Topology, WorkerPool};
use provisioner::render::RunAction;
use test_support::terraform::tofu_bin;

const MODULES_IN_JOB: &str = "../modules/";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn modules_dir() -> PathBuf {
    repo().join("resources/terraform/modules")
}

pub(crate) fn scripts_dir() -> PathBuf {
    modules_dir().join("compute/scripts")
}

pub(crate) fn run(command: &mut Command) -> std::process::Output {
    let description = format!("{command:?}");
    command.output().unwrap_or_else(|error| panic!("cannot run {description}: {error}"))
}

// ------------------------------------------------------------------------------------------------------------------
// Formatting and parsing

/// The renderer passes one `worker_pools` map to whichever module builds the cluster, so the three declare it alike;
/// OpenTofu has no way to share a variable's declaration between modules, this keeps the three copies one.
#[test]
fn every_cluster_module_declares_worker_pools_alike() {
    let declaration = |module: &str| {
        let text = std::fs::read_to_string(modules_dir().join(module).join("variables.tf")).unwrap();
        let start = text.find("variable \"worker_pools\" {").unwrap_or_else(|| panic!("{module} has no worker_pools"));
        let length = text[start..].find("\n}\n").expect("the declaration ends");
        text[start..start + length].to_owned()
    };
    let eks = declaration("eks");
    for module in ["compute", "gke"] {
        assert_eq!(declaration(module), eks, "{module}'s worker_pools differs from eks's");
    }
}

#[test]
fn modules_are_tofu_fmt_clean() {
    let output = run(Command::new(tofu_bin())
        .args(["fmt", "-check", "-recursive", "-diff"])
        .arg(modules_dir())
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .stdin(Stdio::null()));
    assert!(
        output.status.success(),
        "tofu fmt -check failed; run `tofu fmt -recursive resources/terraform/modules`:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The modules as parsed: folder name → the blocks of all its `.tf` files.
fn parse_modules() -> BTreeMap<String, Module> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(modules_dir()).expect("resources/terraform/modules exists") {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut files = Vec::new();
        for file in std::fs::read_dir(&path).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_some_and(|extension| extension == "tf") {
                let text = std::fs::read_to_string(&file).unwrap();
                let body: Body =
                    hcl::parse(&text).unwrap_or_else(|error| panic!("{} does not parse: {error}", file.display()));
                files.push((file.file_name().unwrap().to_string_lossy().into_owned(), body));
            }
        }
        modules.insert(name, Module { files });
    }
    modules
}

struct Module {
    files: Vec<(String, Body)>,
}

impl Module {
    fn blocks<'a>(&'a self, identifier: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
        self.files.iter().flat_map(move |(_, body)| body.blocks().filter(move |block| block.identifier() == identifier))
    }

    fn names(&self, identifier: &str) -> BTreeSet<String> {
        self.blocks(identifier).map(|block| label(block, 0)).collect()
    }

    fn file(&self, name: &str) -> &Body {
        &self.files.iter().find(|(file, _)| file == name).unwrap_or_else(|| panic!("no {name}")).1
    }
}

fn label(block: &Block, index: usize) -> String {
    block.labels().get(index).map(|label| label.as_str().to_owned()).unwrap_or_default()
}

fn has_attribute(body: &Body, key: &str) -> bool {
    body.attributes().any(|attribute| attribute.key() == key)
}

const EXPECTED_MODULES: [&str; 6] = ["compute", "eks", "gcp-network", "gke", "security", "vpc"];

#[test]
fn every_module_has_the_standard_files_and_documented_typed_variables() {
    let modules = parse_modules();
    assert_eq!(modules.keys().map(String::as_str).collect::<Vec<_>>(), EXPECTED_MODULES);
    for (name, module) in &modules {
        let files: BTreeSet<&str> = module.files.iter().map(|(file, _)| file.as_str()).collect();
        for required in ["main.tf", "variables.tf", "outputs.tf", "versions.tf"] {
            assert!(files.contains(required), "module {name} has no {required}");
        }
        for variable in module.blocks("variable") {
            let body = variable.body();
            assert!(has_attribute(body, "type"), "variable {} of module {name} has no type", label(variable, 0));
            assert!(
                has_attribute(body, "description"),
                "variable {} of module {name} has no description",
                label(variable, 0)
            );
        }
        for output in module.blocks("output") {
            assert!(
                has_attribute(output.body(), "description"),
                "output {} of module {name} has no description",
                label(output, 0)
            );
        }

        // The modules accept the major version line of the exact versions the root configurations pin.
        let terraform = module.file("versions.tf").blocks().find(|block| block.identifier() == "terraform").unwrap();
        let providers = terraform.body().blocks().find(|block| block.identifier() == "required_providers").unwrap();
        let pinned = ProviderVersion::pinned(if name.starts_with("g") { Cloud::Gcp } else { Cloud::Aws });
        let provider = pinned.name().to_owned();
        let line = format!("~> {}.0", pinned.version.split('.').next().unwrap());
        let expected = [("source", pinned.source.as_str()), ("version", line.as_str())];
        let requirement = providers
            .body()
            .attributes()
            .find(|attribute| attribute.key() == provider.as_str())
            .unwrap_or_else(|| panic!("module {name} does not require the {provider} provider"));
        let Expression::Object(requirement) = requirement.expr() else { panic!("{name}: {provider} is not an object") };
        for (key, value) in expected {
            let found = requirement
                .iter()
                .find(|(object_key, _)| matches!(object_key, hcl::ObjectKey::Identifier(id) if id.as_str() == key))
                .map(|(_, value)| value);
            assert_eq!(found, Some(&Expression::String(value.to_owned())), "module {name}: {provider}.{key}");
        }
    }
}

// ------------------------------------------------------------------------------------------------------------------
// The contract between the rendered root configurations and the modules

fn runtime(topology: Topology) -> Runtime {
    let mut runtime = Runtime::example(topology);
    let config = &mut runtime.cluster_config;
    config.worker_pool =
        Some(WorkerPool { machine_type: "t3.xlarge".into(), min_size: 1, max_size: 5, disk_size_gb: 80 });
    config.network = Some(Network {
        vpc_cidr: "10.10.0.0/16".into(),
        pod_cidr: "172.16.0.0/16".into(),
        service_cidr: "10.96.0.0/12".into(),
    });
    runtime
}

/// A reference in an expression: its root name and the attribute names that follow it (`module.vpc.vpc_id` is
/// root `module`, attributes `vpc`, `vpc_id`; an index or splat ends the attributes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Reference {
    root: String,
    attributes: Vec<String>,
}

fn references_in_body(body: &Body, found: &mut Vec<Reference>) {
    for attribute in body.attributes() {
        references(attribute.expr(), found);
    }
    for block in body.blocks() {
        references_in_body(block.body(), found);
    }
}

fn references(expression: &Expression, found: &mut Vec<Reference>) {
    match expression {
        Expression::Variable(variable) => {
            found.push(Reference { root: variable.as_str().to_owned(), attributes: vec![] });
        }
        Expression::Traversal(traversal) => {
            if let Expression::Variable(variable) = &traversal.expr {
                let attributes = traversal
                    .operators
                    .iter()
                    .map_while(|operator| match operator {
                        TraversalOperator::GetAttr(identifier) => Some(identifier.as_str().to_owned()),
                        _ => None,
                    })
                    .collect();
                found.push(Reference { root: variable.as_str().to_owned(), attributes });
            } else {
                references(&traversal.expr, found);
            }
            for operator in &traversal.operators {
                if let TraversalOperator::Index(index) = operator {
                    references(index, found);
                }
            }
        }
        Expression::Array(items) => items.iter().for_each(|item| references(item, found)),
        Expression::Object(object) => {
            for (key, value) in object.iter() {
                if let hcl::ObjectKey::Expression(key) = key {
                    references(key, found);
                }
                references(value, found);
            }
        }
        Expression::TemplateExpr(template) => template_references(template, found),
        Expression::FuncCall(call) => call.args.iter().for_each(|argument| references(argument, found)),
        Expression::Parenthesis(inner) => references(inner, found),
        Expression::Conditional(conditional) => {
            references(&conditional.cond_expr, found);
            references(&conditional.true_expr, found);
            references(&conditional.false_expr, found);
        }
        Expression::Operation(operation) => match operation.as_ref() {
            hcl::expr::Operation::Unary(unary) => references(&unary.expr, found),
            hcl::expr::Operation::Binary(binary) => {
                references(&binary.lhs_expr, found);
                references(&binary.rhs_expr, found);
            }
        },
        Expression::ForExpr(for_expr) => {
            references(&for_expr.collection_expr, found);
            for expression in [for_expr.key_expr.as_ref(), Some(&for_expr.value_expr), for_expr.cond_expr.as_ref()] {
                expression.into_iter().for_each(|expression| references(expression, found));
            }
        }
        _ => {}
    }
}

fn template_references(template: &TemplateExpr, found: &mut Vec<Reference>) {
    let template = Template::from_expr(template).unwrap_or_else(|error| panic!("template {template}: {error}"));
    template_elements(&template, found);
}

fn template_elements(template: &Template, found: &mut Vec<Reference>) {
    for element in template.elements() {
        match element {
            Element::Literal(_) => {}
            Element::Interpolation(interpolation) => references(&interpolation.expr, found),
            Element::Directive(directive) => match directive.as_ref() {
                Directive::If(directive) => {
                    references(&directive.cond_expr, found);
                    template_elements(&directive.true_template, found);
                    if let Some(false_template) = &directive.false_template {
                        template_elements(false_template, found);
                    }
                }
                Directive::For(directive) => {
                    references(&directive.collection_expr, found);
                    template_elements(&directive.template, found);
                }
            },
        }
    }
}

/// The module blocks of a rendered root configuration: local name → (module folder, inputs it sets).
fn module_calls(body: &Body) -> BTreeMap<String, (String, BTreeSet<String>)> {
    const META_ARGUMENTS: [&str; 5] = ["source", "version", "count", "for_each", "depends_on"];
    body.blocks()
        .filter(|block| block.identifier() == "module")
        .map(|block| {
            let source = block
                .body()
                .attributes()
                .find(|attribute| attribute.key() == "source")
                .map(|attribute| match attribute.expr() {
                    Expression::String(source) => source.clone(),
                    other => panic!("module source is not a literal string: {other:?}"),
                })
                .expect("module has a source");
            let folder = source
                .strip_prefix(MODULES_IN_JOB)
                .unwrap_or_else(|| panic!("module source {source} is not under {MODULES_IN_JOB}"))
                .to_owned();
            let inputs = block
                .body()
                .attributes()
                .map(|attribute| attribute.key().to_owned())
                .filter(|key| !META_ARGUMENTS.contains(&key.as_str()))
                .collect();
            (label(block, 0), (folder, inputs))
        })
        .collect()
}

/// Pods on a node never reach its instance metadata (and so the node role, which may write the cluster's SSM
/// parameters): every instance and launch template requires IMDSv2 tokens with a hop limit of 1, which a pod's
/// extra network hop cannot answer; host-network pods (the cloud controller manager, the CNI) still can.
#[test]
fn instance_metadata_is_out_of_reach_of_pods() {
    let mut checked = Vec::new();
    for (module_name, module) in parse_modules() {
        for resource in module.blocks("resource") {
            let kind = label(resource, 0);
            if kind != "aws_instance" && kind != "aws_launch_template" {
                continue;
            }
            let name = format!("{module_name}: {kind}.{}", label(resource, 1));
            let options = resource
                .body()
                .blocks()
                .find(|block| block.identifier() == "metadata_options")
                .unwrap_or_else(|| panic!("{name} has no metadata_options"));
            let value = |key: &str| {
                options.body().attributes().find(|attribute| attribute.key() == key).map(|attribute| attribute.expr())
            };
            assert_eq!(value("http_tokens"), Some(&Expression::from("required")), "{name}");
            assert_eq!(value("http_put_response_hop_limit"), Some(&Expression::from(1)), "{name}");
            checked.push(name);
        }
    }
    assert_eq!(checked.len(), 3, "the control-plane instances and both launch templates: {checked:?}");
}

#[test]
fn rendered_root_configurations_and_modules_agree() {
    let modules = parse_modules();
    let mut used = BTreeSet::new();
    for topology in [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke] {
        let rendered = test_support::render(&runtime(topology), RunAction::Apply);
        let body: Body = hcl::parse(&rendered.files["main.tf"]).expect("main.tf parses");
        let calls = module_calls(&body);
        assert!(!calls.is_empty(), "{topology:?} calls no module");

        for (local_name, (folder, inputs)) in &calls {
            let module = modules
                .get(folder)
                .unwrap_or_else(|| panic!("{topology:?}: module {local_name} uses missing folder {folder}"));
            used.insert(folder.clone());
            let variables = module.names("variable");
            let unknown: Vec<_> = inputs.difference(&variables).collect();
            assert!(unknown.is_empty(), "{topology:?}: module {folder} has no variables {unknown:?}");

            let required: BTreeSet<String> = module
                .blocks("variable")
                .filter(|variable| !has_attribute(variable.body(), "default"))
                .map(|variable| label(variable, 0))
                .collect();
            let missing: Vec<_> = required.difference(inputs).collect();
            assert!(missing.is_empty(), "{topology:?}: required variables {missing:?} of module {folder} are not set");
        }

        // Every module.<name>.<output> the root reads, wherever it is read (other modules' inputs, outputs).
        let mut found = Vec::new();
        references_in_body(&body, &mut found);
        let module_reads: BTreeSet<(String, String)> = found
            .into_iter()
            .filter(|reference| reference.root == "module")
            .map(|reference| {
                assert!(reference.attributes.len() >= 2, "{topology:?}: bare module reference {reference:?}");
                (reference.attributes[0].clone(), reference.attributes[1].clone())
            })
            .collect();
        assert!(!module_reads.is_empty(), "{topology:?} reads no module output");
        for (local_name, output) in module_reads {
            let (folder, _) = calls
                .get(&local_name)
                .unwrap_or_else(|| panic!("{topology:?} reads module.{local_name}, which it does not call"));
            assert!(
                modules[folder].names("output").contains(&output),
                "{topology:?} reads module.{local_name}.{output}, which module {folder} does not output"
            );
        }
    }
    assert_eq!(used.iter().map(String::as_str).collect::<Vec<_>>(), EXPECTED_MODULES, "a module no topology uses");
}

#[test]
fn references_inside_modules_resolve() {
    // Names a module may use as roots besides its own resources: Terraform's, and iterator variables.
    const BUILT_IN: [&str; 6] = ["path", "count", "each", "self", "terraform", "data"];
    for (name, module) in parse_modules() {
        let variables = module.names("variable");
        let locals: BTreeSet<String> = module
            .blocks("locals")
            .flat_map(|block| block.body().attributes().map(|attribute| attribute.key().to_owned()))
            .collect();
        let resources: BTreeSet<(String, String)> =
            module.blocks("resource").map(|block| (label(block, 0), label(block, 1))).collect();
        let data: BTreeSet<(String, String)> =
            module.blocks("data").map(|block| (label(block, 0), label(block, 1))).collect();

        let mut found = Vec::new();
        for (_, body) in &module.files {
            references_in_body(body, &mut found);
        }
        for reference in found {
            let first = reference.attributes.first().cloned().unwrap_or_default();
            let second = reference.attributes.get(1).cloned().unwrap_or_default();
            match reference.root.as_str() {
                "var" => assert!(variables.contains(&first), "module {name} uses undeclared var.{first}"),
                "local" => assert!(locals.contains(&first), "module {name} uses undefined local.{first}"),
                "data" => assert!(
                    data.contains(&(first.clone(), second.clone())),
                    "module {name} uses undeclared data.{first}.{second}"
                ),
                "module" => panic!("module {name} calls no modules but references module.{first}"),
                root if BUILT_IN.contains(&root) => {}
                root if root.starts_with("aws_") || root.starts_with("google_") || root == "terraform_data" => {
                    assert!(
                        resources.contains(&(root.to_owned(), first.clone())),
                        "module {name} uses undeclared resource {root}.{first}"
                    )
                }
                // Iterator variables of for expressions and dynamic blocks.
                _ => {}
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------------------------
// The bootstrap scripts

fn shell_scripts() -> Vec<PathBuf> {
    fn walk(dir: &Path, scripts: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, scripts);
            } else if path.extension().is_some_and(|extension| extension == "sh") {
                scripts.push(path);
            }
        }
    }
    let mut scripts = Vec::new();
    walk(&modules_dir(), &mut scripts);
    scripts.sort();
    scripts
}

#[test]
fn bootstrap_scripts_pass_shellcheck() {
    let scripts = shell_scripts();
    let names: Vec<String> =
        scripts.iter().map(|script| script.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["control-plane.sh", "lib.sh", "worker.sh"]);
    let output = Command::new("shellcheck")
        .args(["-x", "--severity=style", "--shell=bash"])
        .args(&scripts)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run shellcheck ({error}): install it (`make test-tools` installs it from apt)")
        });
    assert!(
        output.status.success(),
        "shellcheck found problems:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for script in &scripts {
        let text = std::fs::read_to_string(script).unwrap();
        assert!(text.starts_with("#!/usr/bin/env bash\n"), "{} has no bash shebang", script.display());
        if !script.ends_with("lib.sh") {
            assert!(text.contains("\nset -euo pipefail\n"), "{} does not set -euo pipefail", script.display());
        }
        // The scripts go to the nodes verbatim: a Terraform template sequence would mean they are not.
        assert!(!text.contains("%{"), "{} contains a Terraform template directive", script.display());
    }
}

/// The compressed scripts leave room in EC2's 16 KB of user data for the cloud-config and the env file (the
/// compute module also checks the exact size in a precondition at apply time). Measured with tofu's own
/// `base64gzip`, which the module uses.
#[test]
fn bootstrap_user_data_fits_the_ec2_limit() {
    for (role, scripts) in [("control plane", ["lib.sh", "control-plane.sh"]), ("worker", ["lib.sh", "worker.sh"])] {
        let expression = scripts
            .iter()
            .map(|script| format!("length(base64gzip(file({:?})))", scripts_dir().join(script).display().to_string()))
            .collect::<Vec<_>>()
            .join(" + ");
        let printed = tofu_console(&expression);
        let size: usize = printed.parse().unwrap_or_else(|_| panic!("tofu console printed {printed:?}"));
        // Room left for the cloud-config around the scripts (~500 bytes) and the env file (~1.5 KB base64).
        assert!(size <= 12 * 1024, "the {role} scripts take {size} bytes of user data compressed");
    }
}

/// What `tofu console` prints for a one-line `expression`, evaluated in an empty folder (functions and literals
/// only), trimmed.
fn tofu_console(expression: &str) -> String {
    let folder = tempfile::tempdir().unwrap();
    let mut child = Command::new(tofu_bin())
        .arg("console")
        .current_dir(folder.path())
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tofu console");
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "{expression}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "tofu console failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

// ------------------------------------------------------------------------------------------------------------------
// The node roles' IAM policies, evaluated

const RUNTIME_ID: &str = "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10";
const OTHER_RUNTIME_ID: &str = "0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a11";
const CLUSTER_NAME: &str = "team-a";
const CLUSTER_TAG: &str = "kubernetes.io/cluster/team-a";
const ARN_PREFIX: &str = "arn:aws:ec2:eu-west-1:123456789012";
const ELB_ARN_PREFIX: &str = "arn:aws:elasticloadbalancing:eu-west-1:123456789012";
const SSM_ARN_PREFIX: &str = "arn:aws:ssm:eu-west-1:123456789012";

/// AmazonSSMManagedInstanceCore (v2, unchanged since 2019), which the compute module attaches to both vanilla node
/// roles for Session Manager: its GetParameter and GetParameters on `*` are what the guard must take back.
const SSM_MANAGED_INSTANCE_CORE: &str = r#"{
  "Version": "2012-10-17",
  "Statement": [
    {
      "Effect": "Allow",
      "Action": [
        "ssm:DescribeAssociation", "ssm:GetDeployablePatchSnapshotForInstance", "ssm:GetDocument",
        "ssm:DescribeDocument", "ssm:GetManifest", "ssm:GetParameter", "ssm:GetParameters", "ssm:ListAssociations",
        "ssm:ListInstanceAssociations", "ssm:PutInventory", "ssm:PutComplianceItems", "ssm:PutConfigurePackageResult",
        "ssm:UpdateAssociationStatus", "ssm:UpdateInstanceAssociationStatus", "ssm:UpdateInstanceInformation"
      ],
      "Resource": "*"
    },
    {
      "Effect": "Allow",
      "Action": [
        "ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel"
      ],
      "Resource": "*"
    },
    {
      "Effect": "Allow",
      "Action": [
        "ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage",
        "ec2messages:GetEndpoint", "ec2messages:GetMessages", "ec2messages:SendReply"
      ],
      "Resource": "*"
    }
  ]
}"#;

/// The folder tools/iam-test-tools.sh printed (`TEST_IAM_TOOLS_DIR`): @cloud-copilot/iam-simulate, an IAM policy
/// simulator that evaluates conditions, which moto's IAM does not.
fn iam_tools_dir() -> PathBuf {
    let dir = std::env::var_os("TEST_IAM_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TEST_IAM_TOOLS_DIR is not set: install the IAM policy simulator with tools/iam-test-tools.sh and set it \
             to the folder it prints (`make test-really-local` does both)"
        )
    });
    assert!(
        dir.join("node_modules/@cloud-copilot/iam-simulate").is_dir(),
        "TEST_IAM_TOOLS_DIR={} has no node_modules/@cloud-copilot/iam-simulate",
        dir.display()
    );
    dir
}

/// Each node role's policy documents (JSON text) as tofu renders the modules' templates (which the modules must
/// render, the guard with the variables given here), for runtime [`RUNTIME_ID`] and cluster [`CLUSTER_NAME`]. The
/// vanilla roles also have AmazonSSMManagedInstanceCore ([`SSM_MANAGED_INSTANCE_CORE`]). The EKS node role's
/// permissions are AWS managed policies, which AWS changes; a policy that allows everything stands in for them, so
/// the guard alone must refuse.
fn node_roles() -> BTreeMap<&'static str, Vec<String>> {
    let template = |module: &str, file: &str, values: &str| {
        let main_tf = std::fs::read_to_string(modules_dir().join(module).join("main.tf")).unwrap();
        let call = format!("templatefile(\"${{path.module}}/policies/{file}\"");
        assert!(main_tf.contains(&call), "module {module} does not render policies/{file}");
        let path = modules_dir().join(module).join("policies").join(file).display().to_string();
        format!("templatefile({path:?}, {{ {values} }})")
    };
    // The compute module's runtime_ssm_arn and, below it, ssm_arn (whose last part is a creation's id).
    let runtime_parameters_arn = format!("{SSM_ARN_PREFIX}:parameter/kubeopera/{RUNTIME_ID}");
    let ssm_arn = format!("{runtime_parameters_arn}/generation");
    let guard_variables = BTreeMap::from(
        [
            ("compute", format!("{runtime_parameters_arn:?}"), "local.runtime_ssm_arn"),
            ("eks", "null".to_owned(), "null"),
        ]
        .map(|(module, value, in_module)| {
            let passed = guard_template_variables(module);
            let keys: Vec<&str> = passed.keys().map(String::as_str).collect();
            assert_eq!(keys, ["partition", "runtime_id", "runtime_parameters_arn"], "module {module} passes the guard");
            assert_eq!(passed["runtime_parameters_arn"], in_module, "module {module} passes the guard");
            (module, format!("runtime_id = {RUNTIME_ID:?}, partition = \"aws\", runtime_parameters_arn = {value}"))
        }),
    );
    let templates = [
        (
            "control_plane",
            template(
                "compute",
                "control-plane.json.tftpl",
                &format!("ssm_arn = {ssm_arn:?}, cluster_name = {CLUSTER_NAME:?}, runtime_id = {RUNTIME_ID:?}"),
            ),
        ),
        ("worker", template("compute", "worker.json.tftpl", &format!("ssm_arn = {ssm_arn:?}"))),
        ("compute_guard", template("compute", "runtime-guard.json.tftpl", &guard_variables["compute"])),
        ("eks_guard", template("eks", "runtime-guard.json.tftpl", &guard_variables["eks"])),
    ];
    let object = templates.iter().map(|(name, call)| format!("{name} = {call}")).collect::<Vec<_>>().join(", ");
    // One line of JSON: tofu prints it as a quoted string whose escapes are JSON's.
    let printed = tofu_console(&format!("jsonencode({{ {object} }})"));
    let encoded: String = serde_json::from_str(&printed).unwrap_or_else(|error| panic!("{error}: {printed}"));
    let mut documents: BTreeMap<String, String> = serde_json::from_str(&encoded).unwrap();
    let mut take = |name: &str| documents.remove(name).unwrap();
    let allow_everything = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
    let compute_guard = take("compute_guard");
    let session_manager = SSM_MANAGED_INSTANCE_CORE.to_owned();
    BTreeMap::from([
        ("control-plane", vec![take("control_plane"), compute_guard.clone(), session_manager.clone()]),
        ("worker", vec![take("worker"), compute_guard, session_manager]),
        ("EKS node", vec![take("eks_guard"), allow_everything.to_owned()]),
    ])
}

/// The variables `module` passes to `templatefile` for its `runtime-guard` policy: name → expression as HCL.
fn guard_template_variables(module: &str) -> BTreeMap<String, String> {
    let modules = parse_modules();
    let guard = modules[module]
        .blocks("resource")
        .find(|block| label(block, 0) == "aws_iam_role_policy" && label(block, 1) == "runtime_guard")
        .unwrap_or_else(|| panic!("module {module} has no aws_iam_role_policy.runtime_guard"));
    let policy = guard.body().attributes().find(|attribute| attribute.key() == "policy").expect("a policy").expr();
    let Expression::FuncCall(call) = policy else { panic!("module {module}'s guard policy is {policy:?}") };
    let Some(Expression::Object(variables)) = call.args.get(1) else {
        panic!("module {module}'s guard policy is not a templatefile call with an object: {call:?}")
    };
    variables
        .iter()
        .map(|(key, value)| {
            let hcl::ObjectKey::Identifier(key) = key else { panic!("module {module}: guard variable {key:?}") };
            (key.as_str().to_owned(), hcl::format::to_string(value).unwrap())
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
enum Decision {
    Allowed,
    /// By a Deny statement, whatever else the role is granted.
    ExplicitlyDenied,
    /// No statement allows it.
    ImplicitlyDenied,
}

/// A request a node could make: the action, the resource's ARN and what the request and the resource carry.
struct Request {
    what: &'static str,
    action: &'static str,
    resource: String,
    /// Tags the request writes or removes (`aws:TagKeys`, and `aws:RequestTag/<key>` when it has a value).
    request_tags: Vec<(&'static str, Option<String>)>,
    /// Tags the resource carries (`aws:ResourceTag/<key>`).
    resource_tags: Vec<(String, String)>,
}

fn request(what: &'static str, action: &'static str, resource: String) -> Request {
    Request { what, action, resource, request_tags: vec![], resource_tags: vec![] }
}

impl Request {
    fn writing(mut self, key: &'static str, value: &str) -> Self {
        self.request_tags.push((key, Some(value.to_owned())));
        self
    }

    fn removing(mut self, key: &'static str) -> Self {
        self.request_tags.push((key, None));
        self
    }

    fn of_runtime(self, runtime_id: &str) -> Self {
        self.tagged("kubeopera.io/runtime-id", runtime_id)
    }

    fn of_cluster(self, cluster_name: &str) -> Self {
        self.tagged(&format!("kubernetes.io/cluster/{cluster_name}"), "owned")
    }

    fn tagged(mut self, key: &str, value: &str) -> Self {
        self.resource_tags.push((key.to_owned(), value.to_owned()));
        self
    }

    fn context(&self) -> serde_json::Value {
        let mut context = serde_json::Map::new();
        if !self.request_tags.is_empty() {
            let keys: Vec<&str> = self.request_tags.iter().map(|(key, _)| *key).collect();
            context.insert("aws:TagKeys".into(), keys.into());
        }
        for (key, value) in &self.request_tags {
            if let Some(value) = value {
                context.insert(format!("aws:RequestTag/{key}"), value.as_str().into());
            }
        }
        for (key, value) in &self.resource_tags {
            context.insert(format!("aws:ResourceTag/{key}"), value.as_str().into());
        }
        context.into()
    }
}

fn instance() -> String {
    format!("{ARN_PREFIX}:instance/i-0123456789abcdef0")
}

fn security_group() -> String {
    format!("{ARN_PREFIX}:security-group/sg-0123456789abcdef0")
}

fn volume() -> String {
    format!("{ARN_PREFIX}:volume/vol-0123456789abcdef0")
}

fn network_interface() -> String {
    format!("{ARN_PREFIX}:network-interface/eni-0123456789abcdef0")
}

/// A Classic Load Balancer, what the cloud controller manager creates for a Service by default.
fn load_balancer() -> String {
    format!("{ELB_ARN_PREFIX}:loadbalancer/a0123456789abcdef0123456789abcde")
}

/// The SSM parameter (or path) `name`, which starts with a slash.
fn parameter(name: &str) -> String {
    format!("{SSM_ARN_PREFIX}:parameter{name}")
}

/// What a vanilla runtime's nodes publish (`name` below `/kubeopera/<runtime_id>/<creation>/`; the names of
/// scripts/lib.sh), or the path itself when `name` is empty.
fn runtime_parameter(runtime_id: &str, name: &str) -> String {
    parameter(&format!("/kubeopera/{runtime_id}/generation{}{name}", if name.is_empty() { "" } else { "/" }))
}

/// An AWS public parameter, which the compute module reads for the nodes' AMI. IAM names public parameters without
/// an account (`arn:aws:ssm:<region>::parameter/aws/service/...`), which the simulator refuses for the parameter
/// resource type (its account part must not be empty); the guard exempts both forms.
fn public_parameter() -> String {
    parameter("/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64")
}

/// Evaluates each (role, request, expected decision) with tests/iam/simulate.cjs and fails with every case whose
/// decision differs, or that the simulator refused, or where it ignored part of the request's context (a case that
/// would otherwise pass without its condition keys).
fn assert_decisions(cases: &[(&str, Request, Decision)]) {
    let roles = node_roles();
    let input: Vec<serde_json::Value> = cases
        .iter()
        .map(|(role, request, _)| {
            serde_json::json!({
                "policies": roles[role],
                "action": request.action,
                "resource": request.resource,
                "context": request.context(),
            })
        })
        .collect();
    let mut child = Command::new("node")
        .arg(repo().join("tests/iam/simulate.cjs"))
        .env("IAM_TOOLS_DIR", iam_tools_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node (Node.js)");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(serde_json::to_string(&input).unwrap().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "simulate.cjs failed: {}", String::from_utf8_lossy(&output.stderr));

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Evaluated {
        result: Option<Decision>,
        #[serde(default)]
        ignored_context_keys: Vec<String>,
        error: Option<String>,
    }
    let evaluated: Vec<Evaluated> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(evaluated.len(), cases.len());
    let wrong: Vec<String> = cases
        .iter()
        .zip(&evaluated)
        .filter_map(|((role, request, expected), evaluated)| {
            let problem = if let Some(error) = &evaluated.error {
                format!("the simulator refused it: {error}")
            } else if !evaluated.ignored_context_keys.is_empty() {
                format!("the simulator ignored {:?}", evaluated.ignored_context_keys)
            } else if evaluated.result != Some(*expected) {
                format!("{:?}, expected {expected:?}", evaluated.result)
            } else {
                return None;
            };
            Some(format!("{role}: {} ({}): {problem}", request.what, request.action))
        })
        .collect();
    assert!(wrong.is_empty(), "{} of {} decisions are wrong:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}

/// Finding 1 of the 2026-12b security review: from a node, a tenant's cluster-admin could tag another runtime's
/// resources with their own runtime's id (and the deprovisioning's sweep would delete them). No node role may write
/// or remove a kubeopera.io/ tag on any resource, on creation or after, nor tag anything that carries another
/// runtime's id, whatever else the role is granted.
#[test]
fn node_roles_cannot_write_the_provisioners_tags_or_tag_other_runtimes_resources() {
    let compute_guard = std::fs::read_to_string(modules_dir().join("compute/policies/runtime-guard.json.tftpl"));
    let eks_guard = std::fs::read_to_string(modules_dir().join("eks/policies/runtime-guard.json.tftpl"));
    assert_eq!(compute_guard.unwrap(), eks_guard.unwrap(), "the compute and eks modules' guards differ");

    use Decision::*;
    let mut cases = Vec::new();
    for role in ["control-plane", "worker", "EKS node"] {
        cases.extend([
            (
                role,
                request("forging another runtime's instance as this one's", "ec2:CreateTags", instance())
                    .of_runtime(OTHER_RUNTIME_ID)
                    .writing("kubeopera.io/runtime-id", RUNTIME_ID),
                ExplicitlyDenied,
            ),
            (
                role,
                request("any kubeopera.io/ tag on an untagged resource", "ec2:CreateTags", security_group())
                    .writing("kubeopera.io/anything", "x"),
                ExplicitlyDenied,
            ),
            (
                role,
                request("removing this runtime's id from its own instance", "ec2:DeleteTags", instance())
                    .of_runtime(RUNTIME_ID)
                    .removing("kubeopera.io/runtime-id"),
                ExplicitlyDenied,
            ),
            (
                role,
                request("this cluster's tag on another runtime's security group", "ec2:CreateTags", security_group())
                    .of_runtime(OTHER_RUNTIME_ID)
                    .writing(CLUSTER_TAG, "owned"),
                ExplicitlyDenied,
            ),
            (
                role,
                request("a kubeopera.io/ tag on a load balancer", "elasticloadbalancing:AddTags", load_balancer())
                    .writing("kubeopera.io/runtime-id", RUNTIME_ID),
                ExplicitlyDenied,
            ),
            (
                role,
                request(
                    "a load balancer created with another runtime's id",
                    "elasticloadbalancing:CreateLoadBalancer",
                    load_balancer(),
                )
                .writing("kubeopera.io/runtime-id", OTHER_RUNTIME_ID),
                ExplicitlyDenied,
            ),
        ]);
    }
    cases.extend([
        // The VPC CNI (AmazonEKS_CNI_Policy) tags network interfaces anywhere.
        (
            "EKS node",
            request("a kubeopera.io/ tag on a network interface", "ec2:CreateTags", network_interface())
                .writing("kubeopera.io/runtime-id", RUNTIME_ID),
            ExplicitlyDenied,
        ),
        (
            "EKS node",
            request("the VPC CNI's own tags on a network interface", "ec2:CreateTags", network_interface())
                .writing("cluster.k8s.amazonaws.com/name", CLUSTER_NAME),
            Allowed,
        ),
        // What the cloud controller manager does for a Service of type LoadBalancer.
        (
            "control-plane",
            request("this cluster's tag on a new security group", "ec2:CreateTags", security_group())
                .writing(CLUSTER_TAG, "owned"),
            Allowed,
        ),
        (
            "control-plane",
            request("a security group created with this cluster's tag", "ec2:CreateSecurityGroup", security_group())
                .writing(CLUSTER_TAG, "owned"),
            Allowed,
        ),
        (
            "control-plane",
            request(
                "a load balancer created with this cluster's tag",
                "elasticloadbalancing:CreateLoadBalancer",
                load_balancer(),
            )
            .writing(CLUSTER_TAG, "owned")
            .writing("kubernetes.io/service-name", "default/web"),
            Allowed,
        ),
    ]);
    assert_decisions(&cases);
}

/// The control-plane role (the AWS cloud controller manager's) changes and deletes only what carries this runtime's
/// id or this cluster's tag, and nothing that carries another runtime's id, even with this cluster's tag on it; the
/// EKS node role (the VPC CNI's network interfaces) nothing of another runtime's either.
#[test]
fn node_roles_change_and_delete_only_their_own_runtimes_and_clusters_resources() {
    use Decision::*;
    let deletes = [
        ("ec2:DeleteVolume", volume()),
        ("ec2:DeleteSecurityGroup", security_group()),
        ("ec2:AuthorizeSecurityGroupIngress", security_group()),
        ("ec2:ModifyInstanceAttribute", instance()),
        ("elasticloadbalancing:DeleteLoadBalancer", load_balancer()),
    ];
    let mut cases = Vec::new();
    for (action, resource) in deletes {
        cases.extend([
            (
                "control-plane",
                request("another runtime's resource", action, resource.clone()).of_runtime(OTHER_RUNTIME_ID),
                ExplicitlyDenied,
            ),
            (
                "control-plane",
                request("another runtime's resource with this cluster's tag", action, resource.clone())
                    .of_runtime(OTHER_RUNTIME_ID)
                    .of_cluster(CLUSTER_NAME),
                ExplicitlyDenied,
            ),
            ("control-plane", request("an untagged resource", action, resource.clone()), ImplicitlyDenied),
            (
                "control-plane",
                request("another cluster's resource", action, resource.clone()).of_cluster("team-b"),
                ImplicitlyDenied,
            ),
            (
                "control-plane",
                request("this cluster's resource", action, resource.clone()).of_cluster(CLUSTER_NAME),
                Allowed,
            ),
            ("control-plane", request("this runtime's resource", action, resource).of_runtime(RUNTIME_ID), Allowed),
        ]);
    }
    for action in ["ec2:DeleteNetworkInterface", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute"] {
        cases.extend([
            (
                "EKS node",
                request("another runtime's network interface", action, network_interface())
                    .of_runtime(OTHER_RUNTIME_ID),
                ExplicitlyDenied,
            ),
            ("EKS node", request("a network interface of no runtime", action, network_interface()), Allowed),
        ]);
    }
    assert_decisions(&cases);
}

/// Found while taking tag control away from the nodes (#52): AmazonSSMManagedInstanceCore, on every vanilla and EKS
/// node role, allows ssm:GetParameter and ssm:GetParameters on `*`, so from a node (a tenant's cluster-admin reaches
/// it from a hostNetwork pod) another vanilla runtime's join token, certificate key and admin kubeconfig were
/// readable (SecureStrings under the default aws/ssm key, which SSM decrypts for whoever may read them). No node role
/// reads, writes, deletes, labels or tags a parameter outside its runtime's path but AWS's public ones; the control
/// plane still reads and writes its own, the workers read their join parameters, and the SSM agent's own calls
/// (Session Manager, Run Command) stay allowed.
#[test]
fn node_roles_use_no_ssm_parameter_but_their_own_runtimes_and_the_public_ones() {
    use Decision::*;
    let other = |name: &str| runtime_parameter(OTHER_RUNTIME_ID, name);
    let own = |name: &str| runtime_parameter(RUNTIME_ID, name);
    let mut cases = Vec::new();
    for role in ["control-plane", "worker", "EKS node"] {
        cases.extend([
            (
                role,
                request("another runtime's admin kubeconfig", "ssm:GetParameter", other("kubeconfig")),
                ExplicitlyDenied,
            ),
            (role, request("another runtime's join token", "ssm:GetParameters", other("join/token")), ExplicitlyDenied),
            (
                role,
                request(
                    "another runtime's certificate key",
                    "ssm:GetParameter",
                    other("control-plane/certificate-key"),
                ),
                ExplicitlyDenied,
            ),
            (
                role,
                request("another runtime's join parameters by path", "ssm:GetParametersByPath", other("join")),
                ExplicitlyDenied,
            ),
            (
                role,
                request("another runtime's parameters by path", "ssm:GetParametersByPath", other("")),
                ExplicitlyDenied,
            ),
            // A recursive read of a path returns everything below it, whatever is denied on the parameters.
            (
                role,
                request("every runtime's parameters by path", "ssm:GetParametersByPath", parameter("/kubeopera")),
                ExplicitlyDenied,
            ),
            (
                role,
                request("another runtime's earlier kubeconfigs", "ssm:GetParameterHistory", other("kubeconfig")),
                ExplicitlyDenied,
            ),
            (
                role,
                request("a kubeconfig planted for another runtime", "ssm:PutParameter", other("kubeconfig")),
                ExplicitlyDenied,
            ),
            (
                role,
                request("another runtime's join token deleted", "ssm:DeleteParameter", other("join/token")),
                ExplicitlyDenied,
            ),
            (
                role,
                request("another runtime's kubeconfig labelled", "ssm:LabelParameterVersion", other("kubeconfig")),
                ExplicitlyDenied,
            ),
            (
                role,
                request("another runtime's kubeconfig tagged", "ssm:AddTagsToResource", other("kubeconfig")),
                ExplicitlyDenied,
            ),
            (
                role,
                request("a parameter outside the provisioner", "ssm:GetParameter", parameter("/prod/db/password")),
                ExplicitlyDenied,
            ),
            (role, request("the latest Amazon Linux AMI", "ssm:GetParameter", public_parameter()), Allowed),
            (role, request("the latest Amazon Linux AMI", "ssm:GetParameters", public_parameter()), Allowed),
            // The SSM agent's own calls: registration, Session Manager's channels, Run Command's messages,
            // associations and documents.
            (role, request("the SSM agent's registration", "ssm:UpdateInstanceInformation", instance()), Allowed),
            (role, request("a session's control channel", "ssmmessages:CreateControlChannel", "*".into()), Allowed),
            (role, request("a session's data channel", "ssmmessages:OpenDataChannel", "*".into()), Allowed),
            (role, request("Run Command's messages", "ec2messages:GetMessages", "*".into()), Allowed),
            (role, request("the instance's associations", "ssm:ListAssociations", "*".into()), Allowed),
            (
                role,
                request(
                    "Session Manager's shell document",
                    "ssm:GetDocument",
                    format!("{SSM_ARN_PREFIX}:document/SSM-SessionManagerRunShell"),
                ),
                Allowed,
            ),
        ]);
    }
    cases.extend([
        // What scripts/control-plane.sh reads and publishes.
        ("control-plane", request("its admin kubeconfig", "ssm:GetParameter", own("kubeconfig")), Allowed),
        ("control-plane", request("its admin kubeconfig", "ssm:PutParameter", own("kubeconfig")), Allowed),
        (
            "control-plane",
            request("its certificate key", "ssm:GetParameter", own("control-plane/certificate-key")),
            Allowed,
        ),
        ("control-plane", request("its join marker", "ssm:PutParameter", own("control-plane/1/joined")), Allowed),
        ("control-plane", request("its join parameters", "ssm:GetParametersByPath", own("join")), Allowed),
        (
            "control-plane",
            request("its API servers' authentication configuration", "ssm:GetParameter", own(AUTHENTICATION_CONFIG)),
            Allowed,
        ),
        // What scripts/worker.sh reads; nothing it writes.
        ("worker", request("its join parameters", "ssm:GetParametersByPath", own("join")), Allowed),
        ("worker", request("its join token", "ssm:GetParameter", own("join/token")), Allowed),
        ("worker", request("node 0's join marker", "ssm:GetParameters", own("control-plane/0/joined")), Allowed),
        ("worker", request("its admin kubeconfig", "ssm:PutParameter", own("kubeconfig")), ImplicitlyDenied),
        // What AmazonSSMManagedInstanceCore would let it read, and it must not.
        ("worker", request("its admin kubeconfig", "ssm:GetParameter", own("kubeconfig")), ExplicitlyDenied),
        (
            "worker",
            request("its certificate key", "ssm:GetParameters", own("control-plane/certificate-key")),
            ExplicitlyDenied,
        ),
        (
            "worker",
            request("its certificate key's history", "ssm:GetParameterHistory", own("control-plane/certificate-key")),
            ExplicitlyDenied,
        ),
        // EKS runtimes publish no parameters: the path a vanilla runtime of the same id would use is refused too.
        ("EKS node", request("its runtime's path", "ssm:GetParameter", own("kubeconfig")), ExplicitlyDenied),
    ]);
    assert_decisions(&cases);
}

/// The parameter the compute module publishes the API servers' authentication configuration in, below SSM_PREFIX.
pub(crate) const AUTHENTICATION_CONFIG: &str = "control-plane/authentication-config";
