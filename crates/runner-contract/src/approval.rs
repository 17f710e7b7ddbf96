//! Which plans an apply runs without a person's approval, and where a plan that waits is kept. A plan that must
//! wait is saved in the cluster's state bucket (encrypted and access-controlled as the state is, never in the
//! database or a log) under [`saved_plan_object`]; the run ends reporting its digest ([`plan_digest`]); a later
//! run of the same operation applies exactly that file once a caller approved that digest.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::plan::{PlanRisk, PlanSummary};

/// The runner's exit code when an approved plan can no longer be applied: the state moved since it was planned,
/// or the saved plan is gone or not the approved one. Nothing was changed; the operation needs a new plan.
pub const EXIT_STALE_PLAN: i32 = 4;

/// Which plans apply without approval: `Auto` (safe and risky ones; destructive ones are refused), `Manual` (no
/// plan that changes anything), `SafeOnly` (safe ones; risky and destructive ones wait).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::Enum))]
#[cfg_attr(feature = "graphql", graphql(rename_items = "PascalCase"))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ApprovalPolicy {
    #[default]
    Auto,
    Manual,
    SafeOnly,
}

impl ApprovalPolicy {
    pub const ALL: [ApprovalPolicy; 3] = [ApprovalPolicy::Auto, ApprovalPolicy::Manual, ApprovalPolicy::SafeOnly];

    /// The spelling in the database, in `runner.json` and in both APIs' JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Auto => "auto",
            ApprovalPolicy::Manual => "manual",
            ApprovalPolicy::SafeOnly => "safeOnly",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|policy| policy.as_str() == text)
    }

    /// Whether this policy lets some plan apply that `other` holds back (`Auto` < `SafeOnly` < `Manual`).
    pub fn is_looser_than(self, other: ApprovalPolicy) -> bool {
        let strictness = |policy| match policy {
            ApprovalPolicy::Auto => 0,
            ApprovalPolicy::SafeOnly => 1,
            ApprovalPolicy::Manual => 2,
        };
        strictness(self) < strictness(other)
    }

    /// Whether an apply's plan waits for approval. A plan that changes nothing never waits; under `Auto` nothing
    /// waits (a destructive plan is refused instead). A plan without a risk (recorded before risks were) is
    /// treated as destructive.
    pub fn must_wait(self, plan: &PlanSummary) -> bool {
        if plan.add + plan.change + plan.destroy == 0 {
            return false;
        }
        match self {
            ApprovalPolicy::Auto => false,
            ApprovalPolicy::Manual => true,
            ApprovalPolicy::SafeOnly => plan.risk != Some(PlanRisk::Safe),
        }
    }
}

/// The object of the state bucket that holds an operation's plan while it waits.
pub fn saved_plan_object(operation_id: Uuid) -> String {
    format!("plans/{operation_id}.tfplan.json")
}

/// The lowercase hex SHA-256 of a saved plan file: what a caller approves.
pub fn plan_digest(plan_file: &[u8]) -> String {
    Sha256::digest(plan_file).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether `text` has the form of a [`plan_digest`]: 64 lowercase hex digits.
pub fn is_plan_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_looser_than_one_that_holds_back_more() {
        use ApprovalPolicy::{Auto, Manual, SafeOnly};
        assert!(Auto.is_looser_than(SafeOnly) && Auto.is_looser_than(Manual) && SafeOnly.is_looser_than(Manual));
        for policy in ApprovalPolicy::ALL {
            assert!(!policy.is_looser_than(policy));
            assert!(!Manual.is_looser_than(policy));
        }
    }

    fn plan(add: usize, change: usize, risk: Option<PlanRisk>) -> PlanSummary {
        PlanSummary { add, change, risk, ..PlanSummary::default() }
    }

    #[test]
    fn each_policy_waits_for_the_risks_it_names() {
        let (safe, risky, destructive) = (
            plan(1, 0, Some(PlanRisk::Safe)),
            plan(0, 1, Some(PlanRisk::Risky)),
            plan(1, 0, Some(PlanRisk::Destructive)),
        );
        let waits = |policy: ApprovalPolicy| [&safe, &risky, &destructive].map(|plan| policy.must_wait(plan));
        assert_eq!(waits(ApprovalPolicy::Auto), [false, false, false]);
        assert_eq!(waits(ApprovalPolicy::SafeOnly), [false, true, true]);
        assert_eq!(waits(ApprovalPolicy::Manual), [true, true, true]);
        assert!(ApprovalPolicy::SafeOnly.must_wait(&plan(1, 0, None)), "an unknown risk is not safe");
    }

    #[test]
    fn a_plan_without_changes_never_waits() {
        assert!(!ApprovalPolicy::Manual.must_wait(&plan(0, 0, Some(PlanRisk::Safe))));
    }

    #[test]
    fn the_policy_is_spelled_as_the_apis_show_it() {
        for policy in ApprovalPolicy::ALL {
            assert_eq!(serde_json::to_value(policy).unwrap(), policy.as_str());
            assert_eq!(ApprovalPolicy::parse(policy.as_str()), Some(policy));
        }
        assert_eq!(ApprovalPolicy::parse("SafeOnly"), None);
    }

    #[test]
    fn a_digest_is_64_lowercase_hex_digits() {
        let digest = plan_digest(b"plan");
        assert!(is_plan_digest(&digest), "{digest}");
        assert!(!is_plan_digest(&digest.to_uppercase()));
        assert!(!is_plan_digest(&digest[1..]));
    }
}
