//! The configurations the renderer writes meet the real providers: hashicorp/aws and hashicorp/google built from
//! the Go module proxy, installed from their filesystem mirror with a lock file (`init -lockfile=readonly`, as the
//! runner does), and the real modules. For every topology and the option combinations the renderer produces
//! (vanilla kubeadm with one and three control-plane nodes, EKS, GKE; the default and a custom network):
//! `init`, `validate` (a warning fails the test) and `plan`. The AWS topologies are then applied and destroyed on
//! moto, with their state in the real S3 backend on moto as terraform-runner keeps it; a second plan after the
//! apply may show only moto's known differences (below); a hibernation and a wake-up are applied (workers to zero
//! and back to the minimum, a vanilla control plane stopped and started); every change an upgrade accepts is planned
//! in place and applied (EKS: version, node group, launch template; vanilla: the workers' group, rolled by an
//! instance refresh); after the destroy nothing of the cluster is left.
//! GKE is validated and planned only (there is no GCP emulator), as provisioned and as a hibernation and a wake-up
//! render it: its state lives in fake-gcs-server.
//!
//! Differences a second plan shows on moto only (moto 5.2.5 answers differently from AWS), none of them a change
//! a real AWS account would plan; the test fails on any other difference, and on a replacement forced by
//! anything else:
//! - `aws_vpc_security_group_ingress_rule` / `_egress_rule` `description`: moto does not return it;
//! - `aws_launch_template` `tag_specifications`: moto returns the tag specifications differently;
//! - `aws_instance` `associate_public_ip_address`: moto gives a control-plane node in a private subnet a public
//!   address although the module asks for none (a replacement; its load balancer attachments follow), and
//!   `vpc_security_group_ids`: moto returns none for an instance in a VPC;
//! - `aws_autoscaling_group` `capacity_reservation_specification`: moto returns no preference where AWS says "".

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use provisioner::domain::state_bucket::state_bucket_name;
use provisioner::domain::{ControlPlane, Network, OperationType, ProviderVersion, Runtime, Topology};
use provisioner::render::RunAction;
use runner_contract::plan::{PlanRisk, PlanSummary};
use serde_json::Value;
use test_support::gcp::FakeGcs;
use test_support::moto::MotoServer;
use test_support::terraform::{test_providers, tofu_bin};

/// Attributes a plan after apply shows changed on moto although nothing changed (see the module documentation).
pub(super) const MOTO_ONLY_DIFFERENCES: &[(&str, &str)] = &[
    ("aws_vpc_security_group_ingress_rule", "description"),
    ("aws_vpc_security_group_egress_rule", "description"),
    ("aws_launch_template", "tag_specifications"),
    ("aws_instance", "associate_public_ip_address"),
    ("aws_instance", "vpc_security_group_ids"),
    ("aws_autoscaling_group", "capacity_reservation_specification"),
];

fn modules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("resources/terraform/modules")
}

fn custom_network() -> Network {
    Network { vpc_cidr: "10.20.0.0/16".into(), pod_cidr: "172.20.0.0/16".into(), service_cidr: "10.100.0.0/16".into() }
}

/// The example runtime of `topology` with `network` (None: the renderer's defaults), named after the case so that
/// state buckets and cloud names differ between cases.
pub(super) fn runtime(topology: Topology, name: &str, network: Option<Network>) -> Runtime {
    let mut runtime = Runtime::example(topology);
    runtime.name = name.to_owned();
    runtime.state_bucket = state_bucket_name(&runtime.cluster_config.environment, name, runtime.id);
    runtime.cluster_config.network = network;
    runtime
}

/// A rendered configuration in a folder of its own, ready for `tofu`.
pub(super) struct Configuration {
    /// Holds `run` and `modules`; removed on drop.
    _workspace: tempfile::TempDir,
    run: PathBuf,
    runtime: Runtime,
    env: Vec<(String, String)>,
}

