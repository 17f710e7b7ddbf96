//! What both APIs show of an operation and of a runtime's hibernation: one type each, deriving what GraphQL and
//! REST need. Each API keeps its own spellings (GraphQL Kyma's `state: InProgress`, REST the seed's
//! `status: running`), declared here field by field.

use async_graphql::SimpleObject;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use utoipa::ToSchema;

use crate::domain::approval::ApprovalPolicy;
use crate::domain::deletion::Forced;
use crate::domain::run::Stage;
use crate::domain::upgrade_chain::MinorRun;
use crate::domain::{
    Component, FailureReason, LastError, Operation, OperationState, OperationType, PlanSummary, StageEntry,
};
use crate::service::{self, HibernationStatus, OperationWithStages};

/// The seed's words for an operation's state, one to one with GraphQL's `OperationState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProvisionStatus {
    Queued,
    Running,
    /// The plan waits for a person to approve it.
    #[serde(rename = "awaiting_approval")]
    AwaitingApproval,
    Succeeded,
    Failed,
}

impl From<OperationState> for ProvisionStatus {
    fn from(state: OperationState) -> Self {
        match state {
            OperationState::Pending => ProvisionStatus::Queued,
            OperationState::InProgress => ProvisionStatus::Running,
            OperationState::AwaitingApproval => ProvisionStatus::AwaitingApproval,
            OperationState::Succeeded => ProvisionStatus::Succeeded,
            OperationState::Failed => ProvisionStatus::Failed,
        }
    }
}

/// The seed's words for an operation's type, one to one with GraphQL's `OperationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    Provision,
    Deprovision,
    Upgrade,
    Hibernate,
    WakeUp,
    RenewCertificates,
}

impl From<OperationType> for OperationKind {
    fn from(operation_type: OperationType) -> Self {
        match operation_type {
            OperationType::Provision => OperationKind::Provision,
            OperationType::Deprovision => OperationKind::Deprovision,
            OperationType::Upgrade => OperationKind::Upgrade,
            OperationType::Hibernate => OperationKind::Hibernate,
            OperationType::WakeUp => OperationKind::WakeUp,
            OperationType::RenewCertificates => OperationKind::RenewCertificates,
        }
    }
}

/// How an operation ended: a cancelled operation is told apart from a failed one (Kyma's `state` shows both as
/// `Failed`, with the reason `cancelled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema, async_graphql::Enum)]
#[graphql(rename_items = "PascalCase")]
pub enum OperationOutcome {
    Succeeded,
    Failed,
    Cancelled,
}

impl OperationOutcome {
    fn of(operation: &Operation) -> Option<Self> {
        let cancelled = operation.last_error.as_ref().is_some_and(|error| error.reason == FailureReason::Cancelled);
        match operation.state {
            OperationState::Pending | OperationState::InProgress | OperationState::AwaitingApproval => None,
            OperationState::Succeeded => Some(OperationOutcome::Succeeded),
            OperationState::Failed if cancelled => Some(OperationOutcome::Cancelled),
            OperationState::Failed => Some(OperationOutcome::Failed),
        }
    }
}

/// The OpenAPI document lists these closed sets as enums of their `as_str()` spellings, the values both APIs show.
macro_rules! openapi_enum {
    ($($name:ty),+ $(,)?) => {
        $(
            impl utoipa::PartialSchema for $name {
                fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                    utoipa::openapi::ObjectBuilder::new()
                        .schema_type(utoipa::openapi::schema::Type::String)
                        .enum_values(Some(<$name>::ALL.iter().map(|value| value.as_str())))
                        .into()
                }
            }

            impl utoipa::ToSchema for $name {}
        )+
    };
}

openapi_enum!(Stage, FailureReason, Component);

fn as_provision_status<S: Serializer>(state: &OperationState, serializer: S) -> Result<S::Ok, S::Error> {
    ProvisionStatus::from(*state).serialize(serializer)
}

fn as_operation_kind<S: Serializer>(operation_type: &OperationType, serializer: S) -> Result<S::Ok, S::Error> {
    OperationKind::from(*operation_type).serialize(serializer)
}

