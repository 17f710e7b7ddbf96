//! `/api/v1/runtimes`: a runtime as a resource, with its configuration, state and conditions; lists that leave
//! out deprovisioned runtimes and previews unless asked; changes answered with their operation (AIP-151).

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::HeaderMap;
use axum::response::Response;

use super::{
    Answer, ApiResult, Caller, DeletionQuery, DryRunQuery, RuntimeList, RuntimePatchBody, RuntimeView, UpgradeQuery,
    conditional, path_id, provisions, query, runtime_id,
};
use crate::api::audit::{ApiKind, AuditEvent};
use crate::api::problem::Problem;
use crate::api::views::OperationView;
use crate::domain::ProvisionRequest;
use crate::domain::RuntimeState;
use crate::service::{self, RuntimeQuery};

#[utoipa::path(
    get,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}",
    summary = "Read a runtime",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("If-None-Match" = Option<String>, Header, description = "The `ETag` of an earlier read: 304 while the runtime is unchanged"),
    ),
    responses(
        (status = 200, description = "The runtime: its configuration, state, conditions and last operation", body = RuntimeView, headers(("ETag" = String, description = "This version of the runtime, for If-None-Match and If-Match"))),
        (status = 304, description = "Unchanged since the read whose `ETag` If-None-Match names", headers(("ETag" = String))),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
    )
)]
pub async fn get_runtime(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let runtime = RuntimeView::from(service.runtime_status(runtime_id(&id)?).await?);
    Ok(conditional::tagged(&headers, &runtime))
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeListQuery {
    state: Option<String>,
    name: Option<String>,
    label: Option<String>,
    #[serde(default)]
    include_deleted: bool,
    #[serde(default)]
    preview: bool,
    updated_since: Option<chrono::DateTime<chrono::Utc>>,
    first: Option<i32>,
    after: Option<String>,
}

/// A `state` filter, named in the error when it is no state.
fn runtime_state(state: &str) -> ApiResult<RuntimeState> {
    RuntimeState::parse(state).ok_or_else(|| {
        let states: Vec<&str> = RuntimeState::ALL.iter().map(|state| state.as_str()).collect();
        let message = format!("{state:?} is not one of {}", states.join(", "));
        service::Error::from(service::Invalid::new(service::InvalidReason::UnsupportedValue, "state", message)).into()
    })
}

#[utoipa::path(
    get,
    tag = "runtimes",
    path = "/api/v1/runtimes",
    summary = "List runtimes",
    params(
        ("state" = Option<RuntimeState>, Query, description = "Only the runtimes in this state"),
        ("name" = Option<String>, Query, description = "Only the runtimes of this name"),
        ("label" = Option<String>, Query, description = "Only runtimes with this label, as `key=value`"),
        ("includeDeleted" = Option<bool>, Query, description = "Deprovisioned runtimes too (left out by default)"),
        ("preview" = Option<bool>, Query, description = "Only previews, the runtimes of dry-run provisionings (left out by default)"),
        ("updatedSince" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "Only the runtimes whose record or last operation changed at or after this time (RFC 3339)"),
        ("first" = Option<i32>, Query, minimum = 1, maximum = 100, description = "Page size (20 when left out)"),
        ("after" = Option<String>, Query, description = "`nextCursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "Runtimes in creation order", body = RuntimeList),
        (status = 400, description = "An invalid filter, page size or cursor", body = Problem),
    )
)]
pub async fn list_runtimes(
    Caller { service, .. }: Caller,
    list: Result<Query<RuntimeListQuery>, QueryRejection>,
) -> ApiResult<Json<RuntimeList>> {
    let list = query(list)?;
    let state = list.state.as_deref().map(runtime_state).transpose()?;
    let query = RuntimeQuery {
        last_operation_state: None,
        state,
        label: list.label.as_deref(),
        name: list.name.as_deref(),
        include_deleted: list.include_deleted,
        preview: Some(list.preview),
        updated_since: list.updated_since,
    };
    let page = service.runtimes(query, list.after.as_deref(), list.first).await?;
    let next_cursor = page.has_next_page.then(|| page.items.last().map(|last| last.runtime.id.to_string())).flatten();
    Ok(Json(RuntimeList { runtimes: page.items.into_iter().map(RuntimeView::from).collect(), next_cursor }))
}

#[utoipa::path(
    post,
    tag = "runtimes",
    path = "/api/v1/runtimes",
    summary = "Create a runtime",
    request_body(content = ProvisionRequest, description = "As `POST /api/v1/provisions`"),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key get the first answer"),
        ("dryRun" = Option<bool>, Query, description = "Only validate, render and plan: the runtime is recorded as a preview (its name stays free) and nothing is built"),
    ),
    responses(
        (status = 202, description = "The provisioning, queued; `Location` is the operation", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 400, description = "Invalid input; `field` names the first invalid field, `errors` every one", body = Problem),
        (status = 409, description = "The name is taken", body = Problem),
        (status = 413, description = "Body too large", body = Problem),
        (status = 415, description = "Not JSON", body = Problem),
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
    )
)]
pub async fn create_runtime(
    caller: Caller,
    query: Result<Query<DryRunQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    provisions::create(Answer::Operation, caller, query, headers, body).await
}