impl Configuration {
    /// The renderer's `main.tf` for `runtime` in `<workspace>/run` with the repository's modules at
    /// `<workspace>/modules`, where the Job's init container clones them, and the lock file of its provider.
    pub(super) fn render(runtime: Runtime, env: Vec<(String, String)>) -> Configuration {
        let rendered = test_support::render(&runtime, RunAction::Apply);
        let workspace = tempfile::tempdir().expect("temporary folder");
        std::os::unix::fs::symlink(modules_dir(), workspace.path().join("modules")).unwrap();
        let run = workspace.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("main.tf"), &rendered.files["main.tf"]).unwrap();
        let provider = ProviderVersion::pinned(runtime.cluster_config.topology.cloud());
        test_providers().install_lock_file(&provider, &run);
        let mut env = env;
        env.extend([
            ("TF_CLI_CONFIG_FILE".to_owned(), test_providers().cli_config.display().to_string()),
            ("TF_IN_AUTOMATION".to_owned(), "1".to_owned()),
            ("CHECKPOINT_DISABLE".to_owned(), "1".to_owned()),
        ]);
        Configuration { _workspace: workspace, run, runtime, env }
    }

    /// Runs `tofu <args>` here; panics with its output unless it succeeds, returns its standard output.
    pub(super) fn tofu(&self, args: &[&str]) -> String {
        let output = Command::new(tofu_bin())
            .args(args)
            .current_dir(&self.run)
            .env_remove("TF_CLI_ARGS")
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("cannot run tofu {}: {error}", args.join(" ")));
        assert!(
            output.status.success(),
            "tofu {} of {} failed ({}):\n{}\n{}",
            args.join(" "),
            self.runtime.name,
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("tofu prints UTF-8")
    }

    /// Renders `runtime` (the same cluster, maybe changed) over this configuration's `main.tf`, as a run of
    /// `operation_type` on the existing cluster does.
    pub(super) fn rerender(&mut self, operation_type: OperationType, runtime: Runtime) {
        let rendered = test_support::render_for(&runtime, operation_type, RunAction::Apply);
        std::fs::write(self.run.join("main.tf"), &rendered.files["main.tf"]).unwrap();
        self.runtime = runtime;
    }

    /// `init` exactly as the runner runs it, then `validate`, which must report neither an error nor a warning.
    pub(super) fn init_and_validate(&self) {
        self.tofu(&["init", "-input=false", "-no-color", "-lockfile=readonly"]);
        let validation: Value = serde_json::from_str(&self.tofu(&["validate", "-json", "-no-color"])).unwrap();
        assert_eq!(validation["valid"], true, "{}: {validation:#}", self.runtime.name);
        assert_eq!(validation["diagnostics"], serde_json::json!([]), "{}: warnings fail the test", self.runtime.name);
    }

    /// `plan` into a file; returns the planned changes of managed resources (`tofu show -json`; data sources
    /// read during apply are left out).
    pub(super) fn plan(&self, file: &str) -> Vec<Value> {
        self.tofu(&["plan", "-input=false", "-no-color", "-lock-timeout=60s", &format!("-out={file}")]);
        let plan: Value = serde_json::from_str(&self.tofu(&["show", "-json", "-no-color", file])).unwrap();
        let changes = plan["resource_changes"].as_array().cloned().unwrap_or_default();
        changes.into_iter().filter(|change| change["mode"] == "managed").collect()
    }
}

/// The addresses of planned changes whose actions are exactly `actions`.
fn with_actions<'a>(changes: &'a [Value], actions: &[&str]) -> Vec<&'a str> {
    changes
        .iter()
        .filter(|change| change["change"]["actions"] == serde_json::json!(actions))
        .map(|change| change["address"].as_str().unwrap_or_default())
        .collect()
}

/// The top-level attributes whose known planned values differ from the stored ones (unknown values are
/// consequences of a change, not its cause; an empty list or map and null mean the same to Terraform).
pub(super) fn changed_attributes(change: &Value) -> BTreeSet<String> {
    fn empty(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Array(items) => items.is_empty(),
            Value::Object(entries) => entries.is_empty(),
            _ => false,
        }
    }
    fn differs(before: &Value, after: &Value, unknown: &Value) -> bool {
        if unknown == &Value::Bool(true) || (empty(before) && empty(after)) {
            return false;
        }
        match (before, after) {
            (Value::Object(before), Value::Object(after)) => before.keys().chain(after.keys()).any(|key| {
                differs(before.get(key).unwrap_or(&Value::Null), after.get(key).unwrap_or(&Value::Null), &unknown[key])
            }),
            (Value::Array(before_items), Value::Array(after_items)) if before_items.len() == after_items.len() => {
                before_items.iter().zip(after_items).enumerate().any(|(index, (b, a))| differs(b, a, &unknown[index]))
            }
            _ => before != after,
        }
    }
    let change = &change["change"];
    let (before, after, unknown) = (&change["before"], &change["after"], &change["after_unknown"]);
    if change["actions"] == serde_json::json!(["delete", "create"]) {
        // A replacement's planned values are the configuration only; what forces it is the cause. A forcing path
        // whose new value is unknown follows from another replacement (an instance's new id), checked there.
        return change["replace_paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|path| path[0].as_str())
            .filter(|attribute| unknown[*attribute] != Value::Bool(true))
            .map(str::to_owned)
            .collect();
    }
    let keys: BTreeSet<&String> =
        before.as_object().into_iter().chain(after.as_object()).flat_map(|entries| entries.keys()).collect();
    keys.into_iter()
        .filter(|key| differs(&before[key.as_str()], &after[key.as_str()], &unknown[key.as_str()]))
        .cloned()
        .collect()
}

/// The cluster's own state bucket, which terraform-runner creates before init.
pub(super) fn create_state_bucket(moto: &MotoServer, runtime: &Runtime) {
    let region = runtime.cluster_config.region.as_str();
    let location = format!("LocationConstraint={region}");
    let bucket = runtime.state_bucket.as_str();
    moto.aws(&[
        "s3api",
        "create-bucket",
        "--bucket",
        bucket,
        "--region",
        region,
        "--create-bucket-configuration",
        &location,
    ]);
}

