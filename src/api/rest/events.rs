//! `/api/v1/operations/{id}/events`: an operation's events as Server-Sent Events, the same as the GraphQL
//! subscription `operationEvents`: `status` with the whole operation whenever its stage, state or message changes
//! (the first shows it as it is) and, with `?logs=true`, `log` with each line its runner prints; the stream ends
//! after the final state. A status event's id is the time of that change (microseconds since the epoch), so a
//! client that reconnects with `Last-Event-ID` gets only what changed since.

use std::convert::Infallible;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

use super::{ApiResult, Caller, operation_id, path_id, query};
use crate::api::audit::ApiKind;
use crate::api::authorization::{Action, Subresource};
use crate::api::error::ApiError;
use crate::api::problem::Problem;
use crate::api::views::OperationView;
use crate::domain::Operation;
use crate::service::{OperationEvent, Service};

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventsQuery {
    #[serde(default)]
    logs: bool,
}

#[utoipa::path(
    get,
    tag = "operations",
    path = "/api/v1/operations/{operationId}/events",
    summary = "Follow an operation's events",
    params(
        ("operationId" = uuid::Uuid, Path, description = "Operation id"),
        ("logs" = Option<bool>, Query, description = "The runner's log lines too (needs the logs subresource)"),
        ("Last-Event-ID" = Option<String>, Header, description = "The id of the last status event seen: only later changes are sent"),
    ),
    responses(
        (status = 200, description = "Server-Sent Events: `status` (the operation, as `/api/v1/operations/{id}`) and `log` (a runner line); the stream ends after the final state", body = String, content_type = "text/event-stream"),
        (status = 400, description = "The id is not a UUID, or an invalid `logs` or `Last-Event-ID`", body = Problem),
        (status = 404, description = "Unknown operation", body = Problem),
        (status = 429, description = "The caller, or everyone together, holds as many open streams as allowed (`too_many_streams`); `Retry-After` says when to try again", body = Problem),
    )
)]
pub async fn get_operation_events(
    Caller { identity, service }: Caller,
    id: Result<Path<String>, PathRejection>,
    events: Result<Query<EventsQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let EventsQuery { logs } = query(events)?;
    let seen = last_event_id(&headers)?;
    if logs {
        identity.authorize(Action::on(Subresource::Logs)).await?;
    }
    let slot = service.open_stream(&identity.username)?;
    let events = service.operation_events(operation_id(&id)?, logs).await?;
    if logs {
        identity.audit_operation_logs(ApiKind::Rest, &id);
    }
    let stream = events.filter_map(move |event| {
        let (_held, service) = (&slot, service.clone());
        async move { sse_event(&service, event, seen).await.map(Ok::<_, Infallible>) }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// The id of the last status event the client saw, if it sent one.
fn last_event_id(headers: &HeaderMap) -> ApiResult<Option<i64>> {
    let Some(value) = headers.get("last-event-id") else { return Ok(None) };
    let id = value.to_str().ok().and_then(|id| id.trim().parse().ok());
    id.map(Some).ok_or_else(|| ApiError::MalformedBody {
        field: Some("Last-Event-ID".into()),
        message: "must be the id of a status event this stream sent".into(),
    })
}

/// The id of the status event that shows `operation`.
fn event_id(operation: &Operation) -> i64 {
    operation.updated_at.timestamp_micros()
}

/// `event` as an SSE event; `None` for a status the client has already seen (or that cannot be read now: the
/// next change sends it again).
async fn sse_event(service: &Service, event: OperationEvent, seen: Option<i64>) -> Option<Event> {
    match event {
        OperationEvent::Changed(operation) => {
            let id = event_id(&operation);
            if seen.is_some_and(|seen| id <= seen) {
                return None;
            }
            let view = OperationView::from(service.with_stages(*operation).await.ok()?);
            Event::default().event("status").id(id.to_string()).json_data(view).ok()
        }
        OperationEvent::LogLine(line) => Some(Event::default().event("log").data(line)),
    }
}
