//! The one place where a service error gets its HTTP status, its code, the component that caused it and the
//! message a caller may see; the REST and GraphQL adapters both render from this.

use std::time::Duration;

use super::error_code::{ErrorCode, Retry};
use super::problem::{FieldError, PROBLEM_JSON, Problem};
use crate::domain::Component;
use crate::service::{self, InvalidReason};
use async_graphql::ParseRequestError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// When a caller refused a stream should try again: streams are long-lived, a place frees when one closes.
const STREAM_RETRY_AFTER_SECONDS: &str = "10";
/// When a caller turned away by the concurrency limit should try again: requests end quickly.
const OVERLOADED_RETRY_AFTER_SECONDS: &str = "1";
/// When a caller answered 503 (a dependency down, or out of time) should try again.
pub const UNAVAILABLE_RETRY_AFTER_SECONDS: &str = "5";

/// A service error as both APIs present it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// REST `code`, GraphQL `extensions.error_reason`; it decides the HTTP status.
    pub code: ErrorCode,
    /// Which part of the system the error comes from: `provisioner`, `database`, `auth-service`, `kubernetes`.
    pub component: Component,
    /// The offending request field (or header), for invalid input: the first of `errors`.
    pub field: Option<String>,
    /// Every invalid field of the request, for invalid input.
    pub errors: Vec<FieldError>,
    /// Safe to show: internal details (addresses, OS errors, SQL) stay in the log.
    pub message: String,
}

impl Classified {
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }
}

pub fn classify(error: service::Error) -> Classified {
    let message = error.to_string();
    let mut errors = Vec::new();
    let (code, component, field) = match error {
        service::Error::Invalid(rejected) => {
            errors = rejected
                .all()
                .map(|invalid| FieldError {
                    field: invalid.field.clone(),
                    reason: invalid.reason,
                    message: invalid.message.clone(),
                })
                .collect();
            (ErrorCode::InvalidInput, Component::Provisioner, Some(rejected.first.field))
        }
        service::Error::NothingToChange { .. } => (ErrorCode::NothingToChange, Component::Provisioner, None),
        service::Error::NotFound { .. } => (ErrorCode::NotFound, Component::Provisioner, None),
        service::Error::Conflict { conflict, .. } => (ErrorCode::Conflict(conflict), Component::Provisioner, None),
        service::Error::IdempotencyKeyReused => {
            (ErrorCode::IdempotencyKeyReused, Component::Provisioner, Some("Idempotency-Key".into()))
        }
        service::Error::OverBudget { .. } => (ErrorCode::OverBudget, Component::Provisioner, None),
        service::Error::TooManyStreams { .. } => (ErrorCode::TooManyStreams, Component::Provisioner, None),
        service::Error::Unavailable { component, .. } => (ErrorCode::Unavailable, component, None),
        service::Error::Store(store_error) => {
            tracing::error!(error = %store_error, "store failure while answering a request");
            return Classified {
                code: ErrorCode::Internal,
                component: Component::Database,
                field: None,
                errors,
                message: "internal error".to_owned(),
            };
        }
    };
    Classified { code, component, field, errors, message }
}

/// Every REST error, with its status and JSON body decided in [`IntoResponse`] below.
#[derive(Debug)]
pub enum ApiError {
    Service(service::Error),
    UnsupportedMediaType,
    PayloadTooLarge {
        limit: usize,
    },
    /// The body is not the JSON the path expects; `field` is the path serde stopped at.
    MalformedBody {
        field: Option<String>,
        message: String,
    },
    /// GraphQL batches (a JSON array) would bypass the per-request limits.
    BatchUnsupported,
    /// No usable bearer token; answered with `WWW-Authenticate: Bearer`.
    Unauthenticated(String),
    /// A valid identity that is not allowed.
    Forbidden(String),
    /// A dependency of the request itself (not of the service) is missing or failing.
    Unavailable(String),
    /// More than `APP_MAX_CONCURRENT_REQUESTS` requests at once.
    Overloaded,
    /// The request took longer than `APP_REQUEST_TIMEOUT`.
    Timeout(Duration),
    /// No route has this path.
    NoRoute(String),
    /// The path exists, but not with this method.
    MethodNotAllowed(String),
    /// `If-Match` names another version of the resource than the current one.
    PreconditionFailed(String),
}

