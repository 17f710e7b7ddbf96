//! The worker pools of a request: the single `workerPool` or the named `workerPools`, each pool's sizes,
//! zones, node labels and taints.

use std::collections::BTreeSet;

use super::fields::{check_dns_label, check_labels, check_machine_type};
use super::{Check, Findings, Invalid, InvalidReason};
use crate::domain::{ClusterConfig, Labels, NamedWorkerPool, Taint, WorkerPool};

const MAX_WORKERS: i32 = 500;
const MIN_DISK_GB: i32 = 20;
const MAX_DISK_GB: i32 = 16384;
/// Pools per runtime: EKS allows 30 managed node groups per cluster and GKE more, but every pool is a cloud
/// resource of its own in every plan; ten covers the clusters people run.
const MAX_POOLS: usize = 10;
/// A pool's name ends up in node group, node pool and Auto Scaling group names next to the runtime's name.
const MAX_POOL_NAME_LEN: usize = 20;
const MAX_TAINTS: usize = 20;
/// Label prefixes the kubelet may not set on its own node (the NodeRestriction admission plugin), but for
/// these two, which exist for nodes to describe themselves.
const KUBELET_OWN_PREFIXES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

pub(super) fn check_pools(config: &ClusterConfig, findings: &mut Findings) {
    match (&config.worker_pool, &config.worker_pools) {
        (Some(pool), None) => check_sizes("clusterConfig.workerPool", pool, findings),
        (None, Some(pools)) => check_named_pools(config, pools, findings),
        (Some(_), Some(_)) => {
            findings.check(Err(Invalid::new(
                InvalidReason::Conflict,
                "clusterConfig.workerPools",
                "give workerPool (one pool) or workerPools (named pools), not both",
            )));
        }
        (None, None) => {
            findings.check(Err(Invalid::new(
                InvalidReason::Required,
                "clusterConfig.workerPools",
                "is required: name the cluster's worker pools (or give the single workerPool)",
            )));
        }
    }
}

fn check_named_pools(config: &ClusterConfig, pools: &[NamedWorkerPool], findings: &mut Findings) {
    if pools.is_empty() || pools.len() > MAX_POOLS {
        findings.check(Err(Invalid::new(
            InvalidReason::OutOfRange,
            "clusterConfig.workerPools",
            format!("must name 1 to {MAX_POOLS} pools, got {}", pools.len()),
        )));
        return;
    }
    let cluster_zones = cluster_zones(config);
    let mut names = BTreeSet::new();
    for (index, pool) in pools.iter().enumerate() {
        let field = format!("clusterConfig.workerPools[{index}]");
        let name_field = format!("{field}.name");
        if findings.check(check_dns_label(&name_field, &pool.name, MAX_POOL_NAME_LEN)) && !names.insert(&pool.name) {
            findings.check(Err(Invalid::new(
                InvalidReason::Conflict,
                name_field,
                format!("{:?} names another pool already: pool names are unique", pool.name),
            )));
        }
        check_sizes(&field, &pool.as_single(), findings);
        if let Some(zones) = &pool.zones {
            findings.check(check_pool_zones(&format!("{field}.zones"), zones, &cluster_zones));
        }
        if let Some(labels) = &pool.labels {
            findings.check(check_node_labels(&format!("{field}.labels"), labels));
        }
        if let Some(taints) = &pool.taints {
            findings.check(check_taints(&format!("{field}.taints"), taints));
        }
    }
}

/// Machine type, sizes and disk of one pool; `field`: the pool's path.
fn check_sizes(field: &str, pool: &WorkerPool, findings: &mut Findings) {
    findings.check(check_machine_type(&format!("{field}.machineType"), &pool.machine_type));
    let min_valid = (0..=MAX_WORKERS).contains(&pool.min_size);
    if !min_valid {
        findings.check(Err(Invalid::new(
            InvalidReason::OutOfRange,
            format!("{field}.minSize"),
            format!("must be between 0 and {MAX_WORKERS}, got {}", pool.min_size),
        )));
    }
    let max_valid = (1..=MAX_WORKERS).contains(&pool.max_size);
    if !max_valid {
        findings.check(Err(Invalid::new(
            InvalidReason::OutOfRange,
            format!("{field}.maxSize"),
            format!("must be between 1 and {MAX_WORKERS}, got {}", pool.max_size),
        )));
    }
    if min_valid && max_valid && pool.min_size > pool.max_size {
        findings.check(Err(Invalid::new(
            InvalidReason::Conflict,
            format!("{field}.minSize"),
            format!("must not exceed maxSize ({} > {})", pool.min_size, pool.max_size),
        )));
    }
    if !(MIN_DISK_GB..=MAX_DISK_GB).contains(&pool.disk_size_gb) {
        findings.check(Err(Invalid::new(
            InvalidReason::OutOfRange,
            format!("{field}.diskSizeGb"),
            format!("must be between {MIN_DISK_GB} and {MAX_DISK_GB}, got {}", pool.disk_size_gb),
        )));
    }
}