/// Validates, plans, applies, plans again and destroys `runtime` on its own moto; then checks that nothing of
/// the cluster is left. Returns the resource counts (planned, applied, destroyed) for the log.
async fn apply_and_destroy_on_moto(runtime: Runtime) -> (usize, usize, usize) {
    let moto = MotoServer::start().await;
    create_state_bucket(&moto, &runtime);
    let configuration = Configuration::render(runtime, moto.env());
    configuration.init_and_validate();

    let planned = configuration.plan("apply.tfplan");
    let creates = with_actions(&planned, &["create"]);
    assert_eq!(creates.len(), planned.len(), "a new cluster only creates: {planned:#?}");
    assert_plans_the_api_ranges(&planned, &configuration.runtime);

    let applied = configuration.tofu(&["apply", "-input=false", "-no-color", "-lock-timeout=60s", "apply.tfplan"]);
    let added = resource_count(&applied, "added");
    assert_eq!(added, creates.len(), "apply creates what the plan said:\n{applied}");

    // A second plan: every difference must be a known one of moto's, including what forces a replacement.
    // The leak check finds the cluster while it exists.
    let existing = remaining(&moto, &configuration.runtime);
    let own = match configuration.runtime.cluster_config.topology {
        Topology::Eks => "EKS clusters",
        _ => "running instances",
    };
    for kind in ["VPCs", "subnets", "Elastic IPs", "IAM roles", own] {
        assert!(existing.contains_key(kind), "the leak check finds no {kind} of the applied cluster: {existing:#?}");
    }
    if control_plane_count(&configuration.runtime) == 3 {
        assert_spread_behind_the_load_balancer(&moto, &configuration.runtime);
    }

    let replanned = configuration.plan("again.tfplan");
    let mut unexpected = Vec::new();
    for change in &replanned {
        let actions = &change["change"]["actions"];
        if actions == &serde_json::json!(["no-op"]) {
            continue;
        }
        let address = change["address"].as_str().unwrap_or_default();
        let resource_type = change["type"].as_str().unwrap_or_default();
        let attributes = changed_attributes(change);
        let known =
            attributes.iter().all(|attribute| MOTO_ONLY_DIFFERENCES.contains(&(resource_type, attribute.as_str())));
        if !known {
            unexpected.push(format!("{address} {actions}: {attributes:?}"));
        }
    }
    assert!(
        unexpected.is_empty(),
        "{}: differences after apply that are not moto's: {unexpected:#?}",
        configuration.runtime.name
    );

    // Hibernation and wake-up, applied: the workers go to zero and come back at the minimum, a vanilla control
    // plane stops and starts again; in place, nothing destroyed.
    let mut configuration = configuration;
    let current = configuration.runtime.clone();
    for (operation_type, hibernated) in [(OperationType::Hibernate, true), (OperationType::WakeUp, false)] {
        configuration.rerender(operation_type, current.clone());
        let plan = configuration.plan("sleep.tfplan");
        let destructive = destructive_changes(&plan);
        assert!(destructive.is_empty(), "{}: {operation_type} destroys or replaces {destructive:#?}", current.name);
        configuration.tofu(&["apply", "-input=false", "-no-color", "-lock-timeout=60s", "sleep.tfplan"]);
        assert_workers(&moto, &current, hibernated);
    }

    // Every change an upgrade may make of this topology is planned in place (nothing is destroyed or replaced
    // but for moto's own differences above), and applied.
    configuration.rerender(OperationType::Upgrade, upgraded(&current));
    let upgrade = configuration.plan("upgrade.tfplan");
    let destructive = destructive_changes(&upgrade);
    assert!(destructive.is_empty(), "{}: the upgrade plan destroys or replaces {destructive:#?}", current.name);
    assert!(!with_actions(&upgrade, &["update"]).is_empty(), "{}: the upgrade changes something", current.name);
    if current.cluster_config.topology == Topology::Eks {
        assert_eks_risks(&mut configuration, &current, &upgrade);
    }
    let applied = configuration.tofu(&["apply", "-input=false", "-no-color", "-lock-timeout=60s", "upgrade.tfplan"]);
    // Vanilla's new API range is a security group rule of its own.
    let added = added + resource_count(&applied, "added") - resource_count(&applied, "destroyed");
    if current.cluster_config.topology == Topology::Eks {
        assert_eks_upgraded(&moto, &configuration.runtime);
    } else {
        assert_vanilla_upgraded(&moto, &configuration.runtime);
    }

    let destroyed = configuration.tofu(&["destroy", "-auto-approve", "-input=false", "-no-color", "-lock-timeout=60s"]);
    let destroyed = resource_count(&destroyed, "destroyed");
    assert_eq!(destroyed, added, "destroy removes what the applies created");
    let left = remaining(&moto, &configuration.runtime);
    assert!(left.is_empty(), "{}: destroy left {left:#?}", configuration.runtime.name);
    (planned.len(), added, destroyed)
}

