//! The audit trail: one entry per accepted change (an operation, a deletion protection) and per read of a secret
//! or a log, naming who asked for it. In production each entry is a JSON log line at target `audit`; the trail is a handle of the application (not a log subscriber) so that a test
//! can keep the entries of its own app while other tests log from other threads.

use std::sync::Arc;

use uuid::Uuid;

use crate::domain::{Operation, OperationType};

/// Which API the change came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKind {
    Rest,
    Graphql,
}

impl ApiKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiKind::Rest => "rest",
            ApiKind::Graphql => "graphql",
        }
    }
}

/// What was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditEvent {
    OperationAccepted,
    /// A runtime was marked deleted without a run: what it had in the cloud may remain.
    DeprovisioningForced,
    CancelRequested,
    /// A runtime's kubeconfig was served.
    KubeconfigRead,
    /// A new kubeconfig was minted for a runtime on request.
    KubeconfigRotated,
    /// A run's logs were served (or a follow started).
    LogsRead,
    DeletionProtectionOn,
    DeletionProtectionOff,
    PlanApproved,
    PlanRejected,
    ApprovalPolicyChanged,
}

impl AuditEvent {
    /// The log line's message.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditEvent::OperationAccepted => "operation accepted",
            AuditEvent::DeprovisioningForced => "deprovisioning forced",
            AuditEvent::CancelRequested => "operation cancel requested",
            AuditEvent::KubeconfigRead => "kubeconfig read",
            AuditEvent::KubeconfigRotated => "kubeconfig rotated",
            AuditEvent::LogsRead => "logs read",
            AuditEvent::DeletionProtectionOn => "deletion protection turned on",
            AuditEvent::DeletionProtectionOff => "deletion protection turned off",
            AuditEvent::PlanApproved => "plan approved",
            AuditEvent::PlanRejected => "plan rejected",
            AuditEvent::ApprovalPolicyChanged => "approval policy changed",
        }
    }
}

/// One entry of the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub user: String,
    pub api: ApiKind,
    pub event: AuditEvent,
    /// What the entry is about; a read names what its request named (a runtime, an operation, or both).
    pub operation_type: Option<OperationType>,
    pub runtime_id: Option<Uuid>,
    pub operation_id: Option<Uuid>,
    /// A kubeconfig read or rotated: until when the one handed out signs in (none for a cloud's token plugin).
    pub kubeconfig_expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl AuditEntry {
    pub fn new(user: &str, api: ApiKind, event: AuditEvent, operation: &Operation) -> Self {
        AuditEntry {
            user: user.to_owned(),
            api,
            event,
            operation_type: Some(operation.operation_type),
            runtime_id: Some(operation.runtime_id),
            operation_id: Some(operation.id),
            kubeconfig_expires_at: None,
        }
    }

    /// An entry about a runtime or an operation without an operation queued: a read of what it holds, a change of
    /// the runtime's own record.
    pub fn about(
        user: &str,
        api: ApiKind,
        event: AuditEvent,
        runtime_id: Option<Uuid>,
        operation_id: Option<Uuid>,
    ) -> Self {
        AuditEntry {
            user: user.to_owned(),
            api,
            event,
            operation_type: None,
            runtime_id,
            operation_id,
            kubeconfig_expires_at: None,
        }
    }
}

/// Where entries go.
pub trait AuditSink: Send + Sync {
    fn record(&self, entry: &AuditEntry);
}

/// The production sink: a log line at target `audit`.
struct LogSink;

impl AuditSink for LogSink {
    fn record(&self, entry: &AuditEntry) {
        tracing::info!(
            target: "audit",
            user = %entry.user,
            api = entry.api.as_str(),
            operation_type = entry.operation_type.map(OperationType::as_str),
            runtime_id = entry.runtime_id.map(|id| id.to_string()),
            operation_id = entry.operation_id.map(|id| id.to_string()),
            kubeconfig_expires_at = entry.kubeconfig_expires_at.map(|at| at.to_rfc3339()),
            "{}",
            entry.event.as_str()
        );
    }
}

/// The application's audit trail, shared by both APIs.
#[derive(Clone)]
pub struct AuditTrail(Arc<dyn AuditSink>);

impl AuditTrail {
    /// Entries as log lines at target `audit`.
    pub fn log() -> Self {
        AuditTrail(Arc::new(LogSink))
    }

    /// Entries to another sink (tests keep them).
    pub fn to_sink(sink: Arc<dyn AuditSink>) -> Self {
        AuditTrail(sink)
    }

    pub fn record(&self, entry: &AuditEntry) {
        self.0.record(entry);
    }
}

impl std::fmt::Debug for AuditTrail {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("AuditTrail")
    }
}