/// One operation with its record: when it ran, who asked for it, and when it entered each stage (Kyma's
/// `OperationStatus` in GraphQL, the seed's operation record in REST).
#[derive(Debug, Serialize, ToSchema, SimpleObject)]
#[serde(rename_all = "camelCase")]
#[schema(as = OperationRecord)]
#[graphql(name = "OperationStatus", complex)]
pub struct OperationView {
    /// The operation the view shows, for the fields that read more (GraphQL's `logs`).
    #[serde(skip)]
    #[graphql(skip)]
    pub(super) source: Operation,
    id: String,
    /// The runtime id.
    #[serde(rename = "runtimeId")]
    #[graphql(name = "runtimeID")]
    runtime_id: String,
    #[serde(rename = "operation", serialize_with = "as_operation_kind")]
    #[schema(value_type = OperationKind)]
    #[graphql(name = "operation")]
    operation_type: OperationType,
    #[serde(rename = "status", serialize_with = "as_provision_status")]
    #[schema(value_type = ProvisionStatus)]
    state: OperationState,
    /// The step the operation is at (for example `Queued`).
    #[schema(value_type = Stage)]
    stage: String,
    message: String,
    /// The error of its last attempt: while it runs, that of a step being retried (see `retrying`); once it
    /// failed, the failure (see `error`). Kyma's field, kept as Kyma's clients read it.
    last_error: Option<LastError>,
    /// It has ended: `outcome` says how.
    done: bool,
    /// How it ended; null while it is queued or running.
    outcome: Option<OperationOutcome>,
    /// Why it failed or who cancelled it, once it did; null otherwise.
    error: Option<LastError>,
    /// While it runs: the error of a step that is being tried again (not a failure); null otherwise.
    retrying: Option<LastError>,
    /// What the plan of the operation's run changed, once its Job succeeded.
    plan_summary: Option<PlanSummary>,
    /// The operation only plans: nothing is applied.
    dry_run: bool,
    /// A chained upgrade (several minor versions ahead): its minors so far, in order, each with when its run
    /// started; the last is the one its current run applies, and the runtime's `kubernetesVersion` the last one
    /// applied. Empty for every other operation.
    minors: Vec<MinorView>,
    /// Claims that used the attempt budget (the first, and resumes after a holder that made no progress).
    attempts: i32,
    /// The authenticated caller that asked for it; null for operations recorded before callers were kept.
    requested_by: Option<String>,
    /// The failed operation this one retries (`retryOperation`); null for one asked for directly.
    retry_of: Option<String>,
    /// The SHA-256 of the plan its run saved for approval (the runtime's `approvalPolicy` held it back): what an
    /// approval names. Null when no plan waited.
    plan_sha256: Option<String>,
    /// Until when the waiting plan may be approved; null when no plan waited.
    approval_expires_at: Option<DateTime<Utc>>,
    /// Who approved the plan; its run applies exactly that plan. Null until someone did.
    approved_by: Option<String>,
    /// The approval policy this request set for its run instead of the runtime's; null: the runtime's.
    approval_policy: Option<ApprovalPolicy>,
    /// A deprovisioning forced without a run (`force`): what may remain in the cloud. Null otherwise.
    forced: Option<Forced>,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    /// From the first start to the end (or to now while it runs); null until it started.
    duration_seconds: Option<f64>,
    /// Each stage the operation entered, in order, with the time it entered it.
    stages: Vec<StageView>,
}

/// When an operation entered one of its stages.
#[derive(Debug, Serialize, ToSchema, SimpleObject)]
#[serde(rename_all = "camelCase")]
#[schema(as = StageRecord)]
#[graphql(name = "StageEntry")]
pub struct StageView {
    #[schema(value_type = Stage)]
    stage: String,
    entered_at: DateTime<Utc>,
}

/// One minor of a chained upgrade.
#[derive(Debug, Serialize, ToSchema, SimpleObject)]
#[serde(rename_all = "camelCase")]
#[schema(as = MinorRecord)]
#[graphql(name = "MinorRun")]
pub struct MinorView {
    /// `MAJOR.MINOR`.
    version: String,
    /// When its run was queued: for the first with the operation, for the others once the minor before was applied.
    started_at: DateTime<Utc>,
}

impl From<&MinorRun> for MinorView {
    fn from(minor: &MinorRun) -> Self {
        MinorView { version: minor.version.to_string(), started_at: minor.started_at }
    }
}

impl From<StageEntry> for StageView {
    fn from(entry: StageEntry) -> Self {
        StageView { stage: entry.stage.as_str().to_owned(), entered_at: entry.entered_at }
    }
}

impl From<OperationWithStages> for OperationView {
    fn from(OperationWithStages { operation, stages }: OperationWithStages) -> Self {
        OperationView {
            id: operation.id.to_string(),
            runtime_id: operation.runtime_id.to_string(),
            operation_type: operation.operation_type,
            state: operation.state,
            stage: operation.stage.as_str().to_owned(),
            message: operation.message.clone(),
            last_error: operation.last_error.clone(),
            done: !operation.state.is_active(),
            outcome: OperationOutcome::of(&operation),
            error: operation.last_error.clone().filter(|_| operation.state == OperationState::Failed),
            retrying: operation.last_error.clone().filter(|_| operation.state.is_active()),
            plan_summary: operation.plan_summary.clone(),
            dry_run: operation.dry_run,
            minors: operation.minors.iter().map(MinorView::from).collect(),
            attempts: operation.attempts,
            requested_by: operation.requested_by.clone(),
            retry_of: operation.retry_of.map(|id| id.to_string()),
            plan_sha256: operation.saved_plan_sha256.clone(),
            approval_expires_at: operation.approval_expires_at,
            approval_policy: operation.approval_policy,
            forced: operation.forced.clone(),
            approved_by: operation.approved.as_ref().map(|approval| approval.by.clone()),
            created_at: operation.created_at,
            started_at: operation.started_at,
            finished_at: operation.finished_at,
            duration_seconds: service::duration_seconds(&operation),
            stages: stages.into_iter().map(StageView::from).collect(),
            source: operation,
        }
    }
}

/// Whether the cluster sleeps (workers at zero, a vanilla control plane stopped), as Kyma's `HibernationStatus`.
#[derive(Debug, Serialize, ToSchema, SimpleObject)]
#[serde(rename_all = "camelCase")]
#[schema(as = Hibernation)]
#[graphql(name = "HibernationStatus")]
pub struct HibernationView {
    /// Workers at zero (and a vanilla control plane stopped) since a hibernation succeeded.
    hibernated: bool,
    /// A hibernation would be accepted now: the cluster is provisioned, awake, and no operation is active.
    hibernation_possible: bool,
}

impl From<HibernationStatus> for HibernationView {
    fn from(status: HibernationStatus) -> Self {
        HibernationView { hibernated: status.hibernated, hibernation_possible: status.hibernation_possible }
    }
}