/// The plan of a new cluster opens its API to exactly the ranges its runtime records, by the real provider's
/// planned values: vanilla one security group rule on port 6443 per range, EKS the public endpoint's access CIDRs,
/// GKE the master authorized networks (and not Google Cloud's public addresses).
fn assert_plans_the_api_ranges(planned: &[Value], runtime: &Runtime) {
    let recorded: BTreeSet<String> =
        runtime.cluster_config.api_allowed_cidrs.clone().expect("the runtime records its ranges").into_iter().collect();
    let strings = |values: &Value| -> BTreeSet<String> {
        values.as_array().expect("a list").iter().map(|value| value.as_str().unwrap().to_owned()).collect()
    };
    let after = |resource_type: &str, name: &str| -> Vec<&Value> {
        planned
            .iter()
            .filter(|change| change["type"] == resource_type && change["name"] == name)
            .map(|change| &change["change"]["after"])
            .collect()
    };
    let opened: BTreeSet<String> = match runtime.cluster_config.topology {
        Topology::VanillaKubeadm => after("aws_vpc_security_group_ingress_rule", "api_from_clients")
            .into_iter()
            .map(|rule| {
                assert_eq!((&rule["from_port"], &rule["to_port"]), (&Value::from(6443), &Value::from(6443)), "{rule}");
                rule["cidr_ipv4"].as_str().unwrap().to_owned()
            })
            .collect(),
        Topology::Eks => strings(&after("aws_eks_cluster", "this")[0]["vpc_config"][0]["public_access_cidrs"]),
        Topology::Gke => {
            let networks = &after("google_container_cluster", "this")[0]["master_authorized_networks_config"][0];
            assert_eq!(networks["gcp_public_cidrs_access_enabled"], false, "{networks:#}");
            let blocks = networks["cidr_blocks"].as_array().expect("cidr_blocks");
            blocks.iter().map(|block| block["cidr_block"].as_str().unwrap().to_owned()).collect()
        }
    };
    assert_eq!(opened, recorded, "{}: the API opens to exactly the recorded ranges", runtime.name);
}

/// The planned deletions and replacements that moto's own differences do not explain.
/// The runner's assessment of planned `changes` (managed ones, as [`Configuration::plan`] returns them).
pub(super) fn assessed(changes: &[Value]) -> PlanSummary {
    let show = serde_json::to_vec(&serde_json::json!({ "resource_changes": changes })).unwrap();
    runner_contract::assess::summarize(&show, &[]).unwrap()
}

/// By the real provider's plans: an EKS version upgrade is risky (the cluster is updated in place, nothing
/// protected goes), and a new network address range, which replaces the VPC, is destructive.
/// Leaves `configuration` rendered for the upgrade again.
fn assert_eks_risks(configuration: &mut Configuration, current: &Runtime, upgrade: &[Value]) {
    let upgrade = assessed(upgrade);
    eprintln!("EKS upgrade assessed: {:?}, risky {:?}", upgrade.risk, upgrade.risky);
    assert_eq!(upgrade.risk, Some(PlanRisk::Risky), "{upgrade:#?}");
    assert!(upgrade.risky.iter().any(|address| address.ends_with("aws_eks_cluster.this")), "{upgrade:#?}");
    assert!(upgrade.destructive.is_empty(), "{upgrade:#?}");

    // Other ranges for the API: the cluster's public endpoint is updated in place, nothing else changes.
    let mut narrowed = current.clone();
    narrowed.cluster_config.api_allowed_cidrs = Some(vec!["192.0.2.0/24".into()]);
    configuration.rerender(OperationType::Upgrade, narrowed);
    let changes: Vec<Value> = configuration
        .plan("ranges.tfplan")
        .into_iter()
        .filter(|change| change["change"]["actions"] != serde_json::json!(["no-op"]))
        .filter(|change| {
            !changed_attributes(change).iter().all(|attribute| {
                MOTO_ONLY_DIFFERENCES.contains(&(change["type"].as_str().unwrap_or_default(), attribute.as_str()))
            })
        })
        .collect();
    assert_eq!(changes.len(), 1, "only the cluster changes: {changes:#?}");
    assert_eq!(changes[0]["change"]["actions"], serde_json::json!(["update"]), "{changes:#?}");
    assert_eq!(
        changes[0]["change"]["after"]["vpc_config"][0]["public_access_cidrs"],
        serde_json::json!(["192.0.2.0/24"])
    );
    assert_eq!(assessed(&changes).risk, Some(PlanRisk::Risky), "a protected resource updated in place");
    configuration.rerender(OperationType::Upgrade, upgraded(current));
    configuration.plan("upgrade.tfplan");

    let Some(network) = &current.cluster_config.network else { return };
    let mut moved = upgraded(current);
    moved.cluster_config.network = Some(Network { vpc_cidr: "10.30.0.0/16".into(), ..network.clone() });
    configuration.rerender(OperationType::Upgrade, moved);
    let replacing = assessed(&configuration.plan("network.tfplan"));
    eprintln!("EKS network change assessed: {:?}, destructive {:?}", replacing.risk, replacing.destructive);
    assert_eq!(replacing.risk, Some(PlanRisk::Destructive), "{replacing:#?}");
    assert!(replacing.destructive.iter().any(|address| address.ends_with("aws_vpc.this")), "{replacing:#?}");
    configuration.rerender(OperationType::Upgrade, upgraded(current));
    configuration.plan("upgrade.tfplan");
}

fn destructive_changes(plan: &[Value]) -> Vec<String> {
    let mut destructive = Vec::new();
    for change in plan {
        let actions = change["change"]["actions"].as_array().cloned().unwrap_or_default();
        if !actions.contains(&Value::from("delete")) {
            continue;
        }
        let resource_type = change["type"].as_str().unwrap_or_default();
        let causes = changed_attributes(change);
        if !causes.iter().all(|attribute| MOTO_ONLY_DIFFERENCES.contains(&(resource_type, attribute.as_str()))) {
            destructive.push(format!("{} {actions:?}: {causes:?}", change["address"].as_str().unwrap_or_default()));
        }
    }
    destructive
}

