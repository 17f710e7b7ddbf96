//! The worker pools as the templates see them: one entry of the modules' `worker_pools` map per pool.

use serde::Serialize;

use super::MapEntry;
use crate::domain::{NamedWorkerPool, TaintEffect};

/// One pool; strings go between quotes (and through the escaper), sizes and flags are numbers and booleans.
#[derive(Serialize)]
pub(super) struct PoolData {
    name: String,
    machine_type: String,
    min_size: i32,
    max_size: i32,
    disk_size_gb: i32,
    spot: bool,
    /// Empty: every zone of the cluster.
    zones: Vec<String>,
    labels: Vec<MapEntry>,
    taints: Vec<TaintData>,
}

#[derive(Serialize)]
struct TaintData {
    key: String,
    value: String,
    /// Spelled the Kubernetes way; each module maps it to its cloud's spelling.
    effect: &'static str,
}

impl PoolData {
    /// `pools` in name order (the order of the modules' map).
    pub(super) fn of(pools: Vec<NamedWorkerPool>) -> Vec<PoolData> {
        let mut pools: Vec<PoolData> = pools.into_iter().map(PoolData::new).collect();
        pools.sort_by(|one, other| one.name.cmp(&other.name));
        pools
    }

    fn new(pool: NamedWorkerPool) -> Self {
        let taint = |key, value: Option<String>, effect: TaintEffect| TaintData {
            key,
            value: value.unwrap_or_default(),
            effect: effect.as_str(),
        };
        PoolData {
            name: pool.name,
            machine_type: pool.machine_type,
            min_size: pool.min_size,
            max_size: pool.max_size,
            disk_size_gb: pool.disk_size_gb,
            spot: pool.spot.unwrap_or(false),
            zones: pool.zones.unwrap_or_default(),
            labels: MapEntry::aligned(pool.labels.unwrap_or_default().0),
            taints: pool.taints.unwrap_or_default().into_iter().map(|t| taint(t.key, t.value, t.effect)).collect(),
        }
    }
}
