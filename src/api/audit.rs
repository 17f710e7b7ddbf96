//! The audit trail: one entry per accepted change, naming who asked for it. In production each entry is a JSON
//! log line at target `audit`; the trail is a handle of the application (not a log subscriber) so that a test
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
    CancelRequested,
}

impl AuditEvent {
    /// The log line's message.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditEvent::OperationAccepted => "operation accepted",
            AuditEvent::CancelRequested => "operation cancel requested",
        }
    }
}

/// One entry of the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub user: String,
    pub api: ApiKind,
    pub event: AuditEvent,
    pub operation_type: OperationType,
    pub runtime_id: Uuid,
    pub operation_id: Uuid,
}

impl AuditEntry {
    pub fn new(user: &str, api: ApiKind, event: AuditEvent, operation: &Operation) -> Self {
        AuditEntry {
            user: user.to_owned(),
            api,
            event,
            operation_type: operation.operation_type,
            runtime_id: operation.runtime_id,
            operation_id: operation.id,
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
            operation_type = ?entry.operation_type,
            runtime_id = %entry.runtime_id,
            operation_id = %entry.operation_id,
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