/// Asks moto what `runtime`'s workers (and a vanilla control plane) look like.
pub(super) fn describe(moto: &MotoServer, runtime: &Runtime, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--region", runtime.cluster_config.region.as_str(), "--output", "json"]);
    serde_json::from_str(&moto.aws(&all)).expect("aws prints JSON")
}

/// Hibernated: no worker wanted and a minimum of 0 (the maximum kept), a vanilla control plane stopped. Awake:
/// the workers at the configured minimum, the control plane running.
fn assert_workers(moto: &MotoServer, runtime: &Runtime, hibernated: bool) {
    let pool = &runtime.cluster_config.main_pool().unwrap();
    let wanted = if hibernated { 0 } else { pool.min_size };
    let (name, state) = (runtime.name.as_str(), if hibernated { "hibernated" } else { "awake" });
    if runtime.cluster_config.topology == Topology::Eks {
        let group = describe(
            moto,
            runtime,
            &["eks", "describe-nodegroup", "--cluster-name", name, "--nodegroup-name", "workers"],
        );
        let scaling = &group["nodegroup"]["scalingConfig"];
        assert_eq!(
            (&scaling["minSize"], &scaling["desiredSize"], &scaling["maxSize"]),
            (&Value::from(wanted), &Value::from(wanted), &Value::from(pool.max_size)),
            "{state}: {group}"
        );
        return;
    }
    let query = format!("AutoScalingGroups[?starts_with(AutoScalingGroupName, '{name}-worker-')]");
    let groups = describe(moto, runtime, &["autoscaling", "describe-auto-scaling-groups", "--query", &query]);
    let group = &groups[0];
    assert_eq!(
        (&group["MinSize"], &group["DesiredCapacity"], &group["MaxSize"]),
        (&Value::from(wanted), &Value::from(wanted), &Value::from(pool.max_size)),
        "{state}: {groups}"
    );
    let in_service = group["Instances"].as_array().map_or(0, |instances| instances.len());
    assert_eq!(in_service, wanted as usize, "{state}: {groups}");
    let expected = if hibernated { "stopped" } else { "running" };
    let states = control_plane_instances(moto, runtime, "State.Name");
    assert_eq!(states, Value::from(vec![expected; control_plane_count(runtime)]), "{state}: the control plane");
}

/// `attribute` of each control-plane instance of `runtime` that is not terminated (instances moto's own differences
/// had replaced, see above, are).
fn control_plane_instances(moto: &MotoServer, runtime: &Runtime, attribute: &str) -> Value {
    let control_plane = format!("Name=tag:Name,Values={}-control-plane-*", runtime.name);
    let query = format!("Reservations[].Instances[].{attribute}");
    let live = "Name=instance-state-name,Values=pending,running,stopping,stopped";
    describe(moto, runtime, &["ec2", "describe-instances", "--filters", &control_plane, live, "--query", &query])
}

