//! Every REST error body: an RFC 9457 problem (`application/problem+json`) with the project's members, and the
//! request id that becomes its `instance`.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use serde::Serialize;
use tower_http::request_id::RequestId;
use utoipa::ToSchema;

use super::error_code::ErrorCode;
use crate::domain::Component;
use crate::service::InvalidReason;

/// The media type of every REST error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

tokio::task_local! {
    /// The id of the request being answered (`X-Request-Id`), for the problems its handlers answer with.
    static REQUEST_ID: String;
}

/// Runs the rest of the request with its id at hand, so that an error body can name it.
pub(super) async fn with_request_id(request: Request, next: Next) -> Response {
    let id = request.extensions().get::<RequestId>().and_then(|id| id.header_value().to_str().ok());
    match id.map(str::to_owned) {
        Some(id) => REQUEST_ID.scope(id, next.run(request)).await,
        None => next.run(request).await,
    }
}

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// A path into the request body (for example `clusterConfig.workerPool.minSize`), or a header, query
    /// parameter or path segment.
    pub field: String,
    /// Why the field was refused, for a program to branch on.
    pub reason: InvalidReason,
    pub message: String,
}

/// An error as RFC 9457 describes it, with the project's members.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// The code's page: `/api/v1/problems/{code}`, relative to the service's address; `docs/api/errors.md`
    /// lists the same.
    #[serde(rename = "type")]
    problem_type: String,
    /// The code's short, fixed title.
    title: &'static str,
    /// The HTTP status.
    status: u16,
    /// What went wrong in this occurrence.
    detail: String,
    /// The request id (the answer's `X-Request-Id`), under which the service logged the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    instance: Option<String>,
    code: ErrorCode,
    /// The offending field (a path into the body, or a header, query parameter or path segment): the first of
    /// `errors`.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    /// For `invalid_input`: every invalid field of the request at once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<FieldError>,
    /// The part of the system the error comes from: `provisioner` for the request itself, the dependency that did
    /// not answer for `unavailable`.
    component: Component,
    /// Deprecated: the body's shape before problems (`code`, `message`, `field`, `errors`, `component`), kept for
    /// one release so that clients reading `error.code` keep working; read the members above instead.
    #[schema(deprecated)]
    error: LegacyError,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LegacyError {
    code: ErrorCode,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<FieldError>,
    /// Only for 503, as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    component: Option<Component>,
}

impl Problem {
    pub fn new(
        code: ErrorCode,
        detail: String,
        field: Option<String>,
        errors: Vec<FieldError>,
        component: Component,
    ) -> Problem {
        let legacy = LegacyError {
            code,
            message: detail.clone(),
            field: field.clone(),
            errors: errors.clone(),
            component: (code.status() == StatusCode::SERVICE_UNAVAILABLE).then_some(component),
        };
        Problem {
            problem_type: code.problem_type(),
            title: code.entry().title,
            status: code.status().as_u16(),
            detail,
            instance: REQUEST_ID.try_with(String::clone).ok(),
            code,
            field,
            errors,
            component,
            error: legacy,
        }
    }
}
