//! REST adapter with the cluster-provisioner's paths. Handlers only translate HTTP to service calls and back;
//! [`ApiError`] is the one place where errors get their HTTP status and JSON body.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::StreamExt as _;
use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi, ToSchema};

use super::AppState;
use super::audit::{ApiKind, AuditEvent};
use super::browser_guard;
use super::caller::Identity;
use super::error::{ApiError, ErrorBody};
use crate::domain::run_log::ContainerLog;
use crate::domain::{
    LastError, Operation, OperationState, OperationType, PlanSummary, ProvisionRequest, StageEntry, UpgradeClusterInput,
};
use crate::service::{self, RuntimeStatus, Service};

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
    fn new(status: RuntimeStatus, hibernation: service::HibernationStatus) -> Self {
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
    fn new(operation: Operation, stages: Vec<StageEntry>) -> Self {
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
    operations: Vec<OperationRecord>,
    /// Pass as `after` for the next page; null on the last page.
    next_cursor: Option<String>,
}

/// A page of runtimes, in creation order, each with its last operation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionList {
    runtimes: Vec<ProvisionStatusResponse>,
    /// Pass as `after` for the next page; null on the last page.
    next_cursor: Option<String>,
}

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

/// 202 with the operation.
fn accepted(operation: &Operation) -> Response {
    (StatusCode::ACCEPTED, Json(Accepted::from(operation))).into_response()
}

/// 202 with an operation just queued for `identity`, after its audit line.
fn queued(identity: &Identity, operation: &Operation) -> Response {
    identity.audit(ApiKind::Rest, operation);
    accepted(operation)
}

/// Reads a JSON body within the size limit, refusing other content types with 415.
async fn json_body<T: serde::de::DeserializeOwned>(headers: &HeaderMap, body: Body) -> ApiResult<T> {
    if !browser_guard::is_json(headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    // The body limit layer (`limit_body` in api/mod.rs) has already read the whole body within the limit.
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|error| ApiError::MalformedBody { field: None, message: format!("unreadable body: {error}") })?;
    let deserializer = &mut serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        ApiError::MalformedBody {
            field: (path != ".").then_some(path),
            message: format!("invalid request body: {}", error.inner()),
        }
    })
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DryRunQuery {
    #[serde(default)]
    dry_run: bool,
}

/// `?dryRun=true`; axum's rejection would answer text/plain.
fn dry_run(query: Result<Query<DryRunQuery>, QueryRejection>) -> ApiResult<bool> {
    query.map(|Query(query)| query.dry_run).map_err(|rejection| ApiError::MalformedBody {
        field: Some("dryRun".into()),
        message: format!("invalid query: {}", rejection.body_text()),
    })
}

/// The `{id}` path segment; axum's own rejection (a segment that is not UTF-8 once percent-decoded) would answer
/// text/plain, every other error here is JSON.
fn path_id(id: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    id.map(|Path(id)| id).map_err(|rejection| ApiError::MalformedBody {
        field: Some("id".into()),
        message: format!("invalid id: {}", rejection.body_text()),
    })
}