impl From<ParseRequestError> for ApiError {
    fn from(error: ParseRequestError) -> Self {
        match error {
            ParseRequestError::UnsupportedBatch => ApiError::BatchUnsupported,
            other => ApiError::MalformedBody { field: None, message: format!("invalid GraphQL request: {other}") },
        }
    }
}

impl From<service::Error> for ApiError {
    fn from(error: service::Error) -> Self {
        ApiError::Service(error)
    }
}

impl ApiError {
    fn classify(self) -> Classified {
        let plain = |code, message: String| Classified {
            code,
            component: Component::Provisioner,
            field: None,
            errors: Vec::new(),
            message,
        };
        match self {
            ApiError::Service(error) => classify(error),
            ApiError::UnsupportedMediaType => Classified {
                field: Some("Content-Type".to_owned()),
                ..plain(
                    ErrorCode::UnsupportedMediaType,
                    "the body must be JSON sent with Content-Type: application/json".to_owned(),
                )
            },
            ApiError::PayloadTooLarge { limit } => {
                plain(ErrorCode::PayloadTooLarge, format!("the body is larger than {limit} bytes"))
            }
            ApiError::MalformedBody { field, message } => Classified {
                errors: field
                    .iter()
                    .map(|field| FieldError {
                        field: field.clone(),
                        reason: InvalidReason::Format,
                        message: message.clone(),
                    })
                    .collect(),
                field,
                ..plain(ErrorCode::InvalidInput, message)
            },
            ApiError::BatchUnsupported => plain(
                ErrorCode::BatchNotSupported,
                "batch requests are not supported: send one GraphQL operation per request".to_owned(),
            ),
            ApiError::Unauthenticated(message) => plain(ErrorCode::Unauthenticated, message),
            ApiError::Forbidden(message) => plain(ErrorCode::Forbidden, message),
            ApiError::Unavailable(message) => plain(ErrorCode::Unavailable, message),
            ApiError::Overloaded => plain(ErrorCode::Overloaded, "too many requests at once: retry shortly".to_owned()),
            ApiError::Timeout(limit) => {
                plain(ErrorCode::Timeout, format!("the request took longer than {}", humantime::format_duration(limit)))
            }
            ApiError::NoRoute(path) => plain(ErrorCode::NotFound, format!("no such path: {path}")),
            ApiError::MethodNotAllowed(method) => {
                plain(ErrorCode::MethodNotAllowed, format!("{method} is not allowed on this path"))
            }
            ApiError::PreconditionFailed(message) => {
                Classified { field: Some("If-Match".to_owned()), ..plain(ErrorCode::PreconditionFailed, message) }
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let Classified { code, component, field, errors, message } = self.classify();
        let problem = Problem::new(code, message, field, errors, component);
        let mut response = (code.status(), [(header::CONTENT_TYPE, PROBLEM_JSON)], Json(problem)).into_response();
        if code == ErrorCode::Unauthenticated {
            // RFC 6750: names the scheme the client has to use.
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = retry_after(code) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(seconds));
        }
        response
    }
}

/// When a caller answered with `code` should try again, if it should.
fn retry_after(code: ErrorCode) -> Option<&'static str> {
    match code {
        ErrorCode::Overloaded => Some(OVERLOADED_RETRY_AFTER_SECONDS),
        ErrorCode::TooManyStreams => Some(STREAM_RETRY_AFTER_SECONDS),
        code if code.entry().retry == Retry::AfterRetryAfter => Some(UNAVAILABLE_RETRY_AFTER_SECONDS),
        _ => None,
    }
}
