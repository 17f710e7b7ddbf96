//! What a run's plan changes. The runner plans every run first and applies exactly that plan; it reports the
//! plan's summary (counts and resource addresses, never attribute values) as the termination message of a
//! successful run, and refuses to apply a plan that destroys or replaces a protected resource, exiting with
//! [`EXIT_DESTRUCTIVE_PLAN`] so that the service can tell that refusal from any other failure.

use serde::{Deserialize, Serialize};

/// The runner's exit code when it refused to apply a plan that destroys or replaces a protected resource; nothing
/// was changed.
pub const EXIT_DESTRUCTIVE_PLAN: i32 = 3;

/// What a plan puts at stake, from its riskiest change: `Safe` (creates, and in-place updates of resources that
/// are not protected), `Risky` (in-place updates of protected resources, such as a cluster's Kubernetes version,
/// and replacements or destroys of the others, such as worker instances), `Destructive` (a protected resource
/// destroyed or replaced: the cluster, its network, a vanilla control plane, the operator's additions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::Enum))]
#[cfg_attr(feature = "graphql", graphql(rename_items = "PascalCase"))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum PlanRisk {
    Safe,
    Risky,
    Destructive,
}

/// Counts as Terraform prints them (`Plan: 3 to add, 1 to change, 0 to destroy`; a replacement counts as one to
/// add and one to destroy), and the addresses of what goes away.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub add: usize,
    pub change: usize,
    pub destroy: usize,
    /// Resources destroyed and created anew.
    pub replaced: Vec<String>,
    /// Resources destroyed for good.
    pub destroyed: Vec<String>,
    /// The riskiest change of an apply's (or a dry run's) plan; null for a deprovisioning's plan, which destroys
    /// everything by design, and for plans recorded before risks were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<PlanRisk>,
    /// The addresses whose change is risky.
    #[serde(default)]
    pub risky: Vec<String>,
    /// The addresses whose change is destructive (an apply refuses such a plan).
    #[serde(default)]
    pub destructive: Vec<String>,
    /// After a deprovisioning's destroy: what still carried the runtime's tag though no state knew it, that a run
    /// of the runtime recorded creating (one killed before it saved its state), and was deleted; ARNs or self
    /// links, at most [`crate::failure::MAX_LISTED_LEFTOVERS`].
    #[serde(default)]
    pub swept: Vec<String>,
    /// After an apply: what carries the runtime's tag though its state does not know it (created by an earlier
    /// run killed before it saved its state), left for the deprovisioning to delete; ARNs or self links, at most
    /// [`crate::failure::MAX_LISTED_LEFTOVERS`].
    #[serde(default)]
    pub orphans: Vec<String>,
    /// After an apply or a destroy: what carries the runtime's tag though no run of the runtime recorded creating
    /// it (tagged by someone else, or created by a run killed between creating it and recording it); never
    /// deleted, only named. ARNs or self links, at most [`crate::failure::MAX_LISTED_LEFTOVERS`].
    #[serde(default)]
    pub foreign: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_spelled_as_the_service_reads_it() {
        let summary = PlanSummary {
            add: 2,
            change: 1,
            destroy: 1,
            replaced: vec!["module.eks.aws_eks_cluster.this".into()],
            destroyed: vec![],
            risk: Some(PlanRisk::Destructive),
            risky: vec![],
            destructive: vec!["module.eks.aws_eks_cluster.this".into()],
            swept: vec![],
            orphans: vec![],
            foreign: vec!["arn:aws:ec2:eu-west-1:123456789012:instance/i-0f".into()],
        };
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"add": 2, "change": 1, "destroy": 1, "replaced": ["module.eks.aws_eks_cluster.this"],
                "destroyed": [], "risk": "destructive", "risky": [], "destructive": ["module.eks.aws_eks_cluster.this"],
                "swept": [], "orphans": [],
                "foreign": ["arn:aws:ec2:eu-west-1:123456789012:instance/i-0f"]})
        );
        assert_eq!(serde_json::from_value::<PlanSummary>(json).unwrap(), summary);
        // A summary recorded before risks were reads without them.
        let older = serde_json::json!({"add": 1, "change": 0, "destroy": 0, "replaced": [], "destroyed": []});
        let read = serde_json::from_value::<PlanSummary>(older).unwrap();
        assert_eq!((read.add, read.risk, read.risky.len(), read.swept.len(), read.foreign.len()), (1, None, 0, 0, 0));
    }
}