/// A highly available control plane: each node in a subnet of its own (one per zone), all of them the targets of
/// the API's load balancer.
fn assert_spread_behind_the_load_balancer(moto: &MotoServer, runtime: &Runtime) {
    let subnets: BTreeSet<String> =
        serde_json::from_value(control_plane_instances(moto, runtime, "SubnetId")).expect("subnet ids");
    assert_eq!(subnets.len(), 3, "one control-plane node per zone: {subnets:?}");
    let mut instances: Vec<String> =
        serde_json::from_value(control_plane_instances(moto, runtime, "InstanceId")).expect("instance ids");
    let groups =
        describe(moto, runtime, &["elbv2", "describe-target-groups", "--query", "TargetGroups[].TargetGroupArn"]);
    let group = groups[0].as_str().expect("the API's target group");
    let health = describe(moto, runtime, &["elbv2", "describe-target-health", "--target-group-arn", group]);
    let mut targets: Vec<String> = health["TargetHealthDescriptions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|target| target["Target"]["Id"].as_str().map(str::to_owned))
        .collect();
    instances.sort();
    targets.sort();
    assert_eq!(targets, instances, "the load balancer sends the API's traffic to every control-plane node");
}

fn control_plane_count(runtime: &Runtime) -> usize {
    runtime.cluster_config.control_plane.as_ref().map_or(0, |control_plane| control_plane.count as usize)
}

/// `runtime` with every change an upgrade of its topology accepts: the next Kubernetes version, the worker pool's
/// machine type, sizes and disk, and (vanilla_kubeadm) the control plane's machine type and one more API range.
fn upgraded(runtime: &Runtime) -> Runtime {
    let mut upgraded = runtime.clone();
    let config = &mut upgraded.cluster_config;
    // One more range for the API: vanilla adds a security group rule (applied); EKS updates its cluster's endpoint
    // in place (planned only in `assert_eks_risks`: moto's UpdateClusterConfig answers without the update the
    // provider waits for, so the EKS upgrade keeps its ranges here).
    if config.topology == Topology::VanillaKubeadm {
        config.api_allowed_cidrs.as_mut().expect("the runtime records its ranges").push("192.0.2.0/24".into());
    }
    let pool = config.worker_pool.as_mut().expect("the single pool");
    pool.machine_type = "m6i.large".into();
    pool.min_size += 1;
    pool.max_size += 2;
    pool.disk_size_gb += 30;
    config.kubernetes_version = "1.35".into();
    if let Some(control_plane) = &mut config.control_plane {
        control_plane.machine_type = "m6i.xlarge".into();
    }
    upgraded
}

/// What the applied upgrade changed in moto: the EKS cluster and its node group run the new version, the node
/// group its new size and its launch template's new version (which rolls the nodes).
fn assert_eks_upgraded(moto: &MotoServer, runtime: &Runtime) {
    let json = |args: &[&str]| describe(moto, runtime, args);
    let cluster = json(&["eks", "describe-cluster", "--name", &runtime.name]);
    assert_eq!(cluster["cluster"]["version"], "1.35", "{cluster}");
    let group = json(&["eks", "describe-nodegroup", "--cluster-name", &runtime.name, "--nodegroup-name", "workers"]);
    let group = &group["nodegroup"];
    assert_eq!(group["version"], "1.35", "{group}");
    assert_eq!(group["scalingConfig"]["maxSize"], runtime.cluster_config.main_pool().unwrap().max_size, "{group}");
    let template = &group["launchTemplate"]["id"];
    let templates =
        json(&["ec2", "describe-launch-templates", "--launch-template-ids", template.as_str().unwrap_or_default()]);
    let latest = templates["LaunchTemplates"][0]["LatestVersionNumber"].to_string();
    assert_eq!(
        group["launchTemplate"]["version"].as_str(),
        Some(latest.as_str()),
        "the nodes roll to the new template: {group}"
    );
}

/// What the applied upgrade changed in moto: the control plane's nodes are told the new version, the Auto Scaling
/// Group has its new bounds and a new launch template version, and its instance refresh replaced every worker with
/// one of that version.
fn assert_vanilla_upgraded(moto: &MotoServer, runtime: &Runtime) {
    let prefix = format!("/kubeopera/{}/", runtime.id);
    let targets = describe(
        moto,
        runtime,
        &[
            "ssm",
            "get-parameters-by-path",
            "--path",
            &prefix,
            "--recursive",
            "--query",
            "Parameters[?ends_with(Name, '/control-plane/upgrade-target')].Value",
        ],
    );
    assert_eq!(targets, serde_json::json!([runtime.cluster_config.kubernetes_version]), "the upgrade target");
    let types = control_plane_instances(moto, runtime, "InstanceType");
    assert_eq!(
        types,
        serde_json::json!(vec!["m6i.xlarge"; control_plane_count(runtime)]),
        "the control plane's machines"
    );
    let pool = &runtime.cluster_config.main_pool().unwrap();
    let query = format!("AutoScalingGroups[?starts_with(AutoScalingGroupName, '{}-worker-')]", runtime.name);
    let groups = describe(moto, runtime, &["autoscaling", "describe-auto-scaling-groups", "--query", &query]);
    let group = &groups[0];
    assert_eq!(
        (&group["MinSize"], &group["MaxSize"]),
        (&Value::from(pool.min_size), &Value::from(pool.max_size)),
        "{group}"
    );
    let template = group["LaunchTemplate"]["LaunchTemplateId"].as_str().unwrap_or_default();
    let templates = describe(moto, runtime, &["ec2", "describe-launch-templates", "--launch-template-ids", template]);
    let latest = templates["LaunchTemplates"][0]["LatestVersionNumber"].to_string();
    assert_eq!(group["LaunchTemplate"]["Version"].as_str(), Some(latest.as_str()), "{group}");
    let instances = group["Instances"].as_array().cloned().unwrap_or_default();
    assert_eq!(instances.len(), pool.min_size as usize, "{group}");
    for instance in &instances {
        assert_eq!(instance["LaunchTemplate"]["Version"].as_str(), Some(latest.as_str()), "rolled: {group}");
    }
}

/// `Resources: 3 added, 0 changed, 0 destroyed.` / `Resources: 3 destroyed.`
fn resource_count(output: &str, what: &str) -> usize {
    let line =
        output.lines().find(|line| line.contains("Resources: ")).unwrap_or_else(|| panic!("no summary:\n{output}"));
    let (_, counts) = line.split_once("Resources: ").unwrap();
    counts
        .split(", ")
        .find_map(|part| part.trim_end_matches('.').strip_suffix(&format!(" {what}")))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {what} count in {line:?}"))
}

/// The leak check: asks moto for every kind of resource the AWS modules create; returns the kinds found.
pub(super) fn remaining(moto: &MotoServer, runtime: &Runtime) -> BTreeMap<&'static str, Value> {
    let region = runtime.cluster_config.region.as_str();
    let query = |service: &str, command: &str, query: &str, extra: &[&str]| -> Value {
        let mut args = vec![service, command, "--region", region, "--output", "json", "--query", query];
        args.extend_from_slice(extra);
        let found: Value = serde_json::from_str(&moto.aws(&args)).unwrap_or(Value::Null);
        assert!(found.is_array(), "{service} {command} --query {query} gave {found}, not a list");
        found
    };
    let runtime_tag = format!("Name=tag:kubeopera.io/runtime-id,Values={}", runtime.id);
    let checks: BTreeMap<&'static str, Value> = BTreeMap::from([
        ("VPCs", query("ec2", "describe-vpcs", "Vpcs[?IsDefault==`false`].VpcId", &[])),
        ("subnets", query("ec2", "describe-subnets", "Subnets[].SubnetId", &["--filters", &runtime_tag])),
        (
            "running instances",
            query("ec2", "describe-instances", "Reservations[].Instances[?State.Name!='terminated'][].InstanceId", &[]),
        ),
        (
            "security groups",
            query("ec2", "describe-security-groups", "SecurityGroups[?GroupName!='default'].GroupId", &[]),
        ),
        ("launch templates", query("ec2", "describe-launch-templates", "LaunchTemplates[].LaunchTemplateName", &[])),
        ("Elastic IPs", query("ec2", "describe-addresses", "Addresses[].AllocationId", &[])),
        ("NAT gateways", query("ec2", "describe-nat-gateways", "NatGateways[?State!='deleted'].NatGatewayId", &[])),
        (
            "internet gateways",
            query(
                "ec2",
                "describe-internet-gateways",
                "InternetGateways[].InternetGatewayId",
                &["--filters", &runtime_tag],
            ),
        ),
        (
            "auto scaling groups",
            query("autoscaling", "describe-auto-scaling-groups", "AutoScalingGroups[].AutoScalingGroupName", &[]),
        ),
        ("load balancers", query("elbv2", "describe-load-balancers", "LoadBalancers[].LoadBalancerArn", &[])),
        ("target groups", query("elbv2", "describe-target-groups", "TargetGroups[].TargetGroupArn", &[])),
        ("EKS clusters", query("eks", "list-clusters", "clusters", &[])),
        (
            "IAM roles",
            query("iam", "list-roles", "Roles[?starts_with(Path, '/aws-service-role/')==`false`].RoleName", &[]),
        ),
        ("instance profiles", query("iam", "list-instance-profiles", "InstanceProfiles[].InstanceProfileName", &[])),
        (
            "customer managed IAM policies",
            query("iam", "list-policies", "Policies[].PolicyName", &["--scope", "Local"]),
        ),
        (
            "SSM parameters under the cluster's prefix",
            query(
                "ssm",
                "get-parameters-by-path",
                "Parameters[].Name",
                &["--path", &format!("/kubeopera/{}/", runtime.id), "--recursive"],
            ),
        ),
    ]);
    checks.into_iter().filter(|(_, found)| found.as_array().is_some_and(|found| !found.is_empty())).collect()
}

