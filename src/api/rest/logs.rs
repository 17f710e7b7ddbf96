//! The runs' logs: kept or live, a snapshot or followed.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

use super::{ApiResult, Caller, operation_id, path_id, runtime_id};
use crate::api::audit::{ApiKind, AuditEvent};
use crate::api::error::ApiError;
use crate::api::problem::Problem;
use crate::domain::OperationId;
use crate::domain::run_log::ContainerLog;
use crate::service;

#[utoipa::path(
    get,
    tag = "logs",
    path = "/api/v1/provisions/{id}/logs",
    summary = "Read the logs of a runtime's operation",
    params(
        ("id" = uuid::Uuid, Path, description = "Runtime id"),
        ("operationId" = Option<uuid::Uuid>, Query, description = "One of the runtime's operations (default: its last)"),
        ("tailLines" = Option<i64>, Query, minimum = 1, description = "Only the last lines of each container"),
        ("follow" = Option<bool>, Query, description = "Refused here (400): an operation's log is followed at `/api/v1/operations/{operationId}/logs?follow=true`"),
    ),
    responses(
        (status = 200, description = "Logs of the `init` and `terraform-runner` containers of the operation's run: kept in the database once it ended, from its pod while it runs", body = String, content_type = "text/plain"),
        (status = 400, description = "An id is not a UUID, `tailLines` is not a positive number, or `follow=true`", body = Problem),
        (status = 404, description = "Unknown runtime, or the operation is not one of its own", body = Problem),
        (status = 409, description = "No runner pod exists yet, or the run ended without one (`no_runner_pod`)", body = Problem),
    )
)]
pub async fn get_logs(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<LogsQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let query = logs_query(query)?;
    if query.follow == Some(true) {
        return Err(ApiError::MalformedBody {
            field: Some("follow".into()),
            message: "a runtime's logs are a snapshot: follow an operation's log at \
                      /api/v1/operations/{operationId}/logs?follow=true"
                .into(),
        });
    }
    let budget = service.log_budget();
    let logs = service.logs(runtime_id(&id)?, query_operation_id(&query)?, query.tail_lines, &budget).await?;
    identity.audit_read(ApiKind::Rest, AuditEvent::LogsRead, &id, query.operation_id.as_deref());
    Ok(logs_text(&logs))
}

#[utoipa::path(
    get,
    tag = "logs",
    path = "/api/v1/operations/{operationId}/logs",
    summary = "Read or follow an operation's logs",
    params(
        ("operationId" = uuid::Uuid, Path, description = "Operation id"),
        ("tailLines" = Option<i64>, Query, minimum = 1, description = "Only the last lines of each container"),
        ("follow" = Option<bool>, Query, description = "Stream the runner's lines as it prints them (chunked) until its container ends; once the run ended, its kept log"),
    ),
    responses(
        (status = 200, description = "Logs of the `init` and `terraform-runner` containers of the operation's run: kept in the database once it ended, from its pod while it runs; with `follow`, the runner's log as a stream", body = String, content_type = "text/plain"),
        (status = 400, description = "The id is not a UUID, `tailLines` is not a positive number, or both `tailLines` and `follow` are given", body = Problem),
        (status = 404, description = "Unknown operation", body = Problem),
        (status = 409, description = "No runner pod exists yet, or the run ended without one (`no_runner_pod`)", body = Problem),
        (status = 413, description = "The logs are longer than one request may read (`over_budget`)", body = Problem),
        (status = 429, description = "With `follow`: the caller, or everyone together, holds as many open streams as allowed (`too_many_streams`); `Retry-After` says when to try again", body = Problem),
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
        let lines = service.follow_operation_log(operation_id(&id)?).await?;
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
    let logs = service.operation_logs(operation_id(&id)?, query.tail_lines, &service.log_budget()).await?;
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

/// The operation the query names, checked as every id is (400 naming `operationId`).
fn query_operation_id(query: &LogsQuery) -> ApiResult<Option<OperationId>> {
    let parse = |id: &String| service::parse_operation_id("operationId", id).map_err(service::Error::from);
    Ok(query.operation_id.as_ref().map(parse).transpose()?)
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsQuery {
    operation_id: Option<String>,
    tail_lines: Option<i64>,
    follow: Option<bool>,
}
