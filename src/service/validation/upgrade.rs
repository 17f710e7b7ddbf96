//! The rules of an upgrade: what may change, Kubernetes versions only upwards, and REST's merge-patch body.

use serde_json::Value;

use super::{Check, Findings, Invalid, InvalidReason, Rejected, deserialize_naming_every_field};
use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::domain::{ClusterConfig, DEFAULT_POOL_NAME, UpgradeClusterInput};

/// What an upgrade may change of the worker pool; the other fields of a cluster are fixed when it is provisioned.
const WORKER_POOL_FIELDS: [&str; 4] = ["machineType", "minSize", "maxSize", "diskSizeGb"];
/// Fields of `clusterConfig` (and the runtime's name) an upgrade names to be told they cannot change.
const FIXED_FIELDS: [&str; 9] =
    ["topology", "credentialId", "region", "environment", "network", "aws", "gcp", "name", "runtimeInput"];

impl ValidationPolicy {
    /// The configuration `upgrade` makes of `current`, checked by the provisioning's rules plus the upgrade's
    /// own: Kubernetes versions only go up (several minors are run one at a time), and the control plane's
    /// machine type only changes where there are control-plane nodes. An upgrade that changes nothing is `Ok(None)`.
    pub fn validate_upgrade(
        &self,
        current: &ClusterConfig,
        upgrade: &UpgradeClusterInput,
    ) -> Result<Option<ClusterConfig>, Rejected> {
        let mut findings = Findings::default();
        if upgrade.control_plane.is_some() && current.control_plane.is_none() {
            findings.check(Err(Invalid::new(
                InvalidReason::Conflict,
                "clusterConfig.controlPlane",
                format!(
                    "cannot be changed for topology {}: its control plane is managed by the cloud",
                    current.topology.as_str()
                ),
            )));
        }
        findings.check(check_pools_change(current, upgrade));
        let target = current.upgraded(upgrade).with_canonical_pools();
        if let Some(version) = &upgrade.kubernetes_version {
            findings.check(check_version_step(&current.kubernetes_version, version));
        }
        self.check_cluster_config(&target, &mut findings);
        findings.into_result()?;
        Ok((target != *current).then_some(target))
    }
}

/// A change of the single `workerPool` needs a pool it is: the single one or the one named `default`; and the
/// pools change one way at a time.
fn check_pools_change(current: &ClusterConfig, upgrade: &UpgradeClusterInput) -> Check {
    if upgrade.worker_pool.is_none() {
        return Ok(());
    }
    if upgrade.worker_pools.is_some() {
        return Err(Invalid::new(
            InvalidReason::Conflict,
            "clusterConfig.workerPools",
            "change workerPool (the pool named default) or workerPools (every pool), not both",
        ));
    }
    if !current.pools().iter().any(|pool| pool.name == DEFAULT_POOL_NAME) {
        return Err(Invalid::new(
            InvalidReason::Conflict,
            "clusterConfig.workerPool",
            "the runtime has no pool named default: change its pools with workerPools",
        ));
    }
    Ok(())
}

/// Versions only go up, within one major version: EKS, GKE and kubeadm all refuse to go back. A request more than
/// one minor ahead is run as a chain of one-minor upgrades (see [`crate::domain::upgrade_chain`]).
fn check_version_step(current: &str, requested: &str) -> Check {
    let field = "clusterConfig.kubernetesVersion";
    // An unparsable request is reported by the window check; an unparsable stored version cannot be compared.
    let (Ok(from), Ok(to)) = (current.parse::<KubernetesVersion>(), requested.parse::<KubernetesVersion>()) else {
        return Ok(());
    };
    if to < from {
        return Err(Invalid::new(
            InvalidReason::Conflict,
            field,
            format!(
                "{to} is older than the cluster's {from}, and Kubernetes does not go back a minor version: \
                 provision a new runtime at {to} and move the workloads to it"
            ),
        ));
    }
    if to.major != from.major {
        return Err(Invalid::new(
            InvalidReason::Conflict,
            field,
            format!("{to} is another major version than the cluster's {from}: no upgrade path leads there"),
        ));
    }
    Ok(())
}

