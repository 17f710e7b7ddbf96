//! Reads a saved plan (`tofu show -json <plan>`) into its summary, and decides whether it may be applied: a plan
//! of an apply must not destroy or replace what the cluster is or stands on.

use runner_contract::plan::PlanSummary;
use serde_json::Value;

/// Resource types that are the cluster itself or its network: never destroyed or replaced by an apply.
const PROTECTED_TYPES: &[&str] = &["aws_eks_cluster", "google_container_cluster", "aws_vpc", "google_compute_network"];

/// The summary of a plan from `show -json`; managed resources only (data sources are read, not changed).
pub fn summarize(show_json: &[u8]) -> Result<PlanSummary, String> {
    let plan: Value = serde_json::from_slice(show_json).map_err(|error| format!("not a JSON plan: {error}"))?;
    let mut summary = PlanSummary::default();
    for change in plan["resource_changes"].as_array().into_iter().flatten() {
        if change["mode"] != "managed" {
            continue;
        }
        let address = change["address"].as_str().ok_or("a resource change without an address")?.to_owned();
        let actions: Vec<&str> = change["change"]["actions"]
            .as_array()
            .ok_or_else(|| format!("{address}: a change without actions"))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        match actions.as_slice() {
            ["no-op"] | ["read"] => {}
            ["create"] => summary.add += 1,
            ["update"] => summary.change += 1,
            ["delete"] => {
                summary.destroy += 1;
                summary.destroyed.push(address);
            }
            ["delete", "create"] | ["create", "delete"] => {
                summary.add += 1;
                summary.destroy += 1;
                summary.replaced.push(address);
            }
            other => return Err(format!("{address}: unknown actions {other:?}")),
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

/// What the plan would destroy or replace that an apply must leave standing: the protected types, a vanilla
/// cluster's control-plane instances, and the addresses the operator adds (`RUNNER_PROTECTED_RESOURCES`).
pub fn protected_changes(summary: &PlanSummary, extra: &[String]) -> Vec<String> {
    summary
        .replaced
        .iter()
        .chain(&summary.destroyed)
        .filter(|address| {
            let kind = resource_type(address);
            let without_index = address.split('[').next().unwrap_or(address);
            PROTECTED_TYPES.contains(&kind)
                || (kind == "aws_instance" && without_index.ends_with(".control_plane"))
                || extra.iter().any(|protected| protected == address.as_str() || protected == without_index)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(replaced: &[&str], destroyed: &[&str]) -> PlanSummary {
        PlanSummary {
            replaced: replaced.iter().map(|address| address.to_string()).collect(),
            destroyed: destroyed.iter().map(|address| address.to_string()).collect(),
            ..PlanSummary::default()
        }
    }

    /// `testdata/plan.json` is real output of the test tofu (`make tofu`): `testdata/plan/main.tf` applied with
    /// `-var generation=one`, then `tofu plan -var generation=two -out=two.tfplan` and `tofu show -json two.tfplan`.
    #[test]
    fn a_real_plan_is_summarized_by_its_managed_changes() {
        let summary = summarize(include_bytes!("testdata/plan.json")).unwrap();
        let expected = PlanSummary {
            add: 2,
            change: 1,
            destroy: 2,
            replaced: vec!["terraform_data.replaced".into()],
            destroyed: vec!["terraform_data.destroyed[0]".into()],
        };
        assert_eq!(summary, expected);
        assert_eq!(protected_changes(&summary, &["terraform_data.replaced".into()]), ["terraform_data.replaced"]);
        assert!(summarize(b"Error: not a plan").is_err());
    }

    #[test]
    fn the_cluster_its_network_and_its_control_plane_are_protected() {
        let plan = summary(
            &[
                "module.eks.aws_eks_cluster.this",
                "module.compute.aws_instance.control_plane[1]",
                "module.eks.aws_eks_node_group.this",
            ],
            &["module.vpc.aws_vpc.this", "module.compute.aws_launch_template.worker"],
        );
        assert_eq!(
            protected_changes(&plan, &[]),
            [
                "module.eks.aws_eks_cluster.this",
                "module.compute.aws_instance.control_plane[1]",
                "module.vpc.aws_vpc.this"
            ]
        );
        let gke = summary(
            &["module.gke.google_container_cluster.this", "module.gcp_network.google_compute_network.this"],
            &[],
        );
        assert_eq!(protected_changes(&gke, &[]).len(), 2);
    }

    #[test]
    fn workers_may_be_replaced_and_operators_may_protect_more() {
        let plan = summary(&["module.eks.aws_eks_node_group.this", "terraform_data.cluster"], &[]);
        assert!(protected_changes(&plan, &[]).is_empty());
        assert_eq!(protected_changes(&plan, &["terraform_data.cluster".to_owned()]), ["terraform_data.cluster"]);
        let indexed = summary(&["terraform_data.node[2]"], &[]);
        assert_eq!(protected_changes(&indexed, &["terraform_data.node".to_owned()]), ["terraform_data.node[2]"]);
    }
}
