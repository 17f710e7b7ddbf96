//! `/api/v1/operations/{operationId}/approve` and `/reject`: a person decides about a plan that waits.

use axum::body::Body;
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::ToSchema;

use super::{Answer, ApiResult, Caller, json_body, operation_id, path_id, requested_without_audit};
use crate::api::audit::{ApiKind, AuditEvent};
use crate::api::problem::Problem;
use crate::api::views::OperationView;
use crate::service::Requested;

/// The body of an approval: the plan it approves, by the digest the operation shows.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalBody {
    /// The operation's `planSha256`: 64 lowercase hex digits.
    plan_sha256: String,
}

#[utoipa::path(
    post,
    tag = "operations",
    path = "/api/v1/operations/{operationId}/approve",
    summary = "Approve the plan an operation waits with",
    description = "An operation in state `awaiting_approval` (its runtime's `approvalPolicy` held its plan back) is \
        queued again and applies exactly the saved plan whose digest the body names; a plan whose state moved on \
        meanwhile fails as `stale_plan`, changing nothing. Needs `update` on `runtimes/approval`.",
    params(("operationId" = uuid::Uuid, Path, description = "Operation id")),
    request_body(content = ApprovalBody, content_type = "application/json"),
    responses(
        (status = 202, description = "Approved: the operation is queued to apply the plan (or, for a repeated approval, already is)", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 400, description = "The id is not a UUID, the body is not JSON of this shape, or `planSha256` is not 64 lowercase hex digits", body = Problem),
        (status = 403, description = "The caller may not approve plans", body = Problem),
        (status = 404, description = "Unknown operation", body = Problem),
        (status = 409, description = "The operation does not wait (`not_awaiting_approval`), the body names another plan (`plan_mismatch`), or the approval time ran out (`approval_expired`, and the operation failed)", body = Problem),
        (status = 415, description = "Not `application/json`", body = Problem),
    )
)]
pub async fn approve_operation(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let id = operation_id(&path_id(id)?)?;
    let ApprovalBody { plan_sha256 } = json_body(&headers, body).await?;
    let change = service.approve_operation(id, &plan_sha256, &identity.username).await?;
    if let Requested::Queued(operation) = &change {
        identity.audit_approval(ApiKind::Rest, AuditEvent::PlanApproved, operation);
    }
    requested_without_audit(Answer::Operation, &service, change).await
}

#[utoipa::path(
    post,
    tag = "operations",
    path = "/api/v1/operations/{operationId}/reject",
    summary = "Reject the plan an operation waits with",
    description = "The operation fails with reason `plan_rejected`; nothing is applied. Needs `update` on \
        `runtimes/approval`.",
    params(("operationId" = uuid::Uuid, Path, description = "Operation id")),
    responses(
        (status = 202, description = "Rejected: the operation has failed (`plan_rejected`)", body = OperationView),
        (status = 200, description = "Rejected already: the operation, unchanged", body = OperationView),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 403, description = "The caller may not reject plans", body = Problem),
        (status = 404, description = "Unknown operation", body = Problem),
        (status = 409, description = "The operation does not wait for approval (`not_awaiting_approval`), or its approval time ran out (`approval_expired`)", body = Problem),
    )
)]
pub async fn reject_operation(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = operation_id(&path_id(id)?)?;
    let change = service.reject_operation(id, &identity.username).await?;
    if let Requested::Queued(operation) = &change {
        identity.audit_approval(ApiKind::Rest, AuditEvent::PlanRejected, operation);
    }
    requested_without_audit(Answer::Operation, &service, change).await
}
