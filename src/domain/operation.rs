//! One operation on a runtime: what it is, where its run stands and why it failed.

use async_graphql::SimpleObject;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::run::Stage;
use super::upgrade_chain::MinorRun;
use super::{
    ClusterConfig, Component, FailureReason, OperationState, OperationType, PlanSummary, ProviderVersion, RunAction,
    TraceParent, approval, deletion,
};

/// Why an operation failed (or why its step is being retried), and which part of the system said so. Kyma's
/// clients read `reason` and `component` as strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase")]
#[graphql(name = "LastError", complex)]
pub struct LastError {
    pub err_message: String,
    #[graphql(skip)]
    pub reason: FailureReason,
    #[graphql(skip)]
    pub component: Component,
}

impl LastError {
    pub fn new(reason: FailureReason, component: Component, message: impl Into<String>) -> Self {
        LastError { err_message: message.into(), reason, component }
    }

    /// The failure of an operation `caller` cancelled.
    pub fn cancelled_by(caller: &str) -> Self {
        LastError::new(FailureReason::Cancelled, Component::Provisioner, format!("cancelled by {caller}"))
    }
}

#[async_graphql::ComplexObject]
impl LastError {
    async fn reason(&self) -> &'static str {
        self.reason.as_str()
    }

    async fn component(&self) -> &'static str {
        self.component.as_str()
    }
}

/// One asynchronous operation on a runtime (any [`OperationType`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub id: Uuid,
    pub runtime_id: Uuid,
    pub operation_type: OperationType,
    pub state: OperationState,
    pub stage: Stage,
    pub message: String,
    pub last_error: Option<LastError>,
    /// Claims that used the attempt budget: the first, and resumes after a holder that made no progress.
    pub attempts: i32,
    /// Every claim by a worker, including resumes after a graceful release or while only waiting for the Job.
    pub claims: i32,
    /// The provider version the run installs (fixed when the operation is queued); `None` only for operations
    /// recorded before versions were pinned, which run with this release's pin.
    pub terraform_provider: Option<ProviderVersion>,
    /// What the run's plan changed, once its Job succeeded.
    pub plan_summary: Option<PlanSummary>,
    /// The configuration the run applies, when it is not the runtime's (an upgrade's target): it becomes the
    /// runtime's only when the run succeeded.
    pub target_config: Option<ClusterConfig>,
    /// Plan only: nothing is applied and the runtime's configuration stays as it is.
    pub dry_run: bool,
    /// A chained upgrade's minors so far, in order, each with when its run started: the last is the one its
    /// current run applies (see [`super::upgrade_chain`]). Empty for every other operation.
    pub minors: Vec<MinorRun>,
    /// The authenticated caller that asked for it; `None` for operations recorded before callers were kept.
    pub requested_by: Option<String>,
    /// Who asked to cancel it while it ran: the worker stops its Job and fails it.
    pub cancel_requested_by: Option<String>,
    /// The failed operation this one retries (same type and target); `None` for one a caller asked for directly.
    pub retry_of: Option<Uuid>,
    /// The digest of the plan its run saved for approval (see [`approval`]).
    pub saved_plan_sha256: Option<String>,
    /// Until when the saved plan may be approved, once the operation waits.
    pub approval_expires_at: Option<DateTime<Utc>>,
    /// Who approved the saved plan: the run then applies exactly it.
    pub approved: Option<approval::Approval>,
    /// The approval policy of this request, when it overrides the runtime's for its run (an upgrade's).
    pub approval_policy: Option<approval::ApprovalPolicy>,
    /// Set on a deprovisioning that was forced: it ended without a run, and this may remain in the cloud.
    pub forced: Option<deletion::Forced>,
    /// The trace context of the request that queued it: its runs continue that trace. `None` without traces.
    pub trace_parent: Option<TraceParent>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Operation {
    /// A new operation, recorded before any side effect happens.
    pub fn queued(
        runtime_id: Uuid,
        operation_type: OperationType,
        terraform_provider: ProviderVersion,
        now: DateTime<Utc>,
    ) -> Self {
        let noun = operation_type.noun();
        Operation {
            id: Uuid::now_v7(),
            runtime_id,
            operation_type,
            state: OperationState::Pending,
            stage: Stage::Queued,
            message: format!("Operation queued: waiting for a worker to start {noun}"),
            last_error: None,
            attempts: 0,
            claims: 0,
            terraform_provider: Some(terraform_provider),
            plan_summary: None,
            target_config: None,
            dry_run: false,
            minors: Vec::new(),
            requested_by: None,
            cancel_requested_by: None,
            retry_of: None,
            saved_plan_sha256: None,
            approval_expires_at: None,
            approved: None,
            approval_policy: None,
            forced: None,
            trace_parent: None,
            created_at: now,
            started_at: None,
            updated_at: now,
            finished_at: None,
        }
    }
}