#[tokio::test]
async fn vanilla_with_one_node_on_the_default_network_is_applied_and_destroyed_on_moto() {
    let mut runtime = runtime(Topology::VanillaKubeadm, "vanilla-one", None);
    runtime.cluster_config.control_plane = Some(ControlPlane { count: 1, machine_type: "t3.large".into() });
    let counts = apply_and_destroy_on_moto(runtime).await;
    eprintln!("vanilla, 1 node, default network: planned, applied, destroyed {counts:?}");
}

#[tokio::test]
async fn vanilla_with_three_nodes_and_a_custom_network_is_applied_and_destroyed_on_moto() {
    let mut runtime = runtime(Topology::VanillaKubeadm, "vanilla-three", Some(custom_network()));
    // A highly available control plane across three zones: one node in each (asserted after the apply).
    let zones = ["eu-central-1a", "eu-central-1b", "eu-central-1c"].map(str::to_owned).to_vec();
    runtime.cluster_config.aws = Some(provisioner::domain::AwsConfig { zones });
    let counts = apply_and_destroy_on_moto(runtime).await;
    eprintln!("vanilla, 3 nodes and the load balancer, custom network: planned, applied, destroyed {counts:?}");
}

#[tokio::test]
async fn eks_on_the_default_network_is_applied_and_destroyed_on_moto() {
    let counts = apply_and_destroy_on_moto(runtime(Topology::Eks, "eks-default", None)).await;
    eprintln!("EKS, default network: planned, applied, destroyed {counts:?}");
}

#[tokio::test]
async fn eks_on_a_custom_network_is_applied_and_destroyed_on_moto() {
    let counts = apply_and_destroy_on_moto(runtime(Topology::Eks, "eks-custom", Some(custom_network()))).await;
    eprintln!("EKS, custom network: planned, applied, destroyed {counts:?}");
}

/// GKE's configuration of `runtime`, initialised and validated, with its state in `gcs` and a static access
/// token: the google provider calls no API while planning a new cluster.
pub(super) async fn gke_configuration(gcs: &FakeGcs, runtime: Runtime) -> Configuration {
    let bucket = runtime.state_bucket.clone();
    gcs.create_bucket(&bucket, true).await;
    let env = vec![
        // fake-gcs-server itself: its recording proxy runs on this test's runtime, which `tofu` (run to
        // completion here) would block.
        ("GOOGLE_BACKEND_STORAGE_CUSTOM_ENDPOINT".to_owned(), format!("{}/storage/v1/", gcs.backend_url())),
        ("GOOGLE_OAUTH_ACCESS_TOKEN".to_owned(), "test-access-token".to_owned()),
    ];
    let configuration = Configuration::render(runtime, env);
    configuration.init_and_validate();
    configuration
}

