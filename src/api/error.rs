//! The one place where a service error gets its HTTP status, its code, the component that caused it and the
//! message a caller may see; the REST and GraphQL adapters both render from this. Also every REST error body.

use std::time::Duration;

use async_graphql::ParseRequestError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::Component;
use crate::service;

/// When a caller refused a stream should try again: streams are long-lived, a place frees when one closes.
const STREAM_RETRY_AFTER_SECONDS: &str = "10";
/// When a caller turned away by the concurrency limit should try again: requests end quickly.
const OVERLOADED_RETRY_AFTER_SECONDS: &str = "1";
/// When a caller answered 503 (a dependency down, or out of time) should try again.
pub const UNAVAILABLE_RETRY_AFTER_SECONDS: &str = "5";

/// A service error as both APIs present it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub status: StatusCode,
    /// REST `error.code`, GraphQL `extensions.error_reason`: `invalid_input`, `operation_in_progress`, ...
    pub code: &'static str,
    /// Which part of the system the error comes from: `provisioner`, `database`, `auth-service`, `kubernetes`.
    pub component: Component,
    /// The offending request field (or header), for invalid input: the first of `errors`.
    pub field: Option<String>,
    /// Every invalid field of the request, for invalid input.
    pub errors: Vec<FieldError>,
    /// Safe to show: internal details (addresses, OS errors, SQL) stay in the log.
    pub message: String,
}

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// A path into the request body, for example `clusterConfig.workerPool.minSize`.
    pub field: String,
    pub message: String,
}

pub fn classify(error: service::Error) -> Classified {
    let message = error.to_string();
    let mut errors = Vec::new();
    let (status, code, component, field) = match error {
        service::Error::Invalid(rejected) => {
            errors = rejected
                .all()
                .map(|invalid| FieldError { field: invalid.field.clone(), message: invalid.message.clone() })
                .collect();
            (StatusCode::BAD_REQUEST, "invalid_input", Component::Provisioner, Some(rejected.first.field))
        }
        service::Error::NothingToChange { .. } => {
            (StatusCode::BAD_REQUEST, "nothing_to_change", Component::Provisioner, None)
        }
        service::Error::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found", Component::Provisioner, None),
        service::Error::Conflict { conflict, .. } => {
            (StatusCode::CONFLICT, conflict.as_str(), Component::Provisioner, None)
        }
        service::Error::IdempotencyKeyReused => (
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            Component::Provisioner,
            Some("Idempotency-Key".into()),
        ),
        service::Error::OverBudget { .. } => {
            (StatusCode::PAYLOAD_TOO_LARGE, "over_budget", Component::Provisioner, None)
        }
        service::Error::TooManyStreams { .. } => {
            (StatusCode::TOO_MANY_REQUESTS, "too_many_streams", Component::Provisioner, None)
        }
        service::Error::Unavailable { component, .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable", component, None)
        }
        service::Error::Store(store_error) => {
            tracing::error!(error = %store_error, "store failure while answering a request");
            return Classified {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                code: "internal",
                component: Component::Database,
                field: None,
                errors,
                message: "internal error".to_owned(),
            };
        }
    };
    Classified { status, code, component, field, errors, message }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable code, for example `invalid_input` or `operation_in_progress`.
    code: String,
    message: String,
    /// The offending field, as a path into the request body (or a header name): the first of `errors`.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    /// For `invalid_input`: every invalid field of the request at once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<FieldError>,
    /// For `unavailable`: the dependency that did not answer (`database`, `auth-service`, `kubernetes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    component: Option<String>,
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let overloaded = matches!(self, ApiError::Overloaded);
        let mut component = None;
        let mut errors = Vec::new();
        let (status, code, message, field) = match self {
            ApiError::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type".to_owned(),
                "the body must be JSON sent with Content-Type: application/json".to_owned(),
                Some("Content-Type".to_owned()),
            ),
            ApiError::PayloadTooLarge { limit } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large".to_owned(),
                format!("the body is larger than {limit} bytes"),
                None,
            ),
            ApiError::MalformedBody { field, message } => {
                errors.extend(field.iter().map(|field| FieldError { field: field.clone(), message: message.clone() }));
                (StatusCode::BAD_REQUEST, "invalid_input".to_owned(), message, field)
            }
            ApiError::BatchUnsupported => (
                StatusCode::BAD_REQUEST,
                "batch_not_supported".to_owned(),
                "batch requests are not supported: send one GraphQL operation per request".to_owned(),
                None,
            ),
            ApiError::Unauthenticated(message) => {
                (StatusCode::UNAUTHORIZED, "unauthenticated".to_owned(), message, None)
            }
            ApiError::Forbidden(message) => (StatusCode::FORBIDDEN, "forbidden".to_owned(), message, None),
            ApiError::Unavailable(message) => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable".to_owned(), message, None)
            }
            ApiError::Overloaded => (
                StatusCode::TOO_MANY_REQUESTS,
                "overloaded".to_owned(),
                "too many requests at once: retry shortly".to_owned(),
                None,
            ),
            ApiError::Timeout(limit) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout".to_owned(),
                format!("the request took longer than {}", humantime::format_duration(limit)),
                None,
            ),
            ApiError::NoRoute(path) => {
                (StatusCode::NOT_FOUND, "not_found".to_owned(), format!("no such path: {path}"), None)
            }
            ApiError::MethodNotAllowed(method) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed".to_owned(),
                format!("{method} is not allowed on this path"),
                None,
            ),
            ApiError::PreconditionFailed(message) => (
                StatusCode::PRECONDITION_FAILED,
                "precondition_failed".to_owned(),
                message,
                Some("If-Match".to_owned()),
            ),
            ApiError::Service(error) => {
                let classified = classify(error);
                if classified.status == StatusCode::SERVICE_UNAVAILABLE {
                    component = Some(classified.component.as_str().to_owned());
                }
                errors = classified.errors;
                (classified.status, classified.code.to_owned(), classified.message, classified.field)
            }
        };
        let mut response = (status, Json(ErrorBody { error: ErrorDetail { code, message, field, errors, component } }))
            .into_response();
        if status == StatusCode::UNAUTHORIZED {
            // RFC 6750: names the scheme the client has to use.
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = retry_after(status, overloaded) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(seconds));
        }
        response
    }
}

/// When a caller answered `status` should try again, if it should (`overloaded`: turned away by the concurrency
/// limit rather than by the limit of open streams).
fn retry_after(status: StatusCode, overloaded: bool) -> Option<&'static str> {
    match (status, overloaded) {
        (StatusCode::TOO_MANY_REQUESTS, true) => Some(OVERLOADED_RETRY_AFTER_SECONDS),
        (StatusCode::TOO_MANY_REQUESTS, false) => Some(STREAM_RETRY_AFTER_SECONDS),
        (StatusCode::SERVICE_UNAVAILABLE, _) => Some(UNAVAILABLE_RETRY_AFTER_SECONDS),
        _ => None,
    }
}
