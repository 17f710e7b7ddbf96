//! A runtime's certificates renewed on request: `POST /api/v1/runtimes/{id}/certificates/renewal`.

use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::HeaderMap;
use axum::response::Response;

use super::{Answer, ApiResult, Caller, idempotency_key, path_id, requested, runtime_id};
use crate::api::problem::Problem;
use crate::api::views::OperationView;

#[utoipa::path(
    post,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}/certificates/renewal",
    summary = "Renew a runtime's certificates",
    description = "For a vanilla_kubeadm runtime: a run (Job `renewal-<id>`, planned and logged as any) has kubeadm renew the control plane's certificates on each node, one after the other; the next kubeconfig a reader gets is minted with the renewed admin identity. EKS and GKE renew their own.",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and request gets the first answer (the same operation) within APP_IDEMPOTENCY_KEY_TTL"),
    ),
    responses(
        (status = 422, description = "Idempotency-Key reused for a different request", body = Problem),
        (status = 202, description = "The renewal, queued (or, for a repeated request, already queued or running); `Location` is the operation", body = OperationView, headers(("Location" = String, description = "/api/v1/operations/{operationId}"))),
        (status = 400, description = "The id is not a UUID", body = Problem),
        (status = 404, description = "Unknown runtime", body = Problem),
        (status = 409, description = "The cloud manages its control plane (`managed_by_the_cloud`: EKS, GKE), another operation is active, or the runtime is hibernated, not provisioned, deprovisioned or a preview", body = Problem),
    )
)]
pub async fn renew_certificates(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = runtime_id(&path_id(id)?)?;
    let key = idempotency_key(&headers)?;
    let change = service.renew_certificates(id, &identity.username, key).await?;
    requested(Answer::Operation, &identity, &service, change).await
}