#[utoipa::path(
    post,
    path = "/api/v1/provisions",
    request_body(content = ProvisionRequest, example = json!({
        "runtimeInput": {"name": "demo", "description": "first cluster", "labels": {"team": "platform"}},
        "clusterConfig": {
            "topology": "eks", "credentialId": "dev-aws", "region": "eu-central-1", "kubernetesVersion": "1.34",
            "environment": "dev",
            "workerPool": {"machineType": "t3.large", "minSize": 1, "maxSize": 3, "diskSizeGb": 50},
            "aws": {"zones": ["eu-central-1a", "eu-central-1b"]}
        }
    })),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key get the first answer"),
        ("dryRun" = Option<bool>, Query, description = "Only validate, render and plan: the runtime is recorded as a preview (its name stays free) and nothing is built"),
    ),
    responses(
        (status = 202, description = "Provisioning queued", body = Accepted),
        (status = 400, description = "Invalid input; `field` names the first invalid field, `errors` every one", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Idempotency-Key reused for a different request", body = ErrorBody),
    )
)]
pub async fn create_provision(
    Caller { identity, service }: Caller,
    query: Result<Query<DryRunQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let dry_run = dry_run(query)?;
    let request: ProvisionRequest = json_body(&headers, body).await?;
    let idempotency_key = match headers.get("idempotency-key") {
        Some(value) => Some(value.to_str().map_err(|_| {
            service::Error::from(service::Invalid {
                field: "Idempotency-Key".into(),
                message: "must be visible ASCII".into(),
            })
        })?),
        None => None,
    };
    let accepted = service.provision_runtime(request, idempotency_key, dry_run, &identity.username).await?;
    // A replayed request changed nothing: its audit line is the first request's.
    if !accepted.replayed {
        identity.audit(ApiKind::Rest, &accepted.operation);
    }
    let location = format!("/api/v1/provisions/{}", accepted.operation.runtime_id);
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(Accepted::from(&accepted.operation)))
        .into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/provisions/{id}",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 200, description = "Status of the runtime's last operation", body = ProvisionStatusResponse),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
    )
)]
pub async fn get_provision(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<ProvisionStatusResponse>> {
    let id = path_id(id)?;
    let status = service.runtime_status(&id).await?;
    let hibernation = service.hibernation_status(&status).await?;
    Ok(Json(ProvisionStatusResponse::new(status, hibernation)))
}

#[utoipa::path(
    get,
    path = "/api/v1/provisions/{id}/logs",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("operationId" = Option<uuid::Uuid>, Query, description = "One of the runtime's operations (default: its last)"),
        ("tailLines" = Option<i64>, Query, minimum = 1, description = "Only the last lines of each container"),
    ),
    responses(
        (status = 200, description = "Logs of the `init` and `terraform-runner` containers of the operation's run: kept in the database once it ended, from its pod while it runs", body = String, content_type = "text/plain"),
        (status = 400, description = "An id is not a UUID, or `tailLines` is not a positive number", body = ErrorBody),
        (status = 404, description = "Unknown runtime, or the operation is not one of its own", body = ErrorBody),
        (status = 409, description = "No runner pod exists yet, or the run ended without one (`no_runner_pod`)", body = ErrorBody),
    )
)]
pub async fn get_logs(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<LogsQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let query = logs_query(query)?;
    let budget = service.log_budget();
    let logs = service.logs(&id, query.operation_id.as_deref(), query.tail_lines, &budget).await?;
    identity.audit_read(ApiKind::Rest, AuditEvent::LogsRead, &id, query.operation_id.as_deref());
    Ok(logs_text(&logs))
}

#[utoipa::path(
    get,
    path = "/api/v1/operations/{operationId}/logs",
    params(
        ("operationId" = uuid::Uuid, Path, description = "Operation id"),
        ("tailLines" = Option<i64>, Query, minimum = 1, description = "Only the last lines of each container"),
        ("follow" = Option<bool>, Query, description = "Stream the runner's lines as it prints them (chunked) until its container ends; once the run ended, its kept log"),
    ),
    responses(
        (status = 200, description = "Logs of the `init` and `terraform-runner` containers of the operation's run: kept in the database once it ended, from its pod while it runs; with `follow`, the runner's log as a stream", body = String, content_type = "text/plain"),
        (status = 400, description = "The id is not a UUID, `tailLines` is not a positive number, or both `tailLines` and `follow` are given", body = ErrorBody),
        (status = 404, description = "Unknown operation", body = ErrorBody),
        (status = 409, description = "No runner pod exists yet, or the run ended without one (`no_runner_pod`)", body = ErrorBody),
        (status = 413, description = "The logs are longer than one request may read (`over_budget`)", body = ErrorBody),
        (status = 429, description = "With `follow`: the caller, or everyone together, holds as many open streams as allowed (`too_many_streams`); `Retry-After` says when to try again", body = ErrorBody),
    )
)]
pub async fn get_operation_logs(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<LogsQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let query = logs_query(query)?;
    if query.operation_id.is_some() {
        return Err(ApiError::MalformedBody {
            field: Some("operationId".into()),
            message: "the operation is the one in the path".into(),
        });
    }
    if query.follow == Some(true) {
        if query.tail_lines.is_some() {
            return Err(ApiError::MalformedBody {
                field: Some("tailLines".into()),
                message: "a followed log starts at its beginning: leave out tailLines".into(),
            });
        }
        let slot = service.open_stream(&identity.username)?;
        let lines = service.follow_operation_log(&id).await?;
        identity.audit_operation_logs(ApiKind::Rest, &id);
        // An error after the answer started can only end the stream; the log shows why. The stream holds its slot.
        let body = lines.map(move |line| {
            let _held = &slot;
            line.map_err(|error| {
                tracing::warn!(%error, "following a run's log stopped");
                std::io::Error::other(error.to_string())
            })
        });
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Body::from_stream(body)).into_response());
    }
    let logs = service.operation_logs(&id, query.tail_lines, &service.log_budget()).await?;
    identity.audit_operation_logs(ApiKind::Rest, &id);
    Ok(logs_text(&logs))
}