#[utoipa::path(
    patch,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}",
    summary = "Upgrade a runtime",
    request_body(description = "The changeable part of `clusterConfig`, as a JSON merge patch (RFC 7396: what is left out stays), or `deletionProtection` alone", content(
        (RuntimePatchBody = "application/json"),
        (RuntimePatchBody = "application/merge-patch+json"),
    )),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("dryRun" = Option<bool>, Query, description = "Only plan the change: the operation ends with its plan summary and nothing is applied"),
        ("approvalPolicy" = Option<crate::domain::approval::ApprovalPolicy>, Query, description = "The approval policy of this upgrade's run instead of the runtime's; one that holds back less than the runtime's needs the right to approve plans"),
        ("If-Match" = Option<String>, Header, description = "The `ETag` of the read the change is based on: 412 if the runtime changed since"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 412, description = "If-Match does not name the runtime's current `ETag` (`precondition_failed`)", body = Problem),
        (status = 202, description = "The upgrade, queued; `Location` is the operation", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 200, description = "The deletion protection, changed (no operation): the runtime as a read shows it", body = RuntimeView),
        (status = 400, description = "Invalid input, a field that cannot change (`errors` lists every one), or `nothing_to_change`", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "An operation is active, the runtime is hibernated, not provisioned, deprovisioned or a preview", body = Problem),
        (status = 415, description = "Neither `application/json` nor `application/merge-patch+json`", body = Problem),
    )
)]
pub async fn patch_runtime(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<UpgradeQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    provisions::patch(Answer::Operation, caller, id, query, headers, body).await
}

#[utoipa::path(
    post,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}/hibernate",
    summary = "Hibernate a runtime",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 202, description = "The hibernation, queued (or, for a repeated request, already queued or running); `Location` is the operation", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 200, description = "Already hibernated: the runtime's last operation, nothing queued", body = OperationView),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "Another operation is active, or the runtime is not provisioned, deprovisioned or a preview", body = Problem),
    )
)]
pub async fn hibernate_runtime(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    provisions::hibernate(Answer::Operation, caller, id, headers).await
}

#[utoipa::path(
    post,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}/wake",
    summary = "Wake a runtime",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 202, description = "The wake-up, queued (or, for a repeated request, already queued or running); `Location` is the operation", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 200, description = "Already awake: the runtime's last operation, nothing queued", body = OperationView),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "Another operation is active, or the runtime was never provisioned, is deprovisioned or a preview", body = Problem),
    )
)]
pub async fn wake_runtime(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    provisions::wake(Answer::Operation, caller, id, headers).await
}

#[utoipa::path(
    post,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}/kubeconfig/rotation",
    summary = "Rotate a runtime's kubeconfig",
    description = "For a cluster that signs in with client certificates (vanilla_kubeadm): a new certificate the cluster issues for `APP_KUBECONFIG_LIFETIME`, handed to every reader from now on; the one before stays valid until it expires (a certificate cannot be taken back). Needs the right to read the kubeconfig.",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 200, description = "The new kubeconfig; `Kubeconfig-Expires-At` says until when it signs in", body = String, content_type = "application/yaml", headers(("Kubeconfig-Expires-At" = String, description = "RFC 3339"))),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "No provisioned cluster (`not_ready`), or its kubeconfig holds no credential to rotate (`nothing_to_rotate`: EKS and GKE use the cloud's token plugin)", body = Problem),
        (status = 503, description = "The cluster did not issue a certificate", body = Problem),
    )
)]
pub async fn rotate_kubeconfig(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = runtime_id(&path_id(id)?)?;
    let handed_out = service.rotate_kubeconfig(id).await?;
    identity.audit_kubeconfig(ApiKind::Rest, AuditEvent::KubeconfigRotated, id, &handed_out);
    Ok(provisions::kubeconfig_response(handed_out))
}

#[utoipa::path(
    delete,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}",
    summary = "Deprovision a runtime",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("If-Match" = Option<String>, Header, description = "The `ETag` of the read the deletion is based on: 412 if the runtime changed since"),
        ("confirm" = Option<String>, Query, description = "The runtime's name: required when APP_REQUIRE_DELETE_CONFIRMATION is on or with `force`, checked whenever sent"),
        ("force" = Option<bool>, Query, description = "Mark the runtime deleted without a run, keeping what may remain in the cloud (`forced`): only when its last deprovisioning failed because its credential is gone or refused"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 412, description = "If-Match does not name the runtime's current `ETag` (`precondition_failed`)", body = Problem),
        (status = 202, description = "The deprovisioning, queued (or, for a repeated request, already queued or running); `Location` is the operation", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 200, description = "Already deprovisioned: its deprovisioning, nothing queued; or deprovisioned by `force` now", body = OperationView),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 400, description = "`confirm` is missing while confirmations are required or with `force`, or does not name the runtime", body = Problem),
        (status = 409, description = "Another operation is active, the runtime has deletion protection (`deletion_protected`), or `force` is sent while a run can still destroy it (`force_not_allowed`)", body = Problem),
    )
)]
pub async fn delete_runtime(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    deletion: Result<Query<DeletionQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    provisions::delete(Answer::Operation, caller, id, deletion, headers).await
}
