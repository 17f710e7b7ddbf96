//! What the REST API answers: the seed's words for states and kinds, runtimes, operations and pages.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::{LastError, Operation, OperationState, OperationType, PlanSummary, StageEntry};
use crate::service::{self, RuntimeStatus};

/// The seed's words for an operation's state, one to one with [`OperationState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProvisionStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
}

impl From<OperationState> for ProvisionStatus {
    fn from(state: OperationState) -> Self {
        match state {
            OperationState::Pending => ProvisionStatus::Queued,
            OperationState::InProgress => ProvisionStatus::Running,
            OperationState::Succeeded => ProvisionStatus::Succeeded,
            OperationState::Failed => ProvisionStatus::Failed,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    Provision,
    Deprovision,
    Upgrade,
    Hibernate,
    WakeUp,
}

impl From<OperationType> for OperationKind {
    fn from(operation_type: OperationType) -> Self {
        match operation_type {
            OperationType::Provision => OperationKind::Provision,
            OperationType::Deprovision => OperationKind::Deprovision,
            OperationType::Upgrade => OperationKind::Upgrade,
            OperationType::Hibernate => OperationKind::Hibernate,
            OperationType::WakeUp => OperationKind::WakeUp,
        }
    }
}

/// The answer to an accepted POST, PATCH or DELETE: the runtime id and the queued operation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    /// The runtime id, used in every other path.
    id: String,
    operation_id: String,
    operation: OperationKind,
    status: ProvisionStatus,
    /// The operation only plans: nothing is applied.
    dry_run: bool,
}

impl From<&Operation> for Accepted {
    fn from(operation: &Operation) -> Self {
        Accepted {
            id: operation.runtime_id.to_string(),
            operation_id: operation.id.to_string(),
            operation: operation.operation_type.into(),
            status: operation.state.into(),
            dry_run: operation.dry_run,
        }
    }
}

/// The status of a runtime's last operation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionStatusResponse {
    id: String,
    name: String,
    operation_id: String,
    operation: OperationKind,
    status: ProvisionStatus,
    stage: String,
    message: String,
    last_error: Option<LastError>,
    /// What the plan of the operation's run changed, once its Job succeeded.
    plan_summary: Option<PlanSummary>,
    /// The operation only plans: nothing is applied (a preview runtime, or an upgrade's dry run).
    dry_run: bool,
    hibernation: Hibernation,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// Whether the cluster sleeps (workers at zero, a vanilla control plane stopped), as Kyma's `hibernationStatus`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hibernation {
    hibernated: bool,
    /// A hibernation would be accepted now: the cluster is provisioned, awake, and no operation is active.
    hibernation_possible: bool,
}

impl ProvisionStatusResponse {
    pub(super) fn new(status: RuntimeStatus, hibernation: service::HibernationStatus) -> Self {
        let hibernation =
            Hibernation { hibernated: hibernation.hibernated, hibernation_possible: hibernation.hibernation_possible };
        let operation = status.last_operation;
        ProvisionStatusResponse {
            id: status.runtime.id.to_string(),
            name: status.runtime.name,
            operation_id: operation.id.to_string(),
            operation: operation.operation_type.into(),
            status: operation.state.into(),
            stage: operation.stage.as_str().to_owned(),
            message: operation.message,
            last_error: operation.last_error,
            plan_summary: operation.plan_summary,
            dry_run: operation.dry_run,
            hibernation,
            created_at: operation.created_at,
            updated_at: operation.updated_at,
        }
    }
}

/// One operation with its record: when it ran, who asked for it, and when it entered each stage.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationRecord {
    id: String,
    /// The runtime id.
    runtime_id: String,
    operation: OperationKind,
    status: ProvisionStatus,
    stage: String,
    message: String,
    last_error: Option<LastError>,
    plan_summary: Option<PlanSummary>,
    dry_run: bool,
    /// Claims that used the attempt budget (the first, and resumes after a holder that made no progress).
    attempts: i32,
    /// The authenticated caller that asked for it; null for operations recorded before callers were kept.
    requested_by: Option<String>,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    /// From the first start to the end (or to now while it runs); null until it started.
    duration_seconds: Option<f64>,
    /// Each stage it entered, in order.
    stages: Vec<StageRecord>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageRecord {
    stage: String,
    entered_at: DateTime<Utc>,
}

impl OperationRecord {
    pub(super) fn new(operation: Operation, stages: Vec<StageEntry>) -> Self {
        OperationRecord {
            id: operation.id.to_string(),
            runtime_id: operation.runtime_id.to_string(),
            operation: operation.operation_type.into(),
            status: operation.state.into(),
            stage: operation.stage.as_str().to_owned(),
            duration_seconds: service::duration_seconds(&operation),
            message: operation.message,
            last_error: operation.last_error,
            plan_summary: operation.plan_summary,
            dry_run: operation.dry_run,
            attempts: operation.attempts,
            requested_by: operation.requested_by,
            created_at: operation.created_at,
            started_at: operation.started_at,
            finished_at: operation.finished_at,
            stages: stages
                .into_iter()
                .map(|entry| StageRecord { stage: entry.stage.as_str().to_owned(), entered_at: entry.entered_at })
                .collect(),
        }
    }
}

/// A page of a runtime's operations, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationList {
    pub(super) operations: Vec<OperationRecord>,
    /// Pass as `after` for the next page; null on the last page.
    pub(super) next_cursor: Option<String>,
}

/// A page of runtimes, in creation order, each with its last operation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionList {
    pub(super) runtimes: Vec<ProvisionStatusResponse>,
    /// Pass as `after` for the next page; null on the last page.
    pub(super) next_cursor: Option<String>,
}