/// The zones the cluster's network spans; a pool picks among them.
fn cluster_zones(config: &ClusterConfig) -> Vec<String> {
    match (&config.aws, &config.gcp) {
        (Some(aws), _) => aws.zones.clone(),
        (None, Some(gcp)) => gcp.zones.clone(),
        (None, None) => Vec::new(),
    }
}

fn check_pool_zones(field: &str, zones: &[String], cluster_zones: &[String]) -> Check {
    if zones.is_empty() {
        return Err(Invalid::new(
            InvalidReason::OutOfRange,
            field,
            "must name at least one zone (leave it out for every zone of the cluster)",
        ));
    }
    let mut seen = BTreeSet::new();
    for (index, zone) in zones.iter().enumerate() {
        if !seen.insert(zone) {
            return Err(Invalid::new(InvalidReason::Conflict, format!("{field}[{index}]"), format!("{zone:?} twice")));
        }
        if !cluster_zones.contains(zone) {
            return Err(Invalid::new(
                InvalidReason::UnsupportedValue,
                format!("{field}[{index}]"),
                format!("{zone:?} is not one of the cluster's zones ({})", cluster_zones.join(", ")),
            ));
        }
    }
    Ok(())
}

/// Label rules, and no key of a prefix the kubelet may not set on its own node: the node would not register.
fn check_node_labels(field: &str, labels: &Labels) -> Check {
    check_labels(field, labels)?;
    for key in labels.0.keys() {
        if let Some((prefix, _)) = key.split_once('/')
            && is_reserved_prefix(prefix)
            && !KUBELET_OWN_PREFIXES.iter().any(|own| prefix == *own || prefix.ends_with(&format!(".{own}")))
        {
            return Err(Invalid::new(
                InvalidReason::NotAllowed,
                format!("{field}.{key}"),
                format!(
                    "the prefix {prefix} is reserved for Kubernetes: a node may not label itself with it (only \
                     {} are allowed)",
                    KUBELET_OWN_PREFIXES.join(" and ")
                ),
            ));
        }
    }
    Ok(())
}

fn is_reserved_prefix(prefix: &str) -> bool {
    ["kubernetes.io", "k8s.io"].iter().any(|reserved| prefix == *reserved || prefix.ends_with(&format!(".{reserved}")))
}

