//! Several worker pools meet the real AWS provider on moto: two pools applied (one a labelled, tainted spot pool
//! in one zone that starts empty), a pool added and removed by upgrades whose plans touch only that pool (the
//! removal assessed risky, so it waits for approval under `safeOnly` and `manual`), hibernated and woken with each pool back
//! at its own minimum, and destroyed with nothing left. GKE is planned with two pools.

use provisioner::domain::{NamedWorkerPool, OperationType, Runtime, Taint, TaintEffect, Topology};
use runner_contract::plan::PlanRisk;
use serde_json::{Value, json};
use test_support::moto::MotoServer;

use super::providers::{
    Configuration, MOTO_ONLY_DIFFERENCES, assessed, changed_attributes, create_state_bucket, describe,
    gke_configuration, remaining, runtime,
};

/// The general pool named default (one node to start) and a GPU pool: spot, in the second zone only, empty until
/// pods need it, labelled and tainted so that only GPU workloads land there.
fn two_pools(topology: Topology, name: &str) -> Runtime {
    let mut runtime = runtime(topology, name, None);
    let config = &mut runtime.cluster_config;
    let default = config.pools().remove(0);
    let zones = config.aws.as_ref().map(|aws| &aws.zones).or(config.gcp.as_ref().map(|gcp| &gcp.zones));
    let second_zone = zones.expect("the cluster's zones")[1].clone();
    let gpu = NamedWorkerPool {
        name: "gpu".into(),
        machine_type: "g5.xlarge".into(),
        min_size: 0,
        max_size: 2,
        zones: Some(vec![second_zone]),
        labels: Some(provisioner::domain::Labels(
            [("kubeopera.io/accelerator".to_owned(), "nvidia".to_owned())].into(),
        )),
        taints: Some(vec![Taint { key: "nvidia.com/gpu".into(), value: None, effect: TaintEffect::NoSchedule }]),
        spot: Some(true),
        ..default.clone()
    };
    config.worker_pool = None;
    config.worker_pools = Some(vec![default, gpu]);
    runtime
}

fn with_pools(runtime: &Runtime, pools: Vec<NamedWorkerPool>) -> Runtime {
    let mut changed = runtime.clone();
    changed.cluster_config.worker_pools = Some(pools);
    changed
}

/// The planned changes that are not moto's own differences.
fn real_changes(plan: &[Value]) -> Vec<Value> {
    plan.iter()
        .filter(|change| change["change"]["actions"] != json!(["no-op"]))
        .filter(|change| {
            let resource_type = change["type"].as_str().unwrap_or_default();
            !changed_attributes(change)
                .iter()
                .all(|attribute| MOTO_ONLY_DIFFERENCES.contains(&(resource_type, attribute.as_str())))
        })
        .cloned()
        .collect()
}

fn addresses(changes: &[Value]) -> Vec<String> {
    changes.iter().map(|change| change["address"].as_str().unwrap_or_default().to_owned()).collect()
}

/// Each pool's (minimum, desired, maximum) and, for EKS, its capacity type, labels and taints, as moto has them.
fn pools_in_moto(moto: &MotoServer, runtime: &Runtime) -> Vec<(String, Value)> {
    let name = runtime.name.as_str();
    if runtime.cluster_config.topology == Topology::Eks {
        let listed = describe(moto, runtime, &["eks", "list-nodegroups", "--cluster-name", name]);
        let mut groups: Vec<String> = serde_json::from_value(listed["nodegroups"].clone()).unwrap();
        groups.sort();
        return groups
            .into_iter()
            .map(|group| {
                let described = describe(
                    moto,
                    runtime,
                    &["eks", "describe-nodegroup", "--cluster-name", name, "--nodegroup-name", &group],
                );
                let group_json = &described["nodegroup"];
                let scaling = &group_json["scalingConfig"];
                let shown = json!({
                    "sizes": [scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]],
                    "capacity": group_json["capacityType"],
                    "labels": group_json["labels"],
                    "taints": group_json["taints"],
                    "subnets": group_json["subnets"].as_array().map_or(0, Vec::len),
                });
                (group, shown)
            })
            .collect();
    }
    let query = format!("AutoScalingGroups[?starts_with(AutoScalingGroupName, '{name}-worker-')]");
    let groups = describe(moto, runtime, &["autoscaling", "describe-auto-scaling-groups", "--query", &query]);
    let mut shown: Vec<(String, Value)> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|group| {
            let pool = group["Tags"]
                .as_array()
                .unwrap()
                .iter()
                .find(|tag| tag["Key"] == "kubeopera.io/worker-pool")
                .map(|tag| tag["Value"].as_str().unwrap().to_owned())
                .expect("every group is tagged with its pool");
            let taint_tag = group["Tags"]
                .as_array()
                .unwrap()
                .iter()
                .find(|tag| tag["Key"] == "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu")
                .map(|tag| tag["Value"].clone());
            let subnets = group["VPCZoneIdentifier"].as_str().unwrap_or_default().split(',').count();
            let sizes = [&group["MinSize"], &group["DesiredCapacity"], &group["MaxSize"]];
            (pool, json!({ "sizes": sizes, "taint": taint_tag, "subnets": subnets }))
        })
        .collect();
    shown.sort_by(|one, other| one.0.cmp(&other.0));
    shown
}

