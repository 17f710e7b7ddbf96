//! REST adapter with the cluster-provisioner's paths. Handlers only translate HTTP to service calls and back;
//! [`ApiError`] is the one place where errors get their HTTP status and problem body.

mod approvals;
mod certificates;
mod conditional;
mod events;
mod logs;
mod openapi;
mod operations;
mod problems;
mod provisions;
mod runtimes;
mod views;

pub use approvals::{ApprovalBody, approve_operation, reject_operation};
pub use certificates::renew_certificates;
pub use events::get_operation_events;
pub use logs::{get_logs, get_operation_logs};
pub use openapi::{ApiDoc, OPENAPI_PATH, openapi, openapi_json};
pub use operations::{cancel_operation, get_operation, list_operations, retry_operation};
pub use problems::get_problem_type;
pub use provisions::{
    create_provision, delete_provision, get_kubeconfig, get_provision, hibernate_provision, list_provisions,
    patch_provision, wake_provision,
};
pub use runtimes::{
    create_runtime, delete_runtime, get_runtime, hibernate_runtime, list_runtimes, patch_runtime, rotate_kubeconfig,
    wake_runtime,
};
pub use views::{
    Accepted, OperationList, ProvisionList, ProvisionStatusResponse, RuntimeList, RuntimePatchBody, RuntimeView,
};

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::audit::ApiKind;
use super::authentication::Identity;
use super::browser_guard;
use super::error::ApiError;
use super::views::OperationView;
use crate::domain::Operation;
use crate::domain::{OperationId, RuntimeId};
use crate::service::{self, Requested, Service};

type ApiResult<T> = Result<T, ApiError>;

/// The caller of a REST request and the service as it sees it: only its tenant's runtimes when it named one.
pub struct Caller {
    identity: Identity,
    service: Service,
}

impl axum::extract::FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &AppState) -> ApiResult<Caller> {
        // Put there by the authentication middleware, in front of every route that takes a caller.
        let identity = parts.extensions.get::<Identity>().cloned().ok_or_else(|| {
            ApiError::Unauthenticated("send a ServiceAccount token as Authorization: Bearer <token>".to_owned())
        })?;
        Ok(Caller { service: identity.service(&state.service), identity })
    }
}

/// How a change is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The seed's short `Accepted` body, under `/api/v1/provisions` (kept as it was for its clients).
    Accepted,
    /// The operation itself with `Location: /api/v1/operations/{id}` (AIP-151), under `/api/v1/runtimes`.
    Operation,
}

/// `status` with the operation, in `answer`'s shape.
async fn respond(answer: Answer, status: StatusCode, service: &Service, operation: Operation) -> ApiResult<Response> {
    match answer {
        Answer::Accepted => Ok((status, Json(Accepted::from(&operation))).into_response()),
        Answer::Operation => {
            let location = format!("/api/v1/operations/{}", operation.id);
            let view = OperationView::from(service.with_stages(operation).await?);
            Ok((status, [(header::LOCATION, location)], Json(view)).into_response())
        }
    }
}

/// What a change request led to: 202 with the operation queued now (after its audit line) or already running
/// the same change, 200 with the last operation once the target is reached (a retry changes nothing).
async fn requested(
    answer: Answer,
    identity: &Identity,
    service: &Service,
    requested: Requested,
) -> ApiResult<Response> {
    if let Requested::Queued(operation) = &requested {
        identity.audit(ApiKind::Rest, operation);
    }
    requested_without_audit(answer, service, requested).await
}

/// [`requested`] for a change whose handler wrote its own audit line.
async fn requested_without_audit(answer: Answer, service: &Service, requested: Requested) -> ApiResult<Response> {
    match requested {
        // A forced deprovisioning has ended as it is recorded.
        Requested::Queued(operation) if operation.forced.is_some() => {
            respond(answer, StatusCode::OK, service, operation).await
        }
        Requested::Queued(operation) | Requested::Running(operation) | Requested::Replayed(operation) => {
            respond(answer, StatusCode::ACCEPTED, service, operation).await
        }
        Requested::Done(operation) => respond(answer, StatusCode::OK, service, operation).await,
    }
}

/// The `Idempotency-Key` header, if sent (checked further by the service).
fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<&str>> {
    let Some(value) = headers.get("idempotency-key") else { return Ok(None) };
    let key = value.to_str().map_err(|_| {
        service::Error::from(service::Invalid::new(
            service::InvalidReason::Format,
            "Idempotency-Key",
            "must be visible ASCII",
        ))
    })?;
    Ok(Some(key))
}

