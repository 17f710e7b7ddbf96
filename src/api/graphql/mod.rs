//! GraphQL adapter in the style of the Kyma Runtime Provisioner. Resolvers only translate between GraphQL and
//! the service; every service error becomes a GraphQL error with `extensions` in [`graphql_error`].

use std::sync::Arc;

use async_graphql::dataloader::DataLoader;
use async_graphql::parser::types::{ExecutableDocument, OperationType};
use async_graphql::{Context, ErrorExtensions, Schema};
use async_graphql_axum::GraphQLResponse;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::authentication::Identity;
use super::authorization::Action;
use super::middleware::AnsweredRead;
use crate::domain::run_log::LogBudget;

use super::error::{ApiError, classify};
use crate::service::{self, Service};

mod documents;
mod introspection;
mod limits;
mod loaders;
mod mutation;
mod query;
mod subscription;
mod types;

use crate::api::views::OperationView;
use crate::domain::{Component, OperationId, RuntimeId};
use documents::ParsedDocuments;
pub use introspection::introspection_json;
use limits::{OperationLimits, RefuseIntrospection};
pub use mutation::Mutation;
pub use query::Query;
pub use subscription::Subscription;
use types::{RuntimeNode, RuntimeStatus, operation_connection, page_weight};

pub type ProvisionerSchema = Schema<Query, Mutation, Subscription>;

/// What one GraphQL request may ask for.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_depth: usize,
    pub max_complexity: usize,
    pub introspection: bool,
    /// How long a query or mutation may run (`APP_REQUEST_TIMEOUT`), also over a WebSocket, where no HTTP
    /// request timeout applies.
    pub operation_timeout: std::time::Duration,
}

/// The schema of each way in. An extension costs every resolved field a boxed hook and two registry lookups, so
/// HTTP requests, which the router already holds to the request limits, run on a schema with none, and
/// introspection is refused before they run instead (`execute`). Operations over a WebSocket run under
/// `OperationLimits` and `RefuseIntrospection`.
#[derive(Clone)]
pub struct Schemas {
    http: ProvisionerSchema,
    pub websocket: ProvisionerSchema,
    introspection: bool,
    /// The documents of HTTP requests, kept by their text.
    documents: Arc<ParsedDocuments>,
}

/// `in_flight`: the permits of `APP_MAX_CONCURRENT_REQUESTS`, which HTTP requests take in the router and
/// operations over a WebSocket in `OperationLimits`.
pub fn schemas(service: Service, limits: Limits, in_flight: Arc<tokio::sync::Semaphore>) -> Schemas {
    let build = || {
        let archived_logs = DataLoader::new(loaders::ArchivedLogs { service: service.clone() }, tokio::spawn);
        let builder = Schema::build(Query, Mutation, Subscription)
            .data(service.clone())
            .data(archived_logs)
            .limit_depth(limits.max_depth)
            .limit_complexity(limits.max_complexity);
        // Disabled alone would answer `__schema: null`; the refusal says why instead.
        if limits.introspection { builder } else { builder.disable_introspection() }
    };
    let websocket = build().extension(OperationLimits { timeout: limits.operation_timeout, in_flight });
    let websocket = if limits.introspection { websocket } else { websocket.extension(RefuseIntrospection) };
    Schemas {
        http: build().finish(),
        websocket: websocket.finish(),
        introspection: limits.introspection,
        documents: Arc::default(),
    }
}