async fn gke_plans(network: Option<Network>, name: &str) -> usize {
    let gcs = FakeGcs::start().await;
    let mut configuration = gke_configuration(&gcs, runtime(Topology::Gke, name, network)).await;
    let planned = configuration.plan("apply.tfplan");
    assert_eq!(with_actions(&planned, &["create"]).len(), planned.len(), "a new cluster only creates: {planned:#?}");
    assert_plans_the_api_ranges(&planned, &configuration.runtime);
    let types: BTreeSet<&str> = planned.iter().filter_map(|change| change["type"].as_str()).collect();
    for wanted in ["google_container_cluster", "google_container_node_pool", "google_compute_network"] {
        assert!(types.contains(wanted), "{name} plans no {wanted}: {types:?}");
    }
    // The pool upgrades after the master, to the master's version, in a surge upgrade.
    let pool = planned.iter().find(|change| change["type"] == "google_container_node_pool").expect("the pool");
    assert_eq!(pool["change"]["after_unknown"]["version"], true, "{name}: the pool takes the master's version");
    let surge = &pool["change"]["after"]["upgrade_settings"][0];
    let settings = (surge["strategy"].as_str(), surge["max_surge"].as_i64(), surge["max_unavailable"].as_i64());
    assert_eq!(settings, (Some("SURGE"), Some(1), Some(0)), "{name}: {pool:#}");

    // What a hibernation and a wake-up render validates and plans with the real provider too (from empty state:
    // no emulator holds an existing pool): no nodes and no autoscaler asleep, the minimum and the autoscaler awake.
    let runtime = configuration.runtime.clone();
    let zones = runtime.cluster_config.gcp.as_ref().unwrap().zones.len() as i32;
    let per_zone_minimum = (runtime.cluster_config.main_pool().unwrap().min_size + zones - 1) / zones;
    for (operation_type, node_count, autoscaling) in
        [(OperationType::Hibernate, 0, false), (OperationType::WakeUp, per_zone_minimum, true)]
    {
        configuration.rerender(operation_type, runtime.clone());
        let validation: Value = serde_json::from_str(&configuration.tofu(&["validate", "-json", "-no-color"])).unwrap();
        assert_eq!(validation["diagnostics"], serde_json::json!([]), "{name} {operation_type}: {validation:#}");
        let planned = configuration.plan("sleep.tfplan");
        let pool = planned.iter().find(|change| change["type"] == "google_container_node_pool").expect("the pool");
        let after = &pool["change"]["after"];
        assert_eq!(after["node_count"], node_count, "{name} {operation_type}: {after:#}");
        let scaled = after["autoscaling"].as_array().is_some_and(|blocks| !blocks.is_empty());
        assert_eq!(scaled, autoscaling, "{name} {operation_type}: {after:#}");
    }
    planned.len()
}

#[tokio::test]
async fn gke_on_the_default_network_validates_and_plans() {
    let planned = gke_plans(None, "gke-default").await;
    eprintln!("GKE, default network: planned {planned}");
}

#[tokio::test]
async fn gke_on_a_custom_network_validates_and_plans() {
    let planned = gke_plans(Some(custom_network()), "gke-custom").await;
    eprintln!("GKE, custom network: planned {planned}");
}

/// The pins live in the contract; the image build and the test build name them too and must agree.
#[test]
fn the_image_and_the_test_build_carry_the_pinned_versions() {
    use runner_contract::providers::{AWS_VERSION, GOOGLE_VERSION, IMAGE_LOCK_DIR};
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(repository.join("Dockerfile")).unwrap();
    assert!(dockerfile.contains(&format!("ARG AWS_PROVIDER_VERSION={AWS_VERSION}\n")), "Dockerfile: aws");
    assert!(dockerfile.contains(&format!("ARG GOOGLE_PROVIDER_VERSION={GOOGLE_VERSION}\n")), "Dockerfile: google");
    // The artifacts' tree holds the locks under terraform/, which the runtime stage copies to the image's folder.
    let (terraform_dir, locks) = IMAGE_LOCK_DIR.rsplit_once('/').unwrap();
    assert!(dockerfile.contains(&format!("/out/locks /terraform/{locks}\n")), "Dockerfile: the lock files' folder");
    assert!(
        dockerfile.contains(&format!("COPY --from=artifacts /terraform/ {terraform_dir}/\n")),
        "Dockerfile: copied"
    );
    let script = std::fs::read_to_string(repository.join("tools/build-terraform-providers.sh")).unwrap();
    let pins = format!("readonly AWS_VERSION={AWS_VERSION} GOOGLE_VERSION={GOOGLE_VERSION}\n");
    assert!(script.contains(&pins), "tools/build-terraform-providers.sh labels its builds {pins}");
}

/// The tests' tofu configuration installs from the mirror only, as the image's does: a provider that is not in
/// it is refused, never fetched from a registry.
#[test]
fn a_provider_outside_the_mirror_is_never_downloaded() {
    let folder = tempfile::tempdir().unwrap();
    let random = ProviderVersion { source: "hashicorp/random".into(), version: "3.6.3".into() };
    std::fs::write(folder.path().join("main.tf"), test_support::terraform::required_providers(&random)).unwrap();
    let output = Command::new(tofu_bin())
        .args(["init", "-input=false", "-no-color", "-backend=false"])
        .current_dir(folder.path())
        .env("TF_CLI_CONFIG_FILE", &test_providers().cli_config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "init installed a provider that is not in the mirror");
    assert!(stderr.contains("hashicorp/random"), "{stderr}");
    assert!(!folder.path().join(".terraform/providers/registry.opentofu.org/hashicorp/random").exists());
}