fn apply(configuration: &Configuration, plan: &str) {
    configuration.tofu(&["apply", "-input=false", "-no-color", "-lock-timeout=60s", plan]);
}

async fn pools_live_their_life_on_moto(topology: Topology, name: &str) {
    let moto = MotoServer::start().await;
    let current = two_pools(topology, name);
    create_state_bucket(&moto, &current);
    let mut configuration = Configuration::render(current.clone(), moto.env());
    configuration.init_and_validate();
    configuration.plan("apply.tfplan");
    apply(&configuration, "apply.tfplan");

    let pools = pools_in_moto(&moto, &current);
    let names: Vec<&str> = pools.iter().map(|(name, _)| name.as_str()).collect();
    if topology == Topology::Eks {
        let gpu = &pools[0].1;
        assert_eq!(names, ["pool-gpu", "workers"], "{pools:#?}");
        assert_eq!(gpu["sizes"], json!([0, 0, 2]), "{pools:#?}");
        assert_eq!(gpu["capacity"], "SPOT", "{pools:#?}");
        assert_eq!(gpu["labels"]["kubeopera.io/accelerator"], "nvidia", "{pools:#?}");
        assert_eq!(
            gpu["taints"],
            json!([{ "key": "nvidia.com/gpu", "value": "", "effect": "NO_SCHEDULE" }]),
            "{pools:#?}"
        );
        assert_eq!((&gpu["subnets"], &pools[1].1["capacity"]), (&json!(1), &json!("ON_DEMAND")), "{pools:#?}");
    } else {
        assert_eq!(names, ["default", "gpu"], "{pools:#?}");
        let gpu = &pools[1].1;
        assert_eq!((&gpu["sizes"], &gpu["subnets"]), (&json!([0, 0, 2]), &json!(1)), "{pools:#?}");
        // The cluster autoscaler can scale the empty pool from zero knowing its nodes' taint.
        assert_eq!(gpu["taint"], json!(":NoSchedule"), "{pools:#?}");
    }

    // A pool added by an upgrade: the plan creates only its resources.
    let general = current.cluster_config.pools();
    let batch = NamedWorkerPool { name: "batch".into(), min_size: 1, max_size: 4, ..general[0].clone() };
    let added = with_pools(&current, [general.clone(), vec![batch]].concat());
    configuration.rerender(OperationType::Upgrade, added.clone());
    let changes = real_changes(&configuration.plan("add.tfplan"));
    let touched = addresses(&changes);
    assert!(!touched.is_empty() && touched.iter().all(|address| address.contains("[\"batch\"]")), "{touched:#?}");
    assert!(changes.iter().all(|change| change["change"]["actions"] == json!(["create"])), "{touched:#?}");
    assert_eq!(assessed(&changes).risk, Some(PlanRisk::Safe), "adding a pool applies under every policy but manual");
    apply(&configuration, "add.tfplan");
    assert_eq!(pools_in_moto(&moto, &added).len(), 3);

    // Removed again: only its resources go. A removal is risky, never destructive (that tier is the cluster and
    // its network, which no apply may remove): `auto` applies it, `safeOnly` and `manual` wait for approval.
    configuration.rerender(OperationType::Upgrade, current.clone());
    let changes = real_changes(&configuration.plan("remove.tfplan"));
    let touched = addresses(&changes);
    assert!(!touched.is_empty() && touched.iter().all(|address| address.contains("[\"batch\"]")), "{touched:#?}");
    let assessment = assessed(&changes);
    eprintln!("{name}: removing a pool assessed {:?}, destructive {:?}", assessment.risk, assessment.destructive);
    assert_eq!(assessment.risk, Some(PlanRisk::Risky), "{assessment:#?}");
    assert_eq!(assessment.risky, touched, "{assessment:#?}");
    apply(&configuration, "remove.tfplan");
    assert_eq!(pools_in_moto(&moto, &current).len(), 2);

    // Hibernated every pool is at zero; woken each is back at its own minimum.
    for (operation_type, sizes) in
        [(OperationType::Hibernate, [[0, 0, 3], [0, 0, 2]]), (OperationType::WakeUp, [[1, 1, 3], [0, 0, 2]])]
    {
        configuration.rerender(operation_type, current.clone());
        configuration.plan("sleep.tfplan");
        apply(&configuration, "sleep.tfplan");
        let pools = pools_in_moto(&moto, &current);
        // Sorted by cloud name: EKS's `pool-gpu` before `workers`, vanilla's `default` before `gpu`.
        let (general, gpu) =
            if topology == Topology::Eks { (&pools[1].1, &pools[0].1) } else { (&pools[0].1, &pools[1].1) };
        assert_eq!(
            (&general["sizes"], &gpu["sizes"]),
            (&json!(sizes[0]), &json!(sizes[1])),
            "{operation_type}: {pools:#?}"
        );
    }

    configuration.tofu(&["destroy", "-auto-approve", "-input=false", "-no-color", "-lock-timeout=60s"]);
    let left = remaining(&moto, &current);
    assert!(left.is_empty(), "{name}: destroy left {left:#?}");
}

