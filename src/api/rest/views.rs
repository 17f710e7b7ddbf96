//! What only the REST API answers: an accepted change, a runtime as a resource and in the seed's flat shape, and
//! pages.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::views::{HibernationView, OperationKind, OperationView, ProvisionStatus};
use crate::domain::approval::ApprovalPolicy;
use crate::domain::certificates::ObservedCertificates;
use crate::domain::{
    ClusterConfig, Condition, Labels, LastError, Operation, PlanSummary, RuntimeState, UpgradeClusterInput,
};
use crate::service::{ApprovalPolicyChange, DeletionProtectionChange, RuntimeStatus};

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
    #[schema(value_type = crate::domain::run::Stage)]
    stage: String,
    message: String,
    last_error: Option<LastError>,
    /// What the plan of the operation's run changed, once its Job succeeded.
    plan_summary: Option<PlanSummary>,
    /// The operation only plans: nothing is applied (a preview runtime, or an upgrade's dry run).
    dry_run: bool,
    hibernation: HibernationView,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<RuntimeStatus> for ProvisionStatusResponse {
    fn from(status: RuntimeStatus) -> Self {
        let operation = status.last_operation.operation;
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
            hibernation: status.hibernation.into(),
            created_at: operation.created_at,
            updated_at: operation.updated_at,
        }
    }
}

/// A page of a runtime's operations, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationList {
    pub(super) operations: Vec<OperationView>,
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

/// A runtime as a resource: what was asked for, what it is now, and its last operation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Runtime)]
pub struct RuntimeView {
    id: String,
    name: String,
    description: Option<String>,
    labels: Labels,
    /// The configuration last applied (the requested one until the provisioning succeeded).
    cluster_config: ClusterConfig,
    /// The configuration an upgrade queued or running applies; null otherwise.
    target_config: Option<ClusterConfig>,
    /// Recorded by a dry-run provisioning: planned, never built.
    preview: bool,
    /// Deprovisionings are refused while this is on (PATCH `{"deletionProtection": false}` turns it off).
    deletion_protection: bool,
    /// Which plans of its runs wait for approval (PATCH `{"approvalPolicy": "safeOnly"}` changes it).
    approval_policy: ApprovalPolicy,
    /// The `Runtime` resource (`namespace/name`) that manages it: only that object changes it (changes through the
    /// APIs answer 409 `managed_by_resource`); null for a runtime the APIs change.
    managed_by: Option<String>,
    state: RuntimeState,
    /// `Provisioned` (its cluster exists), `Progressing` (an operation is queued or running) and, once its
    /// cluster's certificates were read, `CertificatesExpiring` (one expires within 30 days).
    conditions: Vec<Condition>,
    last_operation: OperationView,
    hibernation: HibernationView,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// When it was deprovisioned; null while it lives.
    deleted_at: Option<DateTime<Utc>>,
    /// Until when the kubeconfig last handed out signs in (a cluster that signs in with client certificates);
    /// null until one was, and for EKS and GKE, whose kubeconfigs use the cloud's token plugin.
    kubeconfig_expires_at: Option<DateTime<Utc>>,
    /// Until when each certificate of its cluster the provisioner can see is valid, as last read (a few runtimes
    /// a minute); null until they were read.
    certificates: Option<ObservedCertificates>,
}

impl From<RuntimeStatus> for RuntimeView {
    fn from(status: RuntimeStatus) -> Self {
        let target_config = status.target_config().map(ClusterConfig::shown);
        let runtime = status.runtime;
        RuntimeView {
            id: runtime.id.to_string(),
            name: runtime.name,
            description: runtime.description,
            labels: runtime.labels,
            cluster_config: runtime.cluster_config.shown(),
            target_config,
            preview: runtime.preview,
            deletion_protection: runtime.deletion_protection,
            approval_policy: runtime.approval_policy,
            managed_by: runtime.managed_by.as_ref().map(ToString::to_string),
            state: status.summary.state,
            conditions: status.summary.conditions,
            last_operation: status.last_operation.into(),
            hibernation: status.hibernation.into(),
            created_at: runtime.created_at,
            updated_at: runtime.updated_at,
            deleted_at: runtime.deleted_at,
            kubeconfig_expires_at: runtime.kubeconfig_expires_at,
            certificates: runtime.certificates,
        }
    }
}

/// A page of runtimes, in creation order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeList {
    pub(super) runtimes: Vec<RuntimeView>,
    /// Pass as `after` for the next page; null on the last page.
    pub(super) next_cursor: Option<String>,
}

/// The body of a PATCH of a runtime: an upgrade of its cluster (a merge patch of `clusterConfig`), its deletion
/// protection alone, or its approval policy alone.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = RuntimePatch)]
pub enum RuntimePatchBody {
    Upgrade(UpgradeClusterInput),
    DeletionProtection(DeletionProtectionChange),
    ApprovalPolicy(ApprovalPolicyChange),
}
