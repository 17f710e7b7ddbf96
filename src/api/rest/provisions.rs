//! `/api/v1/provisions`: create, read, list, change, hibernate, wake and delete runtimes, and their kubeconfigs.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{
    Accepted, Answer, ApiResult, Caller, DeletionQuery, DryRunQuery, ProvisionList, ProvisionStatusResponse,
    RuntimePatchBody, RuntimeView, UpgradeQuery, conditional, dry_run, idempotency_key, json_body, merge_patch_body,
    path_id, query, requested, respond, runtime_id, upgrade_query,
};
use crate::api::audit::{ApiKind, AuditEvent};
use crate::api::authorization::Action;
use crate::api::problem::Problem;
use crate::domain::{OperationState, ProvisionRequest, RuntimeId};
use crate::service::{self, HandedOut, RuntimePatch, RuntimeQuery, Service};

#[utoipa::path(
    post,
    tag = "provisions",
    path = "/api/v1/provisions",
    summary = "Create a runtime (the seed's answer)",
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
        (status = 400, description = "Invalid input; `field` names the first invalid field, `errors` every one", body = Problem),
        (status = 409, description = "The name is taken", body = Problem),
        (status = 413, description = "Body too large", body = Problem),
        (status = 415, description = "Not JSON", body = Problem),
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
    )
)]
pub async fn create_provision(
    caller: Caller,
    query: Result<Query<DryRunQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    create(Answer::Accepted, caller, query, headers, body).await
}

/// Queues a provisioning, answered in `answer`'s shape.
pub(super) async fn create(
    answer: Answer,
    Caller { identity, service }: Caller,
    query: Result<Query<DryRunQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let dry_run = dry_run(query)?;
    let request: ProvisionRequest = json_body(&headers, body).await?;
    let idempotency_key = idempotency_key(&headers)?;
    let accepted = service.provision_runtime(request, idempotency_key, dry_run, &identity.username).await?;
    // A replayed request changed nothing: its audit line is the first request's.
    if !accepted.replayed {
        identity.audit(ApiKind::Rest, &accepted.operation);
    }
    if answer == Answer::Operation {
        return respond(answer, StatusCode::ACCEPTED, &service, accepted.operation).await;
    }
    let location = format!("/api/v1/provisions/{}", accepted.operation.runtime_id);
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(Accepted::from(&accepted.operation)))
        .into_response())
}

#[utoipa::path(
    get,
    tag = "provisions",
    path = "/api/v1/provisions/{id}",
    summary = "Read a runtime's last operation (the seed's shape)",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("If-None-Match" = Option<String>, Header, description = "The `ETag` of an earlier read: 304 while it is unchanged"),
    ),
    responses(
        (status = 200, description = "Status of the runtime's last operation", body = ProvisionStatusResponse, headers(("ETag" = String, description = "This version of the answer, for If-None-Match and If-Match"))),
        (status = 304, description = "Unchanged since the read whose `ETag` If-None-Match names", headers(("ETag" = String))),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
    )
)]
pub async fn get_provision(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let status = ProvisionStatusResponse::from(service.runtime_status(runtime_id(&id)?).await?);
    Ok(conditional::tagged(&headers, &status))
}

/// Refuses the change (412) when `If-Match` does not name the runtime's current `ETag`: that of its read in
/// `answer`'s shape (`/api/v1/provisions/{id}` or `/api/v1/runtimes/{id}`). Reads the runtime only when asked.
async fn check_if_match(answer: Answer, headers: &HeaderMap, service: &Service, id: RuntimeId) -> ApiResult<()> {
    if !headers.contains_key(header::IF_MATCH) {
        return Ok(());
    }
    let status = service.runtime_status(id).await?;
    let current = match answer {
        Answer::Accepted => conditional::entity_tag_of(&ProvisionStatusResponse::from(status)),
        Answer::Operation => conditional::entity_tag_of(&RuntimeView::from(status)),
    };
    conditional::check_if_match(headers, &current)
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

fn operation_state(status: &str) -> ApiResult<OperationState> {
    let state = match status {
        "queued" => OperationState::Pending,
        "running" => OperationState::InProgress,
        "succeeded" => OperationState::Succeeded,
        "failed" => OperationState::Failed,
        other => {
            let message = format!("{other:?} is not queued, running, succeeded or failed");
            return Err(service::Error::from(service::Invalid::new(
                service::InvalidReason::UnsupportedValue,
                "status",
                message,
            ))
            .into());
        }
    };
    Ok(state)
}

#[utoipa::path(
    get,
    tag = "provisions",
    path = "/api/v1/provisions",
    summary = "List runtimes in the seed's shape",
    params(
        ("status" = Option<String>, Query, description = "Only runtimes whose last operation is `queued`, `running`, `succeeded` or `failed`"),
        ("label" = Option<String>, Query, description = "Only runtimes with this label, as `key=value`"),
        ("first" = Option<i32>, Query, minimum = 1, maximum = 100, description = "Page size (20 when left out)"),
        ("after" = Option<String>, Query, description = "`nextCursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "Runtimes in creation order, with their last operation", body = ProvisionList),
        (status = 400, description = "An invalid filter, page size or cursor", body = Problem),
    )
)]
pub async fn list_provisions(
    Caller { service, .. }: Caller,
    list: Result<Query<ProvisionListQuery>, QueryRejection>,
) -> ApiResult<Json<ProvisionList>> {
    let list = query(list)?;
    let status = list.status.as_deref().map(operation_state).transpose()?;
    let query =
        RuntimeQuery { last_operation_state: status, label: list.label.as_deref(), ..RuntimeQuery::everything() };
    let page = service.runtimes(query, list.after.as_deref(), list.first).await?;
    let next_cursor = page.has_next_page.then(|| page.items.last().map(|last| last.runtime.id.to_string())).flatten();
    let runtimes = page.items.into_iter().map(ProvisionStatusResponse::from).collect();
    Ok(Json(ProvisionList { runtimes, next_cursor }))
}