/// axum's rejection would answer text/plain and name no parameter.
fn logs_query(query: Result<Query<LogsQuery>, QueryRejection>) -> ApiResult<LogsQuery> {
    query.map(|Query(query)| query).map_err(|rejection| {
        let text = rejection.body_text();
        let field = ["operationId", "follow"].into_iter().find(|field| text.contains(field)).unwrap_or("tailLines");
        ApiError::MalformedBody { field: Some(field.into()), message: format!("invalid query: {text}") }
    })
}

/// Each container's log under a `==> name <==` header, as `tail` prints several files.
fn logs_text(logs: &[ContainerLog]) -> Response {
    let text: String = logs
        .iter()
        .map(|container| format!("==> {} <==\n{}\n", container.container, container.log.trim_end()))
        .collect();
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageQuery {
    first: Option<i32>,
    after: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionListQuery {
    /// `queued`, `running`, `succeeded` or `failed`: the state of the runtime's last operation.
    status: Option<String>,
    label: Option<String>,
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

fn operation_state(status: &str) -> ApiResult<OperationState> {
    let state = match status {
        "queued" => OperationState::Pending,
        "running" => OperationState::InProgress,
        "succeeded" => OperationState::Succeeded,
        "failed" => OperationState::Failed,
        other => {
            let message = format!("{other:?} is not queued, running, succeeded or failed");
            return Err(service::Error::from(service::Invalid { field: "status".into(), message }).into());
        }
    };
    Ok(state)
}

#[utoipa::path(
    get,
    path = "/api/v1/provisions",
    params(
        ("status" = Option<String>, Query, description = "Only runtimes whose last operation is `queued`, `running`, `succeeded` or `failed`"),
        ("label" = Option<String>, Query, description = "Only runtimes with this label, as `key=value`"),
        ("first" = Option<i32>, Query, minimum = 1, maximum = 100, description = "Page size (20 when left out)"),
        ("after" = Option<String>, Query, description = "`nextCursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "Runtimes in creation order, with their last operation", body = ProvisionList),
        (status = 400, description = "An invalid filter, page size or cursor", body = ErrorBody),
    )
)]
pub async fn list_provisions(
    Caller { service, .. }: Caller,
    list: Result<Query<ProvisionListQuery>, QueryRejection>,
) -> ApiResult<Json<ProvisionList>> {
    let list = query(list)?;
    let status = list.status.as_deref().map(operation_state).transpose()?;
    let page = service.runtimes(status, list.label.as_deref(), list.after.as_deref(), list.first).await?;
    let next_cursor =
        page.has_next_page.then(|| page.runtimes.last().map(|(runtime, _)| runtime.id.to_string())).flatten();
    let mut runtimes = Vec::with_capacity(page.runtimes.len());
    for (runtime, last_operation) in page.runtimes {
        let Some(last_operation) = last_operation else { continue };
        let status = RuntimeStatus { runtime, last_operation };
        let hibernation = service.hibernation_status(&status).await?;
        runtimes.push(ProvisionStatusResponse::new(status, hibernation));
    }
    Ok(Json(ProvisionList { runtimes, next_cursor }))
}

#[utoipa::path(
    get,
    path = "/api/v1/provisions/{id}/operations",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("first" = Option<i32>, Query, minimum = 1, maximum = 100, description = "Page size (20 when left out)"),
        ("after" = Option<String>, Query, description = "`nextCursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "Every operation of the runtime, newest first", body = OperationList),
        (status = 400, description = "The id is not a UUID, or an invalid page size or cursor", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
    )
)]
pub async fn list_operations(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> ApiResult<Json<OperationList>> {
    let id = path_id(id)?;
    let page = query(page)?;
    let page = service.runtime_operations(&id, page.after.as_deref(), page.first).await?;
    let next_cursor =
        page.has_next_page.then(|| page.operations.last().map(|operation| operation.id.to_string())).flatten();
    let mut operations = Vec::with_capacity(page.operations.len());
    for operation in page.operations {
        let stages = service.operation_stages(operation.id).await?;
        operations.push(OperationRecord::new(operation, stages));
    }
    Ok(Json(OperationList { operations, next_cursor }))
}

#[utoipa::path(
    get,
    path = "/api/v1/operations/{operationId}",
    params(("operationId" = uuid::Uuid, Path, description = "Operation id")),
    responses(
        (status = 200, description = "The operation with its record and stages", body = OperationRecord),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown operation", body = ErrorBody),
    )
)]
pub async fn get_operation(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<OperationRecord>> {
    let id = path_id(id)?;
    let operation = service.operation_status(&id).await?;
    let stages = service.operation_stages(operation.id).await?;
    Ok(Json(OperationRecord::new(operation, stages)))
}

#[utoipa::path(
    post,
    path = "/api/v1/operations/{operationId}/cancel",
    params(("operationId" = uuid::Uuid, Path, description = "Operation id")),
    responses(
        (status = 202, description = "Cancelled: a queued operation has ended (`failed`, reason `cancelled`); a running one is being stopped and ends the same way", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown operation", body = ErrorBody),
        (status = 409, description = "The operation has already ended (`already_ended`)", body = ErrorBody),
    )
)]
pub async fn cancel_operation(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let operation = service.cancel_operation(&id, &identity.username).await?;
    identity.audit_cancel(ApiKind::Rest, &operation);
    Ok(accepted(&operation))
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsQuery {
    operation_id: Option<String>,
    tail_lines: Option<i64>,
    follow: Option<bool>,
}

#[utoipa::path(
    get,
    path = "/api/v1/provisions/{id}/kubeconfig",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 200, description = "The kubeconfig", body = String, content_type = "application/yaml"),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
        (status = 409, description = "The provisioning has not succeeded", body = ErrorBody),
    )
)]
pub async fn get_kubeconfig(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let kubeconfig = service.kubeconfig(&id).await?;
    identity.audit_read(ApiKind::Rest, AuditEvent::KubeconfigRead, &id, None);
    Ok(([(header::CONTENT_TYPE, "application/yaml")], kubeconfig).into_response())
}