#[tokio::test]
async fn eks_with_two_pools_adds_and_removes_a_pool_touching_only_it_on_moto() {
    pools_live_their_life_on_moto(Topology::Eks, "pools-eks").await;
}

#[tokio::test]
async fn vanilla_with_two_pools_adds_and_removes_a_pool_touching_only_it_on_moto() {
    pools_live_their_life_on_moto(Topology::VanillaKubeadm, "pools-vanilla").await;
}

/// GKE: one node pool per pool, planned with the real google provider; the GPU pool in its one zone, spot,
/// labelled and tainted, starting empty, the regional cluster's default pool across both zones.
#[tokio::test]
async fn gke_with_two_pools_plans_a_node_pool_each() {
    let gcs = test_support::gcp::FakeGcs::start().await;
    let configuration = gke_configuration(&gcs, two_pools(Topology::Gke, "pools-gke")).await;
    let planned = configuration.plan("apply.tfplan");
    let mut pools: Vec<&Value> = planned
        .iter()
        .filter(|change| change["type"] == "google_container_node_pool")
        .map(|change| &change["change"]["after"])
        .collect();
    pools.sort_by_key(|pool| pool["name"].as_str().unwrap_or_default().to_owned());
    let names: Vec<&str> = pools.iter().map(|pool| pool["name"].as_str().unwrap_or_default()).collect();
    assert_eq!(names, ["pool-gpu", "workers"], "{pools:#?}");
    let (gpu, general) = (pools[0], pools[1]);
    assert_eq!(gpu["node_locations"], json!(["europe-west3-b"]), "{gpu:#}");
    assert_eq!(general["node_locations"], json!(["europe-west3-a", "europe-west3-b"]), "{general:#}");
    assert_eq!(gpu["location"], "europe-west3", "a regional cluster's pool: {gpu:#}");
    let node = &gpu["node_config"][0];
    assert_eq!((&node["spot"], &node["machine_type"]), (&json!(true), &json!("g5.xlarge")), "{node:#}");
    assert_eq!(node["labels"]["kubeopera.io/accelerator"], "nvidia", "{node:#}");
    assert_eq!(node["taint"], json!([{ "key": "nvidia.com/gpu", "value": "", "effect": "NO_SCHEDULE" }]), "{node:#}");
    assert_eq!(gpu["initial_node_count"], 0, "an empty pool starts empty: {gpu:#}");
    assert_eq!(gpu["autoscaling"][0]["total_min_node_count"], 0, "{gpu:#}");
}