#[utoipa::path(
    get,
    tag = "provisions",
    path = "/api/v1/provisions/{id}/kubeconfig",
    summary = "Read a runtime's kubeconfig",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 200, description = "The kubeconfig: for a cluster that signs in with client certificates (vanilla_kubeadm) one the cluster issued for `APP_KUBECONFIG_LIFETIME`, never its admin certificate, with `Kubeconfig-Expires-At`; for EKS and GKE the cloud's token plugin", body = String, content_type = "application/yaml", headers(("Kubeconfig-Expires-At" = String, description = "RFC 3339; absent for a kubeconfig without a credential of its own"))),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "The provisioning has not succeeded", body = Problem),
    )
)]
pub async fn get_kubeconfig(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let id = runtime_id(&path_id(id)?)?;
    let handed_out = service.kubeconfig(id).await?;
    identity.audit_kubeconfig(ApiKind::Rest, AuditEvent::KubeconfigRead, id, &handed_out);
    Ok(kubeconfig_response(handed_out))
}

/// A kubeconfig as YAML, with until when it signs in (when it has a lifetime) in `Kubeconfig-Expires-At`.
pub(super) fn kubeconfig_response(handed_out: HandedOut) -> Response {
    let mut response = ([(header::CONTENT_TYPE, "application/yaml")], handed_out.kubeconfig).into_response();
    if let Some(value) = handed_out.expires_at.and_then(|at| header::HeaderValue::from_str(&at.to_rfc3339()).ok()) {
        response.headers_mut().insert(KUBECONFIG_EXPIRES_AT, value);
    }
    response
}

/// The header naming until when a kubeconfig handed out signs in.
const KUBECONFIG_EXPIRES_AT: &str = "kubeconfig-expires-at";

#[utoipa::path(
    patch,
    tag = "provisions",
    path = "/api/v1/provisions/{id}",
    summary = "Upgrade a runtime (the seed's answer)",
    request_body(description = "The changeable part of `clusterConfig`, as a JSON merge patch (RFC 7396: what is left out stays), or `deletionProtection` alone", content(
        (RuntimePatchBody = "application/json", example = json!({
        "kubernetesVersion": "1.35", "workerPool": {"maxSize": 5}
    })),
        (RuntimePatchBody = "application/merge-patch+json"),
    )),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("dryRun" = Option<bool>, Query, description = "Only plan the change: the operation ends with its plan summary and nothing is applied"),
        ("approvalPolicy" = Option<crate::domain::approval::ApprovalPolicy>, Query, description = "The approval policy of this upgrade's run instead of the runtime's; one that holds back less than the runtime's needs the right to approve plans"),
        ("If-Match" = Option<String>, Header, description = "The `ETag` of the read the change is based on: 412 if it changed since"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 202, description = "Upgrade queued", body = Accepted),
        (status = 200, description = "The deletion protection, changed (no operation): the runtime as a read shows it", body = ProvisionStatusResponse),
        (status = 412, description = "If-Match does not name the current `ETag` (`precondition_failed`)", body = Problem),
        (status = 400, description = "Invalid input, a field that cannot change (`errors` lists every one), or `nothing_to_change`", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "An operation is active, the runtime is hibernated, not provisioned, deprovisioned or a preview", body = Problem),
        (status = 415, description = "Neither `application/json` nor `application/merge-patch+json`", body = Problem),
    )
)]
pub async fn patch_provision(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<UpgradeQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    patch(Answer::Accepted, caller, id, query, headers, body).await
}