#[utoipa::path(
    patch,
    path = "/api/v1/provisions/{id}",
    request_body(content = UpgradeClusterInput, content_type = "application/json", description = "The changeable part of `clusterConfig` (JSON merge semantics: what is left out stays)", example = json!({
        "kubernetesVersion": "1.35", "workerPool": {"maxSize": 5}
    })),
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("dryRun" = Option<bool>, Query, description = "Only plan the change: the operation ends with its plan summary and nothing is applied"),
    ),
    responses(
        (status = 202, description = "Upgrade queued", body = Accepted),
        (status = 400, description = "Invalid input, a field that cannot change (`errors` lists every one), or `nothing_to_change`", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
        (status = 409, description = "An operation is active, the runtime is hibernated, not provisioned, deprovisioned or a preview", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
    )
)]
pub async fn patch_provision(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<DryRunQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let dry_run = dry_run(query)?;
    let body: serde_json::Value = json_body(&headers, body).await?;
    let upgrade = service::upgrade_from_json(&body).map_err(service::Error::from)?;
    let operation = service.upgrade_cluster(&id, upgrade, dry_run, &identity.username).await?;
    Ok(queued(&identity, &operation))
}

#[utoipa::path(
    post,
    path = "/api/v1/provisions/{id}/hibernate",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 202, description = "Hibernation queued: every worker pool goes to zero, a vanilla control plane stops", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
        (status = 409, description = "An operation is active, the runtime is already hibernated, not provisioned, deprovisioned or a preview", body = ErrorBody),
    )
)]
pub async fn hibernate_provision(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let operation = service.hibernate_runtime(&id, &identity.username).await?;
    Ok(queued(&identity, &operation))
}