impl Operation {
    /// Whether it is the first operation of its runtime, so that no other operation's Job can run on it: a runtime
    /// is created with its provisioning, and a later provisioning is a retry of a failed one.
    pub fn is_its_runtimes_first(&self) -> bool {
        self.operation_type == OperationType::Provision && self.retry_of.is_none()
    }

    /// What its Job's terraform-runner does.
    pub fn run_action(&self) -> RunAction {
        match (self.dry_run, self.operation_type) {
            (true, _) => RunAction::Plan,
            (
                false,
                OperationType::Provision
                | OperationType::Upgrade
                | OperationType::Hibernate
                | OperationType::WakeUp
                | OperationType::RenewCertificates,
            ) => RunAction::Apply,
            (false, OperationType::Deprovision) => RunAction::Destroy,
        }
    }
}

/// When an operation entered one of its stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageEntry {
    pub stage: Stage,
    pub entered_at: DateTime<Utc>,
}

/// A page of a runtime's operations, newest first.
#[derive(Debug, Clone)]
pub struct OperationPage {
    pub operations: Vec<Operation>,
    pub has_next_page: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Cloud;

    #[test]
    fn a_queued_operation_is_pending_with_no_error() {
        let runtime_id = Uuid::now_v7();
        let provider = ProviderVersion::pinned(Cloud::Aws);
        let operation = Operation::queued(runtime_id, OperationType::Deprovision, provider, Utc::now());
        assert_eq!(operation.state, OperationState::Pending);
        assert_eq!(operation.stage, Stage::Queued);
        assert_eq!(operation.runtime_id, runtime_id);
        assert!(operation.message.contains("deprovisioning"));
        assert!(operation.last_error.is_none());
    }

    #[test]
    fn a_dry_run_only_plans_and_an_upgrade_applies() {
        let provider = ProviderVersion::pinned(Cloud::Aws);
        let queued = |operation_type| Operation::queued(Uuid::now_v7(), operation_type, provider.clone(), Utc::now());
        assert_eq!(queued(OperationType::Provision).run_action(), RunAction::Apply);
        assert_eq!(queued(OperationType::Upgrade).run_action(), RunAction::Apply);
        assert_eq!(queued(OperationType::Deprovision).run_action(), RunAction::Destroy);
        assert_eq!(queued(OperationType::Hibernate).run_action(), RunAction::Apply);
        assert_eq!(queued(OperationType::WakeUp).run_action(), RunAction::Apply);
        let dry_run = Operation { dry_run: true, ..queued(OperationType::Upgrade) };
        assert_eq!(dry_run.run_action(), RunAction::Plan);
    }

    #[test]
    fn only_a_provisioning_that_retries_nothing_is_its_runtimes_first_operation() {
        let provider = ProviderVersion::pinned(Cloud::Aws);
        let queued = |operation_type| Operation::queued(Uuid::now_v7(), operation_type, provider.clone(), Utc::now());
        assert!(queued(OperationType::Provision).is_its_runtimes_first());
        let retry = Operation { retry_of: Some(Uuid::now_v7()), ..queued(OperationType::Provision) };
        assert!(!retry.is_its_runtimes_first(), "the failed provisioning's Job may still run");
        for later in
            [OperationType::Upgrade, OperationType::Hibernate, OperationType::WakeUp, OperationType::Deprovision]
        {
            assert!(!queued(later).is_its_runtimes_first(), "{later:?}");
        }
    }
}