/// Queues an upgrade, answered in `answer`'s shape.
pub(super) async fn patch(
    answer: Answer,
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<UpgradeQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let (dry_run, approval_policy) = upgrade_query(query)?;
    let body: serde_json::Value = merge_patch_body(&headers, body).await?;
    let patch = service::runtime_patch_from_json(&body, dry_run).map_err(service::Error::from)?;
    let id = runtime_id(&id)?;
    check_if_match(answer, &headers, &service, id).await?;
    let upgrade = match patch {
        RuntimePatch::Upgrade(upgrade) => upgrade,
        RuntimePatch::DeletionProtection(enabled) => {
            let status = service.set_deletion_protection(id, enabled).await?;
            identity.audit_deletion_protection(ApiKind::Rest, id, enabled);
            return Ok(record_changed(answer, status));
        }
        RuntimePatch::ApprovalPolicy(policy) => {
            identity.authorize(Action::to_approve()).await?;
            let status = service.set_approval_policy(id, policy).await?;
            identity.audit_approval_policy(ApiKind::Rest, id);
            return Ok(record_changed(answer, status));
        }
    };
    if service.loosens_approval(id, approval_policy).await? {
        identity.authorize(Action::to_approve()).await?;
    }
    let key = idempotency_key(&headers)?;
    let change = service.upgrade_cluster(id, upgrade, dry_run, approval_policy, &identity.username, key).await?;
    requested(answer, &identity, &service, change).await
}

/// The answer to a PATCH that changed only the runtime's record: the runtime as a read shows it.
fn record_changed(answer: Answer, status: service::RuntimeStatus) -> Response {
    match answer {
        Answer::Accepted => Json(ProvisionStatusResponse::from(status)).into_response(),
        Answer::Operation => Json(RuntimeView::from(status)).into_response(),
    }
}

#[utoipa::path(
    post,
    tag = "provisions",
    path = "/api/v1/provisions/{id}/hibernate",
    summary = "Hibernate a runtime (the seed's answer)",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 202, description = "Hibernation queued (or, for a repeated request, already queued or running): every worker pool goes to zero, a vanilla control plane stops", body = Accepted),
        (status = 200, description = "Already hibernated: the runtime's last operation, nothing queued", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "Another operation is active, or the runtime is not provisioned, deprovisioned or a preview", body = Problem),
    )
)]
pub async fn hibernate_provision(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    hibernate(Answer::Accepted, caller, id, headers).await
}

/// Queues a hibernation, answered in `answer`'s shape.
pub(super) async fn hibernate(
    answer: Answer,
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let key = idempotency_key(&headers)?;
    let change = service.hibernate_runtime(runtime_id(&id)?, &identity.username, key).await?;
    requested(answer, &identity, &service, change).await
}

#[utoipa::path(
    post,
    tag = "provisions",
    path = "/api/v1/provisions/{id}/wake",
    summary = "Wake a runtime (the seed's answer)",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 202, description = "Wake-up queued (or, for a repeated request, already queued or running): the configured sizes come back (and a vanilla control plane, whose API server the run waits for)", body = Accepted),
        (status = 200, description = "Already awake: the runtime's last operation, nothing queued", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "Another operation is active, or the runtime was never provisioned, is deprovisioned or a preview", body = Problem),
    )
)]
pub async fn wake_provision(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    wake(Answer::Accepted, caller, id, headers).await
}

/// Queues a wake-up, answered in `answer`'s shape.
pub(super) async fn wake(
    answer: Answer,
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let key = idempotency_key(&headers)?;
    let change = service.wake_up_runtime(runtime_id(&id)?, &identity.username, key).await?;
    requested(answer, &identity, &service, change).await
}

#[utoipa::path(
    delete,
    tag = "provisions",
    path = "/api/v1/provisions/{id}",
    summary = "Deprovision a runtime (the seed's answer)",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("If-Match" = Option<String>, Header, description = "The `ETag` of the read the deletion is based on: 412 if it changed since"),
        ("confirm" = Option<String>, Query, description = "The runtime's name: required when APP_REQUIRE_DELETE_CONFIRMATION is on or with `force`, checked whenever sent"),
        ("force" = Option<bool>, Query, description = "Mark the runtime deleted without a run, keeping what may remain in the cloud (`forced`): only when its last deprovisioning failed because its credential is gone or refused"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 412, description = "If-Match does not name the current `ETag` (`precondition_failed`)", body = Problem),
        (status = 202, description = "Deprovisioning queued (or, for a repeated request, already queued or running)", body = Accepted),
        (status = 200, description = "Already deprovisioned: its deprovisioning, nothing queued; or deprovisioned by `force` now", body = Accepted),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 400, description = "`confirm` is missing while confirmations are required or with `force`, or does not name the runtime", body = Problem),
        (status = 409, description = "Another operation is active, the runtime has deletion protection (`deletion_protected`), or `force` is sent while a run can still destroy it (`force_not_allowed`)", body = Problem),
    )
)]
pub async fn delete_provision(
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    deletion: Result<Query<DeletionQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    delete(Answer::Accepted, caller, id, deletion, headers).await
}

/// Queues a deprovisioning, answered in `answer`'s shape.
pub(super) async fn delete(
    answer: Answer,
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    deletion: Result<Query<DeletionQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = runtime_id(&path_id(id)?)?;
    let DeletionQuery { confirm, force } = query(deletion)?;
    check_if_match(answer, &headers, &service, id).await?;
    let key = idempotency_key(&headers)?;
    let change = service.deprovision_runtime(id, confirm.as_deref(), force, &identity.username, key).await?;
    requested(answer, &identity, &service, change).await
}