/// Reads the body of an upgrade (REST's PATCH: the changeable part of `clusterConfig`, JSON merge semantics),
/// naming every field it may not contain: fixed ones get told so, unknown ones too, and `null` (which would
/// remove a field in a merge patch) is refused since every changeable field is required.
pub fn upgrade_from_json(body: &Value) -> Result<UpgradeClusterInput, Rejected> {
    let Some(fields) = body.as_object() else {
        return Err(Invalid::new(InvalidReason::Format, "clusterConfig", "must be a JSON object").into());
    };
    let mut findings = Findings::default();
    for (key, value) in fields {
        let field = format!("clusterConfig.{key}");
        let allowed: &[&str] = match key.as_str() {
            "workerPool" => &WORKER_POOL_FIELDS,
            "controlPlane" => &["machineType"],
            "kubernetesVersion" | "apiAllowedCidrs" | "workerPools" | "kubernetes" => &[],
            fixed if FIXED_FIELDS.contains(&fixed) => {
                findings.check(Err(Invalid::new(InvalidReason::NotAllowed, field, fixed_message())));
                continue;
            }
            _ => {
                findings.check(Err(Invalid::new(
                    InvalidReason::NotAllowed,
                    field,
                    format!("unknown field; {}", fixed_message()),
                )));
                continue;
            }
        };
        if value.is_null() {
            findings.check(Err(Invalid::new(
                InvalidReason::NotAllowed,
                field,
                "must not be null: leave it out to keep it as it is",
            )));
            continue;
        }
        let Some(inner) = value.as_object().filter(|_| !allowed.is_empty()) else { continue };
        for (inner_key, inner_value) in inner {
            let field = format!("{field}.{inner_key}");
            if !allowed.contains(&inner_key.as_str()) {
                let message = match (key.as_str(), inner_key.as_str()) {
                    ("controlPlane", "count") => fixed_message().to_owned(),
                    _ => format!("unknown field; {}", fixed_message()),
                };
                findings.check(Err(Invalid::new(InvalidReason::NotAllowed, field, message)));
            } else if inner_value.is_null() {
                findings.check(Err(Invalid::new(
                    InvalidReason::NotAllowed,
                    field,
                    "must not be null: leave it out to keep it as it is",
                )));
            }
        }
    }
    findings.into_result()?;
    deserialize_naming_every_field(body.clone(), Some("clusterConfig"))
}

