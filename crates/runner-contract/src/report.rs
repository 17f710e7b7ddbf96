//! What a successful run reports as its termination message: the plan's summary and, for an apply, the digest of
//! the kubeconfig it published. Every runner may write every outputs Secret (its RBAC cannot name one Secret per
//! run), but only a run's own pod writes that pod's termination message: the service trusts an outputs Secret
//! only when its kubeconfig has the digest the run's pod reported, so a runner of one runtime cannot replace the
//! kubeconfig of another.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::plan::PlanSummary;

/// The termination message of a successful run. The plan's fields stay at the top level, so a reader of the
/// plain [`PlanSummary`] (an older service) still reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    #[serde(flatten)]
    pub plan: PlanSummary,
    /// [`kubeconfig_digest`] of the kubeconfig an apply published; `None` for plans and destroys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_sha256: Option<String>,
    /// Set when the plan must wait for approval: it was saved (see [`crate::approval`]) with this digest, and
    /// nothing was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_plan_sha256: Option<String>,
}

impl RunReport {
    /// A plan's or a destroy's report: nothing published, nothing waiting.
    pub fn of_plan(plan: PlanSummary) -> Self {
        RunReport { plan, ..RunReport::default() }
    }

    /// An apply that published the kubeconfig with this digest.
    pub fn applied(plan: PlanSummary, kubeconfig_sha256: String) -> Self {
        RunReport { plan, kubeconfig_sha256: Some(kubeconfig_sha256), ..RunReport::default() }
    }

    /// An apply whose plan was saved with this digest to wait for approval; nothing was applied.
    pub fn awaiting_approval(plan: PlanSummary, saved_plan_sha256: String) -> Self {
        RunReport { plan, saved_plan_sha256: Some(saved_plan_sha256), ..RunReport::default() }
    }
}

/// The lowercase hex SHA-256 of a kubeconfig as published (its bytes in the outputs Secret).
pub fn kubeconfig_digest(kubeconfig: &[u8]) -> String {
    Sha256::digest(kubeconfig).iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_read_as_a_plan_summary_too() {
        let report = RunReport::applied(
            PlanSummary { add: 1, ..PlanSummary::default() },
            kubeconfig_digest(b"apiVersion: v1\n"),
        );
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<PlanSummary>(&json).unwrap(), report.plan);
        assert_eq!(serde_json::from_str::<RunReport>(&json).unwrap(), report);
        let plain = serde_json::to_string(&report.plan).unwrap();
        assert_eq!(serde_json::from_str::<RunReport>(&plain).unwrap(), RunReport::of_plan(report.plan.clone()));
        let waiting = RunReport::awaiting_approval(report.plan.clone(), "ab".repeat(32));
        assert_eq!(serde_json::to_value(&waiting).unwrap()["savedPlanSha256"], "ab".repeat(32));
    }

    #[test]
    fn the_digest_is_lowercase_hex_sha256() {
        assert_eq!(kubeconfig_digest(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
