//! Reads a saved plan (`tofu show -json <plan>`) into its summary with the risk of each change: a plan of an
//! apply must not destroy or replace what the cluster is or stands on (a destructive one). The runner assesses
//! every plan with it; the tests assess the real providers' plans with the same rules.

use crate::plan::{PlanRisk, PlanSummary};
use serde_json::Value;

/// Resource types that are the cluster itself or its network: never destroyed or replaced by an apply.
const PROTECTED_TYPES: &[&str] = &["aws_eks_cluster", "google_container_cluster", "aws_vpc", "google_compute_network"];

/// One managed resource's change, as `show -json` lists its actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Create,
    Update,
    Replace,
    Delete,
}

impl Change {
    /// `None` for what changes nothing (a no-op, a read).
    fn of(address: &str, actions: &[&str]) -> Result<Option<Change>, String> {
        Ok(match actions {
            ["no-op"] | ["read"] => None,
            ["create"] => Some(Change::Create),
            ["update"] => Some(Change::Update),
            ["delete"] => Some(Change::Delete),
            ["delete", "create"] | ["create", "delete"] => Some(Change::Replace),
            other => return Err(format!("{address}: unknown actions {other:?}")),
        })
    }

    /// What the change puts at stake, for a resource that is protected or not (see [`PlanRisk`]).
    fn risk(self, protected: bool) -> PlanRisk {
        match (self, protected) {
            (Change::Create, _) | (Change::Update, false) => PlanRisk::Safe,
            (Change::Update, true) | (Change::Replace | Change::Delete, false) => PlanRisk::Risky,
            (Change::Replace | Change::Delete, true) => PlanRisk::Destructive,
        }
    }
}

/// The summary of a plan from `show -json`, each managed change with its risk (data sources are read, not
/// changed); `protected` are the addresses the operator protects besides [`is_protected`]'s own.
pub fn summarize(show_json: &[u8], protected: &[String]) -> Result<PlanSummary, String> {
    let plan: Value = serde_json::from_slice(show_json).map_err(|error| format!("not a JSON plan: {error}"))?;
    let mut summary = PlanSummary { risk: Some(PlanRisk::Safe), ..PlanSummary::default() };
    for resource in plan["resource_changes"].as_array().into_iter().flatten() {
        if resource["mode"] != "managed" {
            continue;
        }
        let address = resource["address"].as_str().ok_or("a resource change without an address")?.to_owned();
        let actions: Vec<&str> = resource["change"]["actions"]
            .as_array()
            .ok_or_else(|| format!("{address}: a change without actions"))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let Some(change) = Change::of(&address, &actions)? else { continue };
        let risk = change.risk(is_protected(&address, protected));
        summary.risk = summary.risk.max(Some(risk));
        match risk {
            PlanRisk::Safe => {}
            PlanRisk::Risky => summary.risky.push(address.clone()),
            PlanRisk::Destructive => summary.destructive.push(address.clone()),
        }
        match change {
            Change::Create => summary.add += 1,
            Change::Update => summary.change += 1,
            Change::Delete => {
                summary.destroy += 1;
                summary.destroyed.push(address);
            }
            Change::Replace => {
                summary.add += 1;
                summary.destroy += 1;
                summary.replaced.push(address);
            }
        }
    }
    Ok(summary)
}

/// The resource type of an address: `module.eks.aws_eks_cluster.this` and `aws_instance.control_plane[0]` are
/// of types `aws_eks_cluster` and `aws_instance`.
fn resource_type(address: &str) -> &str {
    let parts: Vec<&str> = address.split('.').collect();
    parts.len().checked_sub(2).map(|index| parts[index]).unwrap_or_default()
}