/// Runs one HTTP request as `identity`. A request refused before anything ran (parse or validation errors, the
/// depth and complexity limits among them: errors without a path) answers 400 instead of 200.
/// Its fields share `budget` for the logs they read.
pub async fn execute(
    schemas: &Schemas,
    mut request: async_graphql::Request,
    identity: Identity,
    budget: LogBudget,
) -> Response {
    schemas.documents.prepare(&mut request);
    // The document parsed here is the one that runs; one that does not parse is left to the schema's own error.
    let (refusal, read) = match request.parsed_query() {
        Ok(document) => {
            let refusal = if schemas.introspection { None } else { limits::introspection_refusal(document) };
            (refusal, only_queries(document))
        }
        Err(_) => (None, false),
    };
    let response = match refusal {
        Some(refusal) => async_graphql::Response::from_errors(vec![refusal]),
        None => schemas.http.execute(request.data(identity).data(budget)).await,
    };
    let refused = response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|error| error.path.is_empty());
    let status = if refused { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let mut answer = (status, GraphQLResponse::from(response)).into_response();
    if read {
        answer.extensions_mut().insert(AnsweredRead);
    }
    answer
}

/// Whether every operation of `document` is a query: whichever runs, the request changes nothing.
fn only_queries(document: &ExecutableDocument) -> bool {
    document.operations.iter().all(|(_, operation)| operation.node.ty == OperationType::Query)
}

/// The runtime an `id` argument names, checked as every id is.
fn runtime_id(id: &str) -> GraphQLResult<RuntimeId> {
    service::parse_runtime_id("id", id).map_err(|invalid| graphql_error(invalid.into()))
}

/// The operation an `id` argument names, checked as every id is.
fn operation_id(id: &str) -> GraphQLResult<OperationId> {
    service::parse_operation_id("id", id).map_err(|invalid| graphql_error(invalid.into()))
}

/// The schema in SDL, as `gqlgen.sh` writes it to `schema.graphql`.
pub fn schema_sdl() -> String {
    Schema::build(Query, Mutation, Subscription).finish().sdl()
}

/// The one place where service errors get their GraphQL form: a message plus `extensions` with `code`
/// (a GraphQL-style name), the Kyma-style `error_code`, `error_reason` and `error_component`, and `field`.
pub fn graphql_error(error: service::Error) -> async_graphql::Error {
    let classified = classify(error);
    let code = match classified.status() {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY | StatusCode::PAYLOAD_TOO_LARGE => "BAD_REQUEST",
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::CONFLICT => "CONFLICT",
        StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
        StatusCode::TOO_MANY_REQUESTS => "TOO_MANY_REQUESTS",
        _ => "INTERNAL",
    };
    let status = classified.status();
    async_graphql::Error::new(classified.message).extend_with(|_, extensions| {
        extensions.set("code", code);
        extensions.set("error_code", status.as_u16());
        extensions.set("error_reason", classified.code.as_str());
        extensions.set("error_component", classified.component.as_str());
        if let Some(field) = &classified.field {
            extensions.set("field", field.as_str());
        }
        if !classified.errors.is_empty() {
            // Plain strings in a list of objects: serializing them cannot fail.
            extensions.set("errors", async_graphql::to_value(&classified.errors).unwrap_or_default());
        }
    })
}

type GraphQLResult<T> = async_graphql::Result<T>;

/// Refused unless the caller may do `action` (Kubernetes RBAC with `APP_AUTHZ_MODE=rbac`).
async fn authorize(context: &Context<'_>, action: Action) -> GraphQLResult<()> {
    let identity = context.data::<Identity>()?;
    identity.authorize(action).await.map_err(|refusal| {
        let (status, reason, message) = match refusal {
            ApiError::Forbidden(message) => (StatusCode::FORBIDDEN, "forbidden", message),
            ApiError::Unavailable(message) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", message),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error".to_owned()),
        };
        async_graphql::Error::new(message).extend_with(|_, extensions| {
            let code = match status {
                StatusCode::FORBIDDEN => "FORBIDDEN",
                StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            extensions.set("code", code);
            extensions.set("error_code", status.as_u16());
            extensions.set("error_reason", reason);
            extensions.set("error_component", Component::Provisioner.as_str());
        })
    })
}

/// The service as the request's caller sees it: only its tenant's runtimes when it named one.
fn service(context: &Context<'_>) -> Service {
    let service = context.data_unchecked::<Service>();
    match context.data_opt::<Identity>() {
        Some(identity) => identity.service(service),
        None => service.clone(),
    }
}