fn fixed_message() -> &'static str {
    "only kubernetesVersion, workerPools, workerPool.machineType, workerPool.minSize, workerPool.maxSize, \
     workerPool.diskSizeGb, controlPlane.machineType, apiAllowedCidrs and kubernetes can change after provisioning"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ControlPlaneUpgrade, ProvisionRequest, Topology, WorkerPoolUpgrade};
    use crate::service::validation::tests::{gke, policy, vanilla};

    fn upgrade(version: Option<&str>, workers: Option<WorkerPoolUpgrade>) -> UpgradeClusterInput {
        UpgradeClusterInput {
            kubernetes_version: version.map(str::to_owned),
            worker_pool: workers,
            worker_pools: None,
            control_plane: None,
            api_allowed_cidrs: None,
            kubernetes: None,
        }
    }

    fn eks() -> ProvisionRequest {
        ProvisionRequest::example(Topology::Eks)
    }

    #[test]
    fn versions_only_go_up_and_several_minors_at_once_are_accepted() {
        let current = eks().cluster_config;
        assert_eq!(current.kubernetes_version, "1.34");
        for version in ["1.35", "1.37"] {
            let target = policy().validate_upgrade(&current, &upgrade(Some(version), None)).unwrap().unwrap();
            assert_eq!(target.kubernetes_version, version);
        }
        for (version, says) in [
            ("1.33", "does not go back a minor version: provision a new runtime at 1.33 and move the workloads"),
            ("2.0", "another major version"),
        ] {
            let rejected = policy().validate_upgrade(&current, &upgrade(Some(version), None)).unwrap_err();
            assert_eq!(rejected.first.field, "clusterConfig.kubernetesVersion", "{version}");
            assert!(rejected.first.message.contains(says), "{version}: {}", rejected.first.message);
        }
        // Beyond the supported window is refused by the provisioning's rule.
        let mut newest = current.clone();
        newest.kubernetes_version = "1.37".into();
        let rejected = policy().validate_upgrade(&newest, &upgrade(Some("1.38"), None)).unwrap_err();
        assert!(rejected.first.message.contains("outside the supported window"), "{}", rejected.first.message);
    }

    #[test]
    fn an_upgrade_that_changes_nothing_is_none() {
        let current = eks().cluster_config;
        assert_eq!(policy().validate_upgrade(&current, &UpgradeClusterInput::default()), Ok(None));
        let same = upgrade(
            Some(&current.kubernetes_version),
            Some(WorkerPoolUpgrade {
                max_size: Some(current.main_pool().unwrap().max_size),
                ..WorkerPoolUpgrade::default()
            }),
        );
        assert_eq!(policy().validate_upgrade(&current, &same), Ok(None));
    }

    #[test]
    fn an_upgraded_configuration_follows_the_provisioning_rules() {
        let current = eks().cluster_config;
        let shrink = WorkerPoolUpgrade { min_size: Some(5), max_size: Some(2), ..WorkerPoolUpgrade::default() };
        let rejected = policy().validate_upgrade(&current, &upgrade(None, Some(shrink))).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.workerPool.minSize");
        let bad = WorkerPoolUpgrade {
            machine_type: Some("Big One".into()),
            disk_size_gb: Some(5),
            ..WorkerPoolUpgrade::default()
        };
        let rejected = policy().validate_upgrade(&current, &upgrade(Some("1.40"), Some(bad))).unwrap_err();
        let fields: Vec<&str> = rejected.all().map(|invalid| invalid.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "clusterConfig.kubernetesVersion",
                "clusterConfig.workerPool.machineType",
                "clusterConfig.workerPool.diskSizeGb"
            ]
        );
    }

    #[test]
    fn a_managed_control_plane_cannot_be_changed_and_a_vanilla_one_can() {
        let change = UpgradeClusterInput {
            control_plane: Some(ControlPlaneUpgrade { machine_type: Some("m6i.xlarge".into()) }),
            ..UpgradeClusterInput::default()
        };
        let rejected = policy().validate_upgrade(&gke().cluster_config, &change).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.controlPlane");
        assert!(rejected.first.message.contains("managed by the cloud"), "{}", rejected.first.message);

        let vanilla = vanilla().cluster_config;
        let target = policy().validate_upgrade(&vanilla, &change).unwrap().unwrap();
        assert_eq!(target.control_plane.unwrap().machine_type, "m6i.xlarge");
        let target = policy().validate_upgrade(&vanilla, &upgrade(Some("1.35"), None)).unwrap().unwrap();
        assert_eq!(target.kubernetes_version, "1.35");
        let workers = WorkerPoolUpgrade {
            max_size: Some(6),
            machine_type: Some("m6i.large".into()),
            ..WorkerPoolUpgrade::default()
        };
        let target = policy().validate_upgrade(&vanilla, &upgrade(None, Some(workers))).unwrap().unwrap();
        let pool = target.main_pool().unwrap();
        assert_eq!((pool.max_size, pool.machine_type.as_str()), (6, "m6i.large"));
    }

    /// The ranges that may reach the API change by an upgrade, checked as a provisioning's are; a runtime recorded
    /// before it had ranges keeps none until one names them.
    #[test]
    fn an_upgrade_replaces_the_api_ranges() {
        let mut current = eks().cluster_config;
        current.api_allowed_cidrs = Some(vec!["203.0.113.0/24".into()]);
        let change = |cidrs: &[&str]| UpgradeClusterInput {
            api_allowed_cidrs: Some(cidrs.iter().map(|cidr| cidr.to_string()).collect()),
            ..UpgradeClusterInput::default()
        };
        let target = policy().validate_upgrade(&current, &change(&["198.51.100.0/24", "192.0.2.9/32"])).unwrap();
        let expected = vec!["198.51.100.0/24".to_owned(), "192.0.2.9/32".to_owned()];
        assert_eq!(target.unwrap().api_allowed_cidrs, Some(expected));
        assert_eq!(policy().validate_upgrade(&current, &change(&["203.0.113.0/24"])), Ok(None), "the same list");
        let rejected = policy().validate_upgrade(&current, &change(&["198.51.100.0/24", "bad"])).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.apiAllowedCidrs[1]");
        let rejected = policy().validate_upgrade(&current, &change(&[])).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.apiAllowedCidrs");

        let mut legacy = current.clone();
        legacy.api_allowed_cidrs = None;
        let target = ValidationPolicy::DEFAULT.validate_upgrade(&legacy, &upgrade(Some("1.35"), None)).unwrap();
        assert_eq!(target.unwrap().api_allowed_cidrs, None, "no list is required of a change");

        let body = serde_json::json!({"apiAllowedCidrs": ["198.51.100.0/24"]});
        assert_eq!(upgrade_from_json(&body).unwrap(), change(&["198.51.100.0/24"]));
        let rejected = upgrade_from_json(&serde_json::json!({"apiAllowedCidrs": null})).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.apiAllowedCidrs");
        let rejected = upgrade_from_json(&serde_json::json!({"apiAllowedCidrs": "198.51.100.0/24"})).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.apiAllowedCidrs");
    }

    #[test]
    fn an_upgrade_body_names_every_field_that_cannot_change() {
        let body = serde_json::json!({
            "kubernetesVersion": "1.35",
            "region": "eu-west-1",
            "topology": "gke",
            "network": null,
            "controlPlane": {"count": 3, "machineType": "m6i.large"},
            "workerPool": {"maxSize": 4, "spot": true, "minSize": null},
            "colour": "blue",
        });
        let rejected = upgrade_from_json(&body).unwrap_err();
        let fields: Vec<&str> = rejected.all().map(|invalid| invalid.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "clusterConfig.colour",
                "clusterConfig.controlPlane.count",
                "clusterConfig.network",
                "clusterConfig.region",
                "clusterConfig.topology",
                "clusterConfig.workerPool.minSize",
                "clusterConfig.workerPool.spot",
            ]
        );
        let messages: Vec<&str> = rejected.all().map(|invalid| invalid.message.as_str()).collect();
        assert!(messages[0].starts_with("unknown field"), "{}", messages[0]);
        assert!(messages[1].starts_with("only kubernetesVersion"), "{}", messages[1]);
        assert!(messages[5].contains("must not be null"), "{}", messages[5]);

        let body = serde_json::json!({"kubernetesVersion": "1.35", "workerPool": {"maxSize": 4}});
        let upgrade = upgrade_from_json(&body).unwrap();
        assert_eq!(upgrade.kubernetes_version.as_deref(), Some("1.35"));
        assert_eq!(upgrade.worker_pool.unwrap().max_size, Some(4));
        let rejected = upgrade_from_json(&serde_json::json!({"workerPool": {"maxSize": "four"}})).unwrap_err();
        assert_eq!(rejected.first.field, "clusterConfig.workerPool.maxSize");
        assert_eq!(upgrade_from_json(&serde_json::json!([1])).unwrap_err().first.field, "clusterConfig");
    }
}