/// What an apply must leave standing: the protected types, a vanilla cluster's control-plane instances, and the
/// addresses the operator adds (`RUNNER_PROTECTED_RESOURCES`, with or without an index).
fn is_protected(address: &str, extra: &[String]) -> bool {
    let kind = resource_type(address);
    let without_index = address.split('[').next().unwrap_or(address);
    PROTECTED_TYPES.contains(&kind)
        || (kind == "aws_instance" && without_index.ends_with(".control_plane"))
        || extra.iter().any(|protected| protected == address || protected == without_index)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `show -json` of a plan making `changes` (address, actions).
    fn show(changes: &[(&str, &[&str])]) -> Vec<u8> {
        let resource_changes: Vec<Value> = changes
            .iter()
            .map(|(address, actions)| {
                serde_json::json!({ "address": address, "mode": "managed", "change": { "actions": actions } })
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({ "resource_changes": resource_changes })).unwrap()
    }

    /// `testdata/plan.json` is real output of the test tofu (`make tofu`): `testdata/plan/main.tf` applied with
    /// `-var generation=one`, then `tofu plan -var generation=two -out=two.tfplan` and `tofu show -json two.tfplan`.
    #[test]
    fn a_real_plan_is_summarized_by_its_managed_changes() {
        let summary = summarize(include_bytes!("testdata/plan.json"), &[]).unwrap();
        let expected = PlanSummary {
            add: 2,
            change: 1,
            destroy: 2,
            replaced: vec!["terraform_data.replaced".into()],
            destroyed: vec!["terraform_data.destroyed[0]".into()],
            risk: Some(PlanRisk::Risky),
            risky: vec!["terraform_data.destroyed[0]".into(), "terraform_data.replaced".into()],
            destructive: vec![],
            swept: vec![],
            orphans: vec![],
            foreign: vec![],
        };
        assert_eq!(summary, expected);
        let protected = summarize(include_bytes!("testdata/plan.json"), &["terraform_data.replaced".into()]).unwrap();
        assert_eq!(
            (protected.risk, protected.destructive),
            (Some(PlanRisk::Destructive), vec!["terraform_data.replaced".to_owned()])
        );
        assert!(summarize(b"Error: not a plan", &[]).is_err());
    }

    #[test]
    fn creates_and_updates_of_what_is_not_protected_are_safe() {
        let summary = summarize(
            &show(&[("module.eks.aws_eks_node_group.this", &["update"]), ("aws_s3_object.x", &["create"])]),
            &[],
        )
        .unwrap();
        assert_eq!((summary.risk, summary.risky.len(), summary.destructive.len()), (Some(PlanRisk::Safe), 0, 0));
        let nothing = summarize(&show(&[("aws_vpc.main", &["no-op"])]), &[]).unwrap();
        assert_eq!(nothing.risk, Some(PlanRisk::Safe));
    }

    #[test]
    fn a_protected_update_is_risky_and_so_is_losing_what_is_not_protected() {
        let upgrade = show(&[
            ("module.eks.aws_eks_cluster.this", &["update"]),
            ("module.compute.aws_instance.worker[2]", &["delete"]),
            ("module.eks.aws_eks_node_group.this", &["create", "delete"]),
        ]);
        let summary = summarize(&upgrade, &[]).unwrap();
        assert_eq!(summary.risk, Some(PlanRisk::Risky));
        assert_eq!(
            summary.risky,
            [
                "module.eks.aws_eks_cluster.this",
                "module.compute.aws_instance.worker[2]",
                "module.eks.aws_eks_node_group.this"
            ]
        );
    }

    #[test]
    fn the_cluster_its_network_and_its_control_plane_are_protected() {
        let plan = show(&[
            ("module.eks.aws_eks_cluster.this", &["delete", "create"]),
            ("module.compute.aws_instance.control_plane[1]", &["create", "delete"]),
            ("module.eks.aws_eks_node_group.this", &["delete", "create"]),
            ("module.vpc.aws_vpc.this", &["delete"]),
            ("module.compute.aws_launch_template.worker", &["delete"]),
        ]);
        let summary = summarize(&plan, &[]).unwrap();
        assert_eq!(summary.risk, Some(PlanRisk::Destructive));
        assert_eq!(
            summary.destructive,
            [
                "module.eks.aws_eks_cluster.this",
                "module.compute.aws_instance.control_plane[1]",
                "module.vpc.aws_vpc.this"
            ]
        );
        let gke = show(&[
            ("module.gke.google_container_cluster.this", &["delete", "create"]),
            ("module.gcp_network.google_compute_network.this", &["delete", "create"]),
        ]);
        assert_eq!(summarize(&gke, &[]).unwrap().destructive.len(), 2);
    }

    #[test]
    fn operators_may_protect_more_with_or_without_an_index() {
        let plan = show(&[("terraform_data.cluster", &["delete", "create"]), ("terraform_data.node[2]", &["delete"])]);
        assert!(summarize(&plan, &[]).unwrap().destructive.is_empty());
        let protected = ["terraform_data.cluster".to_owned(), "terraform_data.node".to_owned()];
        assert_eq!(
            summarize(&plan, &protected).unwrap().destructive,
            ["terraform_data.cluster", "terraform_data.node[2]"]
        );
    }
}
