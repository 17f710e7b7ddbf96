//! Several named worker pools, each with its own machines, sizes, zones, node labels and taints; and the single
//! `workerPool` of Kyma's shape, which is the pool named `default`.

use async_graphql::{Enum, InputObject, SimpleObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ClusterConfig, DEFAULT_DISK_SIZE_GB, Labels, WorkerPool, WorkerPoolUpgrade, default_disk_size_gb};

/// The name the single `workerPool` has among named pools. Its cloud resources keep the names the cluster's only
/// pool had before pools had names, so an existing cluster's pool is this one, untouched.
pub const DEFAULT_POOL_NAME: &str = "default";

/// A group of worker nodes alike: one EKS managed node group, one GKE node pool, one Auto Scaling group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "NamedWorkerPoolInput")]
pub struct NamedWorkerPool {
    /// A DNS-1123 label of at most 20 characters, unique among the runtime's pools; part of cloud resource names.
    pub name: String,
    pub machine_type: String,
    /// 0 is allowed: the pool starts empty and the cluster autoscaler adds nodes when pods need them.
    pub min_size: i32,
    pub max_size: i32,
    /// Disk of each node in GB; 50 when left out.
    #[serde(default = "default_disk_size_gb")]
    #[graphql(default_with = "DEFAULT_DISK_SIZE_GB")]
    #[schema(default = default_disk_size_gb)]
    pub disk_size_gb: i32,
    /// Zones of the cluster's own (`aws.zones`, `gcp.zones`) the pool's nodes run in; left out, all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    /// Kubernetes labels every node of the pool registers with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    /// Taints every node of the pool registers with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<Taint>>,
    /// Spot (preemptible) capacity: cheaper, taken back by the cloud at short notice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot: Option<bool>,
}

/// A node taint, as Kubernetes spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "TaintInput")]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: TaintEffect,
}

spelled! {
    /// Kubernetes spells taint effects in PascalCase; so do both APIs.
    #[derive(
        Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Enum, ToSchema, JsonSchema,
    )]
    #[graphql(rename_items = "PascalCase")]
    pub enum TaintEffect {
        NoSchedule => "NoSchedule",
        PreferNoSchedule => "PreferNoSchedule",
        NoExecute => "NoExecute",
    }
}

impl NamedWorkerPool {
    /// The single pool of Kyma's shape, named [`DEFAULT_POOL_NAME`].
    pub fn from_single(pool: &WorkerPool) -> Self {
        NamedWorkerPool {
            name: DEFAULT_POOL_NAME.to_owned(),
            machine_type: pool.machine_type.clone(),
            min_size: pool.min_size,
            max_size: pool.max_size,
            disk_size_gb: pool.disk_size_gb,
            zones: None,
            labels: None,
            taints: None,
            spot: None,
        }
    }

    /// Its machines and sizes in the single pool's shape.
    pub fn as_single(&self) -> WorkerPool {
        WorkerPool {
            machine_type: self.machine_type.clone(),
            min_size: self.min_size,
            max_size: self.max_size,
            disk_size_gb: self.disk_size_gb,
        }
    }

    /// The pool the single `workerPool` describes completely: named `default`, in every zone, without labels,
    /// taints or spot capacity.
    fn is_single_shaped(&self) -> bool {
        self.name == DEFAULT_POOL_NAME
            && self.zones.is_none()
            && self.labels.as_ref().is_none_or(|labels| labels.0.is_empty())
            && self.taints.as_ref().is_none_or(Vec::is_empty)
            && !self.spot.unwrap_or(false)
    }
}

impl ClusterConfig {
    /// Every worker pool, in the order the request gave them; the single `workerPool` is the pool named
    /// `default`.
    pub fn pools(&self) -> Vec<NamedWorkerPool> {
        match (&self.worker_pools, &self.worker_pool) {
            (Some(pools), _) => pools.clone(),
            (None, Some(pool)) => vec![NamedWorkerPool::from_single(pool)],
            (None, None) => Vec::new(),
        }
    }

    /// The pool Kyma's clients see as `workerPool`: the one named `default`, else the first.
    pub fn main_pool(&self) -> Option<WorkerPool> {
        if let Some(pool) = &self.worker_pool {
            return Some(pool.clone());
        }
        let pools = self.worker_pools.as_deref().unwrap_or_default();
        pools.iter().find(|pool| pool.name == DEFAULT_POOL_NAME).or(pools.first()).map(NamedWorkerPool::as_single)
    }