/// Each taint's key follows the label key rules and its value the label value rules; a key and effect appear
/// once.
fn check_taints(field: &str, taints: &[Taint]) -> Check {
    if taints.len() > MAX_TAINTS {
        return Err(Invalid::new(InvalidReason::OutOfRange, field, format!("at most {MAX_TAINTS} taints are allowed")));
    }
    let mut seen = BTreeSet::new();
    for (index, taint) in taints.iter().enumerate() {
        let taint_field = format!("{field}[{index}]");
        let as_label = Labels([(taint.key.clone(), taint.value.clone().unwrap_or_default())].into());
        check_labels(&taint_field, &as_label).map_err(|invalid| Invalid {
            field: format!("{taint_field}.key"),
            message: format!("{} (taints follow the label rules)", invalid.message),
            ..invalid
        })?;
        if !seen.insert((&taint.key, taint.effect)) {
            return Err(Invalid::new(
                InvalidReason::Conflict,
                taint_field,
                format!("{} with effect {} twice", taint.key, taint.effect),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::domain::{NamedWorkerPool, ProvisionRequest, Taint, TaintEffect, Topology};
    use crate::service::validation::tests::policy;

    fn pool(name: &str) -> NamedWorkerPool {
        let single = ProvisionRequest::example(Topology::Eks).cluster_config.main_pool().unwrap();
        NamedWorkerPool { name: name.to_owned(), ..NamedWorkerPool::from_single(&single) }
    }

    fn with_pools(topology: Topology, pools: Vec<NamedWorkerPool>) -> ProvisionRequest {
        let mut request = ProvisionRequest::example(topology);
        request.cluster_config.worker_pool = None;
        request.cluster_config.worker_pools = Some(pools);
        request
    }

    /// Every field the request's checks refuse, in order.
    fn refused(request: &ProvisionRequest) -> Vec<String> {
        match policy().validate(request) {
            Ok(()) => Vec::new(),
            Err(rejected) => rejected.all().map(|invalid| invalid.field.clone()).collect(),
        }
    }

    #[test]
    fn named_pools_with_zones_labels_taints_and_spot_pass() {
        let gpu = NamedWorkerPool {
            min_size: 0,
            zones: Some(vec!["eu-central-1b".into()]),
            labels: Some(crate::domain::Labels(
                [("kubeopera.io/pool".to_owned(), "gpu".to_owned()), ("node.kubernetes.io/gpu".into(), "a".into())]
                    .into(),
            )),
            taints: Some(vec![Taint { key: "nvidia.com/gpu".into(), value: None, effect: TaintEffect::NoSchedule }]),
            spot: Some(true),
            ..pool("gpu")
        };
        for topology in [Topology::VanillaKubeadm, Topology::Eks, Topology::Gke] {
            let mut gpu = gpu.clone();
            if topology == Topology::Gke {
                gpu.zones = Some(vec!["europe-west3-b".into()]);
            }
            let request = with_pools(topology, vec![pool("default"), gpu]);
            assert_eq!(refused(&request), Vec::<String>::new(), "{topology:?}");
        }
    }

    #[test]
    fn bad_pools_are_refused_naming_the_field() {
        let taint = |key: &str, effect| Taint { key: key.into(), value: None, effect };
        let label = |key: &str| Some(crate::domain::Labels([(key.to_owned(), "x".to_owned())].into()));
        let cases: Vec<(Vec<NamedWorkerPool>, &str)> = vec![
            (vec![], "clusterConfig.workerPools"),
            ((0..11).map(|index| pool(&format!("p{index}"))).collect(), "clusterConfig.workerPools"),
            (vec![pool("a"), pool("a")], "clusterConfig.workerPools[1].name"),
            (vec![pool("Gpu")], "clusterConfig.workerPools[0].name"),
            (vec![pool("a23456789012345678901")], "clusterConfig.workerPools[0].name"),
            (vec![NamedWorkerPool { min_size: 4, max_size: 3, ..pool("a") }], "clusterConfig.workerPools[0].minSize"),
            (vec![pool("a"), NamedWorkerPool { max_size: 0, ..pool("b") }], "clusterConfig.workerPools[1].maxSize"),
            (
                vec![NamedWorkerPool { zones: Some(vec!["us-east-1a".into()]), ..pool("a") }],
                "clusterConfig.workerPools[0].zones[0]",
            ),
            (vec![NamedWorkerPool { zones: Some(vec![]), ..pool("a") }], "clusterConfig.workerPools[0].zones"),
            (
                vec![NamedWorkerPool { labels: label("node-role.kubernetes.io/gpu"), ..pool("a") }],
                "clusterConfig.workerPools[0].labels.node-role.kubernetes.io/gpu",
            ),
            (
                vec![NamedWorkerPool { labels: label("bad key"), ..pool("a") }],
                "clusterConfig.workerPools[0].labels.bad key",
            ),
            (
                vec![NamedWorkerPool { taints: Some(vec![taint("", TaintEffect::NoExecute)]), ..pool("a") }],
                "clusterConfig.workerPools[0].taints[0].key",
            ),
            (
                vec![NamedWorkerPool {
                    taints: Some(vec![taint("gpu", TaintEffect::NoSchedule), taint("gpu", TaintEffect::NoSchedule)]),
                    ..pool("a")
                }],
                "clusterConfig.workerPools[0].taints[1]",
            ),
        ];
        for (pools, field) in cases {
            let request = with_pools(Topology::Eks, pools.clone());
            assert_eq!(refused(&request).first().map(String::as_str), Some(field), "{pools:?}");
        }
    }

    #[test]
    fn one_shape_of_pools_is_given() {
        let mut both = with_pools(Topology::Eks, vec![pool("default")]);
        both.cluster_config.worker_pool = ProvisionRequest::example(Topology::Eks).cluster_config.worker_pool;
        assert_eq!(refused(&both), ["clusterConfig.workerPools"]);
        let mut neither = both;
        (neither.cluster_config.worker_pool, neither.cluster_config.worker_pools) = (None, None);
        assert_eq!(refused(&neither), ["clusterConfig.workerPools"]);
    }
}