/// Reads a JSON body within the size limit, refusing other content types with 415.
async fn json_body<T: serde::de::DeserializeOwned>(headers: &HeaderMap, body: Body) -> ApiResult<T> {
    if !browser_guard::is_json(headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    read_json(body).await
}

/// Reads a PATCH body: JSON, or a JSON merge patch (RFC 7396, `application/merge-patch+json`), which the upgrade
/// body already is; other content types get 415.
async fn merge_patch_body<T: serde::de::DeserializeOwned>(headers: &HeaderMap, body: Body) -> ApiResult<T> {
    if !browser_guard::is_json(headers) && !browser_guard::is_media_type(headers, "application/merge-patch+json") {
        return Err(ApiError::UnsupportedMediaType);
    }
    read_json(body).await
}

async fn read_json<T: serde::de::DeserializeOwned>(body: Body) -> ApiResult<T> {
    // The body limit layer (`limit_body` in api/middleware.rs, layered in api/mod.rs) has already read the whole
    // body within the limit.
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|error| ApiError::MalformedBody { field: None, message: format!("unreadable body: {error}") })?;
    let value = serde_json::from_slice(&bytes)
        .map_err(|error| service::Error::from(service::Invalid::from_serde(None, ".", &error)))?;
    Ok(service::deserialize_naming_every_field(value, None).map_err(service::Error::from)?)
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DryRunQuery {
    #[serde(default)]
    dry_run: bool,
}

/// `?confirm=<name>&force=true` of a deprovisioning.
#[derive(Debug, serde::Deserialize)]
pub struct DeletionQuery {
    confirm: Option<String>,
    #[serde(default)]
    force: bool,
}

/// `?dryRun=true&approvalPolicy=manual` of an upgrade.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeQuery {
    #[serde(default)]
    dry_run: bool,
    approval_policy: Option<String>,
}

/// An upgrade's `dryRun` and its own approval policy, checked (400 naming `approvalPolicy`).
fn upgrade_query(
    query: Result<Query<UpgradeQuery>, QueryRejection>,
) -> ApiResult<(bool, Option<crate::domain::approval::ApprovalPolicy>)> {
    use crate::domain::approval::ApprovalPolicy;
    let Query(query) = query.map_err(|rejection| ApiError::MalformedBody {
        field: Some("dryRun".into()),
        message: format!("invalid query: {}", rejection.body_text()),
    })?;
    let policy = query
        .approval_policy
        .map(|text| {
            ApprovalPolicy::parse(&text).ok_or_else(|| {
                service::Error::from(service::Invalid::new(
                    service::InvalidReason::UnsupportedValue,
                    "approvalPolicy",
                    "must be one of auto, manual, safeOnly",
                ))
            })
        })
        .transpose()?;
    Ok((query.dry_run, policy))
}

/// `?dryRun=true`; axum's rejection would answer text/plain.
fn dry_run(query: Result<Query<DryRunQuery>, QueryRejection>) -> ApiResult<bool> {
    query.map(|Query(query)| query.dry_run).map_err(|rejection| ApiError::MalformedBody {
        field: Some("dryRun".into()),
        message: format!("invalid query: {}", rejection.body_text()),
    })
}

/// The runtime id a path names, checked as every id is (400 naming `id`).
fn runtime_id(id: &str) -> ApiResult<RuntimeId> {
    Ok(service::parse_runtime_id("id", id).map_err(service::Error::from)?)
}

/// The operation id a path names, checked as every id is (400 naming `id`).
fn operation_id(id: &str) -> ApiResult<OperationId> {
    Ok(service::parse_operation_id("id", id).map_err(service::Error::from)?)
}

/// The `{id}` path segment; axum's own rejection (a segment that is not UTF-8 once percent-decoded) would answer
/// text/plain, every other error here is a problem.
fn path_id(id: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    id.map(|Path(id)| id).map_err(|rejection| ApiError::MalformedBody {
        field: Some("id".into()),
        message: format!("invalid id: {}", rejection.body_text()),
    })
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageQuery {
    first: Option<i32>,
    after: Option<String>,
}

/// A query string; axum's rejection would answer text/plain and name no parameter.
fn query<T>(query: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    query.map(|Query(query)| query).map_err(|rejection| ApiError::MalformedBody {
        field: None,
        message: format!("invalid query: {}", rejection.body_text()),
    })
}

/// Requests no route matches get the same JSON errors as everything else.
pub async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::NoRoute(uri.path().to_owned())
}

pub async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::MethodNotAllowed(method.to_string())
}
