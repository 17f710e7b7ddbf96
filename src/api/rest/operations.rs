//! `/api/v1/operations` and a runtime's operations: read, list, cancel and retry.

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::{
    Accepted, Answer, ApiResult, Caller, OperationList, PageQuery, conditional, idempotency_key, operation_id, path_id,
    query, requested, respond, runtime_id,
};
use crate::api::audit::ApiKind;
use crate::api::authorization::Action;
use crate::api::problem::Problem;
use crate::api::views::OperationView;
use crate::domain::RuntimeId;
use crate::service::Requested;

#[utoipa::path(
    get,
    tag = "operations",
    path = "/api/v1/provisions/{id}/operations",
    summary = "List a runtime's operations",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("first" = Option<i32>, Query, minimum = 1, maximum = 100, description = "Page size (20 when left out)"),
        ("after" = Option<String>, Query, description = "`nextCursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "Every operation of the runtime, newest first", body = OperationList),
        (status = 400, description = "The id is not a UUID, or an invalid page size or cursor", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
    )
)]
pub async fn list_operations(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> ApiResult<Json<OperationList>> {
    let id = path_id(id)?;
    let page = query(page)?;
    let page = service.runtime_operations(runtime_id(&id)?, page.after.as_deref(), page.first).await?;
    let next_cursor = page.has_next_page.then(|| page.items.last().map(|last| last.operation.id.to_string())).flatten();
    let operations = page.items.into_iter().map(OperationView::from).collect();
    Ok(Json(OperationList { operations, next_cursor }))
}

#[utoipa::path(
    get,
    tag = "operations",
    path = "/api/v1/operations/{operationId}",
    summary = "Read an operation",
    params(
        ("operationId" = uuid::Uuid, Path, description = "Operation id"),
        ("If-None-Match" = Option<String>, Header, description = "The `ETag` of an earlier read: 304 while the operation is unchanged"),
    ),
    responses(
        (status = 200, description = "The operation with its record and stages", body = OperationView, headers(("ETag" = String, description = "This version of the operation"))),
        (status = 304, description = "Unchanged since the read whose `ETag` If-None-Match names", headers(("ETag" = String))),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown operation", body = Problem),
    )
)]
pub async fn get_operation(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let operation = OperationView::from(service.operation_status(operation_id(&id)?).await?);
    Ok(conditional::tagged(&headers, &operation))
}

#[utoipa::path(
    post,
    tag = "operations",
    path = "/api/v1/operations/{operationId}/cancel",
    summary = "Cancel an operation",
    params(("operationId" = uuid::Uuid, Path, description = "Operation id")),
    responses(
        (status = 202, description = "Cancelled: a queued operation has ended (`failed`, reason `cancelled`); a running one is being stopped and ends the same way", body = Accepted),
        (status = 200, description = "Already cancelled: the operation, unchanged", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown operation", body = Problem),
        (status = 409, description = "The operation has already ended otherwise (`already_ended`)", body = Problem),
    )
)]
pub async fn cancel_operation(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let change = service.cancel_operation(operation_id(&id)?, &identity.username).await?;
    let status = match &change {
        Requested::Done(_) => StatusCode::OK,
        Requested::Replayed(_) => StatusCode::ACCEPTED,
        Requested::Queued(operation) | Requested::Running(operation) => {
            identity.audit_cancel(ApiKind::Rest, operation);
            StatusCode::ACCEPTED
        }
    };
    respond(Answer::Accepted, status, &service, change.into_operation()).await
}

#[utoipa::path(
    post,
    tag = "operations",
    path = "/api/v1/operations/{operationId}/retry",
    summary = "Retry a failed operation",
    description = "Queues a new operation of the same type and target (an upgrade's configuration, a dry run's \
        plan-only) on the runtime whose last operation the failed one is: a provisioning resumes against the state \
        it left, an upgrade plans again. Refused with `not_retryable` when the operation has not failed, another \
        came after it, or its `lastError.reason` is one a new run cannot fix (the catalogue of reasons says which; \
        a credential that caused it is checked again first). Retrying a deprovisioning needs `delete`, a \
        provisioning `create`.",
    params(
        ("operationId" = uuid::Uuid, Path, description = "Id of the failed operation"),
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
    ),
    responses(
        (status = 202, description = "The retry, queued (or, for a repeated request, already queued or running); `retryOf` names the failed operation, `Location` is the new one", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 200, description = "Retried already: the retry, which succeeded", body = OperationView),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 403, description = "The caller may not make the change the operation makes", body = Problem),
        (status = 404, description = "Unknown operation", body = Problem),
        (status = 409, description = "Not retryable (`not_retryable`), another operation is active, or the runtime is no longer in a state for the change", body = Problem),
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
    )
)]
pub async fn retry_operation(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = operation_id(&path_id(id)?)?;
    let key = idempotency_key(&headers)?;
    let failed = service.operation_status(id).await?;
    identity.authorize(Action::to_retry(failed.operation.operation_type)).await?;
    // A retry runs under the failed run's own approval policy: one looser than the runtime's, as on an upgrade.
    let failed = &failed.operation;
    if service.loosens_approval(RuntimeId(failed.runtime_id), failed.approval_policy).await? {
        identity.authorize(Action::to_approve()).await?;
    }
    let change = service.retry_operation(id, &identity.username, key).await?;
    requested(Answer::Operation, &identity, &service, change).await
}