    /// The same configuration with its pools written the way the previous release reads them whenever they
    /// can be: one pool that the single `workerPool` describes completely is stored as `workerPool`. Only a
    /// runtime that really has named pools stores `workerPools`, which a replica of the previous release refuses
    /// to read (rather than render one pool and plan the others' removal) until the rolling update is done.
    pub fn with_canonical_pools(mut self) -> Self {
        if let Some(pools) = &self.worker_pools
            && let [pool] = pools.as_slice()
            && pool.is_single_shaped()
        {
            self.worker_pool = Some(pool.as_single());
            self.worker_pools = None;
        }
        self
    }

    /// `change` made to the single pool, or else to the named pool called `default` (validation refuses a
    /// `workerPool` change of a runtime without one).
    pub(super) fn upgrade_default_pool(&mut self, change: &WorkerPoolUpgrade) {
        let apply = |machine_type: &mut String, min_size: &mut i32, max_size: &mut i32, disk_size_gb: &mut i32| {
            if let Some(wanted) = &change.machine_type {
                machine_type.clone_from(wanted);
            }
            *min_size = change.min_size.unwrap_or(*min_size);
            *max_size = change.max_size.unwrap_or(*max_size);
            *disk_size_gb = change.disk_size_gb.unwrap_or(*disk_size_gb);
        };
        if let Some(pool) = &mut self.worker_pool {
            apply(&mut pool.machine_type, &mut pool.min_size, &mut pool.max_size, &mut pool.disk_size_gb);
        } else if let Some(pool) = self.worker_pools.iter_mut().flatten().find(|pool| pool.name == DEFAULT_POOL_NAME) {
            apply(&mut pool.machine_type, &mut pool.min_size, &mut pool.max_size, &mut pool.disk_size_gb);
        }
    }

    /// Both shapes at once for a reader: `workerPool` (the main pool) for Kyma's clients and `workerPools`
    /// (every pool) for the rest.
    pub fn shown(&self) -> Self {
        ClusterConfig { worker_pool: self.main_pool(), worker_pools: Some(self.pools()), ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ProvisionRequest, Topology};

    fn named(name: &str) -> NamedWorkerPool {
        NamedWorkerPool {
            name: name.to_owned(),
            ..NamedWorkerPool::from_single(
                &ProvisionRequest::example(Topology::Eks).cluster_config.main_pool().unwrap(),
            )
        }
    }

    #[test]
    fn the_single_pool_is_the_pool_named_default() {
        let config = ProvisionRequest::example(Topology::Eks).cluster_config;
        let pools = config.pools();
        assert_eq!(pools.len(), 1);
        assert_eq!(pools[0].name, "default");
        assert_eq!(Some(pools[0].as_single()), config.worker_pool);
        assert_eq!(config.shown().worker_pools, Some(pools));
        assert_eq!(config.shown().worker_pool, config.worker_pool);
    }

    #[test]
    fn kyma_clients_see_the_default_pool_else_the_first() {
        let mut config = ProvisionRequest::example(Topology::Eks).cluster_config;
        let (mut gpu, general) = (named("gpu"), named("default"));
        gpu.machine_type = "g5.xlarge".into();
        config.worker_pool = None;
        config.worker_pools = Some(vec![gpu.clone(), general.clone()]);
        assert_eq!(config.main_pool(), Some(general.as_single()));
        config.worker_pools = Some(vec![gpu.clone()]);
        assert_eq!(config.main_pool(), Some(gpu.as_single()));
    }

    #[test]
    fn only_real_named_pools_are_stored_as_named_pools() {
        let single = ProvisionRequest::example(Topology::Eks).cluster_config;
        let as_named = ClusterConfig { worker_pool: None, worker_pools: Some(single.pools()), ..single.clone() };
        assert_eq!(as_named.with_canonical_pools(), single, "one plain default pool is the single pool");

        let tainted = NamedWorkerPool {
            taints: Some(vec![Taint { key: "gpu".into(), value: None, effect: TaintEffect::NoSchedule }]),
            ..named("default")
        };
        for pools in [vec![named("default"), named("gpu")], vec![named("general")], vec![tainted]] {
            let config = ClusterConfig { worker_pool: None, worker_pools: Some(pools.clone()), ..single.clone() };
            assert_eq!(config.clone().with_canonical_pools(), config, "{pools:?}");
        }
    }

    #[test]
    fn taint_effects_are_spelled_the_kubernetes_way() {
        for effect in TaintEffect::ALL {
            assert_eq!(serde_json::to_value(effect).unwrap(), serde_json::json!(effect.as_str()));
            assert_eq!(TaintEffect::parse(effect.as_str()), Some(*effect));
        }
    }
}
