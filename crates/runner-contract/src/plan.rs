//! What a run's plan changes. The runner plans every run first and applies exactly that plan; it reports the
//! plan's summary (counts and resource addresses, never attribute values) as the termination message of a
//! successful run, and refuses to apply a plan that destroys or replaces a protected resource, exiting with
//! [`EXIT_DESTRUCTIVE_PLAN`] so that the service can tell that refusal from any other failure.

use serde::{Deserialize, Serialize};

/// The runner's exit code when it refused to apply a plan that destroys or replaces a protected resource; nothing
/// was changed.
pub const EXIT_DESTRUCTIVE_PLAN: i32 = 3;

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
        };
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"add": 2, "change": 1, "destroy": 1, "replaced": ["module.eks.aws_eks_cluster.this"], "destroyed": []})
        );
        assert_eq!(serde_json::from_value::<PlanSummary>(json).unwrap(), summary);
    }
}
