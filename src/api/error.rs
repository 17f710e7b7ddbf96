//! The one place where a service error gets its HTTP status, its code, the component that caused it and the
//! message a caller may see; the REST and GraphQL adapters both render from this.

use axum::http::StatusCode;

use crate::service;

/// A service error as both APIs present it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub status: StatusCode,
    /// REST `error.code`, GraphQL `extensions.error_reason`: `invalid_input`, `operation_in_progress`, ...
    pub code: &'static str,
    /// Which part of the system the error comes from: `provisioner`, `database`, `auth-service`, `kubernetes`.
    pub component: &'static str,
    /// The offending request field (or header), for invalid input.
    pub field: Option<String>,
    /// Safe to show: internal details (addresses, OS errors, SQL) stay in the log.
    pub message: String,
}

pub fn classify(error: service::Error) -> Classified {
    let message = error.to_string();
    let (status, code, component, field) = match error {
        service::Error::Invalid(invalid) => {
            (StatusCode::BAD_REQUEST, "invalid_input", "provisioner", Some(invalid.field))
        }
        service::Error::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found", "provisioner", None),
        service::Error::Conflict { conflict, .. } => (StatusCode::CONFLICT, conflict.code(), "provisioner", None),
        service::Error::IdempotencyKeyReused => {
            (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused", "provisioner", Some("Idempotency-Key".into()))
        }
        service::Error::Unavailable { component, .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable", component, None)
        }
        service::Error::Store(store_error) => {
            tracing::error!(error = %store_error, "store failure while answering a request");
            return Classified {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                code: "internal",
                component: "database",
                field: None,
                message: "internal error".to_owned(),
            };
        }
    };
    Classified { status, code, component, field, message }
}
