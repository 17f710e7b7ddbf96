//! Plans that wait for a person, decided without I/O: which run holds its plan back, what an approval must name,
//! and when a waiting plan expires. The runner decides from the plan's risk and the runtime's policy whether a
//! plan waits (`runner_contract::approval`); the operation then waits in [`OperationState::AwaitingApproval`].

use std::fmt;

use chrono::{DateTime, Utc};

use super::{Component, FailureReason, LastError, Operation, OperationState};
pub use runner_contract::approval::{ApprovalPolicy, is_plan_digest};

/// Who approved an operation's saved plan, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub by: String,
    pub at: DateTime<Utc>,
}

/// Why an approval or a rejection is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalRefusal {
    /// The operation does not wait for approval; its state says what it does instead.
    NotAwaiting(OperationState),
    /// The approval names another plan than the one that waits.
    OtherPlan,
    /// The plan waited longer than it may; the operation fails as `approval_expired`.
    Expired(DateTime<Utc>),
}

impl fmt::Display for ApprovalRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApprovalRefusal::NotAwaiting(state) => {
                write!(f, "the operation does not wait for approval (it is {})", state.as_str())
            }
            ApprovalRefusal::OtherPlan => f.write_str(
                "planSha256 does not name the plan that waits; read the operation again and approve the planSha256 \
                 it shows",
            ),
            ApprovalRefusal::Expired(at) => {
                write!(f, "the plan's approval expired at {}; retry the operation for a new plan", at.to_rfc3339())
            }
        }
    }
}

impl LastError {
    /// The failure of an operation whose plan `caller` rejected.
    pub fn plan_rejected_by(caller: &str) -> Self {
        let message = format!("the plan was rejected by {caller}; nothing was changed");
        LastError::new(FailureReason::PlanRejected, Component::Provisioner, message)
    }

    /// The failure of an operation whose plan nobody approved in time.
    pub fn approval_expired() -> Self {
        LastError::new(
            FailureReason::ApprovalExpired,
            Component::Provisioner,
            "nobody approved the plan within the approval time (APP_PLAN_APPROVAL_TTL); nothing was changed",
        )
    }
}

impl Operation {
    /// The saved plan its run applies, once a caller approved it.
    pub fn approved_plan(&self) -> Option<&str> {
        self.approved.as_ref().and(self.saved_plan_sha256.as_deref())
    }

    /// Whether its run saved its plan for approval and nobody approved it yet: the run ends waiting.
    pub fn holds_plan_for_approval(&self) -> bool {
        self.saved_plan_sha256.is_some() && self.approved.is_none()
    }

    /// When the time its run may take starts: an approval starts it again (waiting for a person is not running),
    /// and so does each minor of a chained upgrade.
    pub fn run_started_at(&self) -> DateTime<Utc> {
        let minor_started = self.minors.last().map(|minor| minor.started_at).unwrap_or_default();
        let started = self.started_at.unwrap_or(self.created_at).max(minor_started);
        self.approved.as_ref().map_or(started, |approval| approval.at.max(started))
    }

    /// Whether `plan_sha256` approves what this operation waits with, at `now`.
    pub fn check_approval(&self, plan_sha256: &str, now: DateTime<Utc>) -> Result<(), ApprovalRefusal> {
        self.check_waiting(now)?;
        match self.saved_plan_sha256.as_deref() {
            Some(saved) if saved == plan_sha256 => Ok(()),
            _ => Err(ApprovalRefusal::OtherPlan),
        }
    }

    /// Whether this operation waits for approval at `now`, so that it may be approved or rejected.
    pub fn check_waiting(&self, now: DateTime<Utc>) -> Result<(), ApprovalRefusal> {
        if self.state != OperationState::AwaitingApproval {
            return Err(ApprovalRefusal::NotAwaiting(self.state));
        }
        match self.approval_expires_at {
            Some(expiry) if expiry <= now => Err(ApprovalRefusal::Expired(expiry)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::domain::Cloud;
    use crate::domain::{OperationType, ProviderVersion};

    fn waiting(now: DateTime<Utc>) -> Operation {
        let queued =
            Operation::queued(uuid::Uuid::now_v7(), OperationType::Upgrade, ProviderVersion::pinned(Cloud::Aws), now);
        Operation {
            state: OperationState::AwaitingApproval,
            saved_plan_sha256: Some("a".repeat(64)),
            approval_expires_at: Some(now + TimeDelta::hours(1)),
            ..queued
        }
    }

    #[test]
    fn only_the_waiting_plans_digest_approves_it_and_only_before_it_expires() {
        let now = Utc::now();
        let operation = waiting(now);
        assert_eq!(operation.check_approval(&"a".repeat(64), now), Ok(()));
        assert_eq!(operation.check_approval(&"b".repeat(64), now), Err(ApprovalRefusal::OtherPlan));
        let later = now + TimeDelta::hours(2);
        assert!(matches!(operation.check_approval(&"a".repeat(64), later), Err(ApprovalRefusal::Expired(_))));
        let running = Operation { state: OperationState::InProgress, ..operation };
        assert_eq!(running.check_waiting(now), Err(ApprovalRefusal::NotAwaiting(OperationState::InProgress)));
    }

    #[test]
    fn an_approval_names_the_plan_to_apply_and_restarts_the_runs_clock() {
        let now = Utc::now();
        let mut operation = waiting(now);
        operation.started_at = Some(now);
        assert!(operation.holds_plan_for_approval());
        assert_eq!((operation.approved_plan(), operation.run_started_at()), (None, now));
        let at = now + TimeDelta::minutes(30);
        operation.approved = Some(Approval { by: "alice".to_owned(), at });
        assert!(!operation.holds_plan_for_approval());
        assert_eq!((operation.approved_plan(), operation.run_started_at()), (Some("a".repeat(64).as_str()), at));
    }
}
