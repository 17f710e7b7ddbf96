//! What a Runtime's spec asks of the service: the provisioning request it stands for, and the upgrade that makes
//! a runtime's configuration what the spec says now. Pure; never panics on any spec the API server accepts.

use crate::domain::{
    ClusterConfig, ControlPlaneUpgrade, NamedWorkerPool, ProvisionRequest, RuntimeInput, UpgradeClusterInput,
    WorkerPoolUpgrade,
};

use super::resource::RuntimeSpec;

/// The provisioning a new Runtime named `name` asks for: the REST request of the same fields.
pub fn provision_request(name: &str, spec: &RuntimeSpec) -> ProvisionRequest {
    ProvisionRequest {
        runtime_input: RuntimeInput {
            name: name.to_owned(),
            description: spec.description.clone(),
            labels: spec.labels.clone(),
            deletion_protection: spec.deletion_protection,
            approval_policy: spec.approval_policy,
        },
        cluster_config: spec.cluster.clone(),
    }
}

/// The upgrade from `current` to what `wanted` says, with only the fields that differ; `None` when no field an
/// upgrade may change differs (what cannot change is refused by the API server before it gets here).
pub fn upgrade_to(current: &ClusterConfig, wanted: &ClusterConfig) -> Option<UpgradeClusterInput> {
    let changed = |now: &str, then: &str| (now != then).then(|| then.to_owned());
    let (worker_pool, worker_pools) = pools_upgrade(current, wanted);
    let control_plane = match (&current.control_plane, &wanted.control_plane) {
        (Some(now), Some(then)) => changed(&now.machine_type, &then.machine_type),
        _ => None,
    };
    let upgrade = UpgradeClusterInput {
        kubernetes_version: changed(&current.kubernetes_version, &wanted.kubernetes_version),
        worker_pool,
        worker_pools,
        control_plane: control_plane.map(|machine_type| ControlPlaneUpgrade { machine_type: Some(machine_type) }),
        api_allowed_cidrs: match &wanted.api_allowed_cidrs {
            Some(wanted) if current.api_allowed_cidrs.as_ref() != Some(wanted) => Some(wanted.clone()),
            _ => None,
        },
        kubernetes: (current.kubernetes != wanted.kubernetes).then(|| wanted.kubernetes.clone().unwrap_or_default()),
    };
    (upgrade != UpgradeClusterInput::default()).then_some(upgrade)
}

/// A change of the single pool when both sides have one (Kyma's shape, the same upgrade REST would send), else
/// the wanted pools whole when they differ.
fn pools_upgrade(
    current: &ClusterConfig,
    wanted: &ClusterConfig,
) -> (Option<WorkerPoolUpgrade>, Option<Vec<NamedWorkerPool>>) {
    let (Some(now), Some(then)) = (&current.worker_pool, &wanted.worker_pool) else {
        return (None, (current.pools() != wanted.pools()).then(|| wanted.pools()));
    };
    let changed_size = |now: i32, then: i32| (now != then).then_some(then);
    let change = WorkerPoolUpgrade {
        machine_type: (now.machine_type != then.machine_type).then(|| then.machine_type.clone()),
        min_size: changed_size(now.min_size, then.min_size),
        max_size: changed_size(now.max_size, then.max_size),
        disk_size_gb: changed_size(now.disk_size_gb, then.disk_size_gb),
    };
    ((change != WorkerPoolUpgrade::default()).then_some(change), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Topology;

    fn config() -> ClusterConfig {
        ProvisionRequest::example_named(Topology::VanillaKubeadm, "blue").cluster_config
    }

    #[test]
    fn the_same_configuration_asks_for_no_upgrade() {
        assert_eq!(upgrade_to(&config(), &config()), None);
    }

    #[test]
    fn an_upgrade_carries_only_what_differs() {
        let mut wanted = config();
        wanted.kubernetes_version = "1.36".to_owned();
        wanted.worker_pool.as_mut().unwrap().max_size += 2;
        let upgrade = upgrade_to(&config(), &wanted).unwrap();
        assert_eq!(upgrade.kubernetes_version.as_deref(), Some("1.36"));
        let workers = upgrade.worker_pool.unwrap();
        assert_eq!(
            (workers.max_size, workers.min_size, workers.machine_type),
            (Some(wanted.worker_pool.unwrap().max_size), None, None)
        );
        assert_eq!(upgrade.worker_pools, None);
        assert_eq!((upgrade.control_plane, upgrade.api_allowed_cidrs), (None, None));
        // Applied to the current configuration, the upgrade gives the wanted one.
        let mut wanted = config();
        wanted.worker_pool.as_mut().unwrap().max_size += 2;
        assert_eq!(config().upgraded(&upgrade_to(&config(), &wanted).unwrap()), wanted);
    }

    #[test]
    fn named_pools_are_upgraded_whole_and_the_same_pools_in_the_other_shape_are_no_change() {
        let mut wanted = config();
        let mut gpu = NamedWorkerPool { name: "gpu".into(), ..config().pools()[0].clone() };
        wanted.worker_pools = Some(vec![config().pools()[0].clone(), gpu.clone()]);
        wanted.worker_pool = None;
        let upgrade = upgrade_to(&config(), &wanted).unwrap();
        assert_eq!((upgrade.worker_pool.as_ref(), upgrade.worker_pools.as_ref()), (None, wanted.worker_pools.as_ref()));
        assert_eq!(config().upgraded(&upgrade).pools(), wanted.pools());

        gpu.max_size += 1;
        let resized = ClusterConfig { worker_pools: Some(vec![config().pools()[0].clone(), gpu]), ..wanted.clone() };
        assert_eq!(upgrade_to(&wanted, &resized).unwrap().worker_pools, resized.worker_pools);

        let same = ClusterConfig { worker_pool: None, worker_pools: Some(config().pools()), ..config() };
        assert_eq!(upgrade_to(&config(), &same), None);
    }

    #[test]
    fn a_left_out_list_of_ranges_keeps_the_runtimes() {
        let mut current = config();
        current.api_allowed_cidrs = Some(vec!["10.0.0.0/8".to_owned()]);
        let mut wanted = config();
        wanted.api_allowed_cidrs = None;
        assert_eq!(upgrade_to(&current, &wanted), None);
        wanted.api_allowed_cidrs = Some(vec!["192.0.2.0/24".to_owned()]);
        assert_eq!(upgrade_to(&current, &wanted).unwrap().api_allowed_cidrs, wanted.api_allowed_cidrs);
    }

    #[test]
    fn the_request_is_the_rest_request_of_the_same_fields() {
        let request = ProvisionRequest::example_named(Topology::Gke, "green");
        let spec = RuntimeSpec {
            description: request.runtime_input.description.clone(),
            labels: request.runtime_input.labels.clone(),
            deletion_protection: request.runtime_input.deletion_protection,
            approval_policy: request.runtime_input.approval_policy,
            cluster: request.cluster_config.clone(),
            hibernated: false,
            adopt: None,
        };
        assert_eq!(provision_request("green", &spec), request);
    }
}