#[utoipa::path(
    post,
    path = "/api/v1/provisions/{id}/wake",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 202, description = "Wake-up queued: the configured sizes come back (and a vanilla control plane, whose API server the run waits for)", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
        (status = 409, description = "An operation is active, or the runtime is not hibernated, deprovisioned or a preview", body = ErrorBody),
    )
)]
pub async fn wake_provision(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let operation = service.wake_up_runtime(&id, &identity.username).await?;
    Ok(queued(&identity, &operation))
}

#[utoipa::path(
    delete,
    path = "/api/v1/provisions/{id}",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 202, description = "Deprovisioning queued", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
        (status = 409, description = "An operation is active or the runtime is already deprovisioned", body = ErrorBody),
    )
)]
pub async fn delete_provision(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let operation = service.deprovision_runtime(&id, &identity.username).await?;
    Ok(queued(&identity, &operation))
}

#[derive(OpenApi)]
#[openapi(
    info(title = "cluster-provisioner", description = "Provisions and deprovisions Kubernetes clusters."),
    paths(
        list_provisions,
        create_provision,
        get_provision,
        patch_provision,
        hibernate_provision,
        wake_provision,
        get_logs,
        get_operation_logs,
        get_kubeconfig,
        delete_provision,
        list_operations,
        get_operation,
        cancel_operation,
        super::probes::healthz,
        super::probes::livez,
        super::probes::readyz,
        super::probes::version
    ),
    modifiers(&BearerToken),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "A Kubernetes ServiceAccount token for the audience APP_AUTH_AUDIENCE, of a user in \
                 APP_AUTH_ALLOWED_USERS: 401 `unauthenticated` without a valid one, 403 `forbidden` for another user",
            ))
            .build();
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(scheme));

        // Every operation that keeps the document's bearer requirement (all but those that opt out with an
        // empty one) can answer 401 and 403; listed here once rather than on every path.
        let refusals =
            [("401", "No valid bearer token (`unauthenticated`)"), ("403", "Not an allowed caller (`forbidden`)")];
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
            for operation in operations.into_iter().flatten() {
                if operation.security.as_ref().is_some_and(|requirements| !requirements.is_empty()) {
                    continue;
                }
                for (status, description) in refusals {
                    let body = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
                    let response = ResponseBuilder::new().description(description).content("application/json", body);
                    operation.responses.responses.entry(status.to_owned()).or_insert(response.build().into());
                }
            }
        }
    }
}

/// Requests no route matches get the same JSON errors as everything else.
pub async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::NoRoute(uri.path().to_owned())
}

pub async fn method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::MethodNotAllowed(method.to_string())
}

/// Where the OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// The OpenAPI document served at [`OPENAPI_PATH`] and kept in `assets/openapi.json`.
pub fn openapi_json() -> String {
    ApiDoc::openapi().to_pretty_json().expect("the OpenAPI document serializes")
}

pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi_json()).into_response()
}
