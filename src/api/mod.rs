//! HTTP surface: GraphQL and REST adapters over one [`Service`], health, and the per-request tracing and
//! metrics around them.

pub mod graphql;
pub mod rest;

use std::time::Instant;

use async_graphql::http::GraphiQLSource;
use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use axum::extract::{MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::service::Service;
use crate::telemetry::Metrics;

/// Where the two GraphQL endpoints live and how big a request body may be.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub api_endpoint: String,
    pub playground_endpoint: String,
    pub max_body_bytes: usize,
}

#[derive(Clone)]
pub struct AppState {
    pub service: Service,
    pub max_body_bytes: usize,
}

pub fn router(service: Service, settings: &HttpSettings, metrics: Metrics) -> Router {
    let schema = graphql::schema(service.clone());
    let state = AppState { service, max_body_bytes: settings.max_body_bytes };
    let playground = GraphiQLSource::build().endpoint(&settings.api_endpoint).finish();
    let playground_endpoint = settings.playground_endpoint.clone();

    // The GraphQL extractor reads the body itself, so its limit has to be a layer on that route.
    let graphql_routes = Router::new()
        .route(
            &settings.api_endpoint,
            post(move |request: GraphQLRequest| {
                let schema = schema.clone();
                async move { GraphQLResponse::from(schema.execute(request.into_inner()).await) }
            }),
        )
        .layer(RequestBodyLimitLayer::new(settings.max_body_bytes));

    let x_request_id = axum::http::HeaderName::from_static("x-request-id");
    Router::new()
        .route(&settings.playground_endpoint, get(move || async move { Html(playground) }))
        .route("/", get(move || async move { Redirect::temporary(&playground_endpoint) }))
        .merge(graphql_routes)
        .route("/api/v1/provisions", post(rest::create_provision))
        .route("/api/v1/provisions/{id}", get(rest::get_provision).delete(rest::delete_provision))
        .route("/api/v1/provisions/{id}/logs", get(rest::get_logs))
        .route("/api/v1/provisions/{id}/kubeconfig", get(rest::get_kubeconfig))
        .route("/api/v1/openapi.json", get(rest::openapi))
        .route("/healthz", get(rest::healthz))
        .with_state(state)
        .layer(middleware::from_fn(record_metrics))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(x_request_id.clone(), MakeRequestUuid))
                .layer(TraceLayer::new_for_http().make_span_with(request_span).on_response(log_response))
                .layer(PropagateRequestIdLayer::new(x_request_id))
                .layer(Extension(metrics)),
        )
}

fn request_span(request: &Request) -> tracing::Span {
    let route = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str).unwrap_or("unmatched");
    let request_id =
        request.extensions().get::<RequestId>().and_then(|id| id.header_value().to_str().ok()).unwrap_or("-");
    tracing::info_span!("request", method = %request.method(), route, request_id)
}

fn log_response(response: &Response, latency: std::time::Duration, _span: &tracing::Span) {
    tracing::info!(status = response.status().as_u16(), duration_ms = latency.as_secs_f64() * 1000.0, "request");
}

/// Counts requests and their durations by route template (never the raw path, which would explode the labels).
async fn record_metrics(Extension(metrics): Extension<Metrics>, request: Request, next: Next) -> impl IntoResponse {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = request.method().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    metrics.observe_http(&method, &route, response.status().as_u16(), started.elapsed());
    response
}

/// The metrics server's router: Prometheus text at `/metrics`, operation gauges refreshed from the store.
pub fn metrics_router(service: Service, metrics: Metrics) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let service = service.clone();
            let metrics = metrics.clone();
            async move {
                match service.operation_counts().await {
                    Ok(counts) => metrics.set_operation_counts(&counts),
                    Err(error) => tracing::warn!(%error, "could not count operations for metrics"),
                }
                ([(axum::http::header::CONTENT_TYPE, Metrics::CONTENT_TYPE)], metrics.encode())
            }
        }),
    )
}
