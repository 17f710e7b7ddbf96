//! `/api/v1/runtimes`: a runtime as a resource, with its configuration, state and conditions, and lists that
//! leave out deprovisioned runtimes and previews unless asked.

use axum::Json;
use axum::extract::Path;
use axum::extract::Query;
use axum::extract::rejection::{PathRejection, QueryRejection};

use super::{ApiResult, Caller, RuntimeList, RuntimeView, path_id, query, runtime_id};
use crate::api::error::ErrorBody;
use crate::domain::RuntimeState;
use crate::service::{self, RuntimeQuery};

#[utoipa::path(
    get,
    tag = "runtimes",
    path = "/api/v1/runtimes/{id}",
    summary = "Read a runtime",
    params(("id" = uuid::Uuid, Path, description = "Runtime id")),
    responses(
        (status = 200, description = "The runtime: its configuration, state, conditions and last operation", body = RuntimeView),
        (status = 400, description = "The id is not a UUID", body = ErrorBody),
        (status = 404, description = "Unknown runtime", body = ErrorBody),
    )
)]
pub async fn get_runtime(
    Caller { service, .. }: Caller,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<RuntimeView>> {
    let id = path_id(id)?;
    Ok(Json(service.runtime_status(runtime_id(&id)?).await?.into()))
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
    first: Option<i32>,
    after: Option<String>,
}

/// A `state` filter, named in the error when it is no state.
fn runtime_state(state: &str) -> ApiResult<RuntimeState> {
    RuntimeState::parse(state).ok_or_else(|| {
        let states: Vec<&str> = RuntimeState::ALL.iter().map(|state| state.as_str()).collect();
        let message = format!("{state:?} is not one of {}", states.join(", "));
        service::Error::from(service::Invalid { field: "state".into(), message }).into()
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
        ("first" = Option<i32>, Query, minimum = 1, maximum = 100, description = "Page size (20 when left out)"),
        ("after" = Option<String>, Query, description = "`nextCursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "Runtimes in creation order", body = RuntimeList),
        (status = 400, description = "An invalid filter, page size or cursor", body = ErrorBody),
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
    };
    let page = service.runtimes(query, list.after.as_deref(), list.first).await?;
    let next_cursor = page.has_next_page.then(|| page.items.last().map(|last| last.runtime.id.to_string())).flatten();
    Ok(Json(RuntimeList { runtimes: page.items.into_iter().map(RuntimeView::from).collect(), next_cursor }))
}
