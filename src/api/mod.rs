//! HTTP surface: GraphQL and REST adapters over one [`Service`], health, and around them authentication, the
//! request limits (body size, time, concurrency) and the per-request tracing and metrics.

pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod browser_guard;
pub mod error;
pub mod error_catalogue;
pub mod error_code;
pub mod graphql;
mod middleware;
pub mod playground;
pub mod probes;
pub mod problem;
pub mod rest;
pub mod setup_progress;
mod ttl_cache;
pub mod views;
pub mod websocket;

use std::sync::Arc;
use std::time::Duration;

use async_graphql_axum::GraphQLRequest;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Extension, Router};

use crate::service::Service;
use crate::telemetry::{Draining, Metrics, WorkerHealth};
use authentication::{Authentication, Identity};
use error::ApiError;
use playground::PlaygroundAssets;

/// GET on the GraphQL endpoint: a WebSocket upgrade serves subscriptions (graphql-transport-ws, the caller
/// authenticated from the `connection_init` payload); any other GET gets the playground when it lives there.
async fn graphql_get(
    schema: graphql::ProvisionerSchema,
    gate: websocket::SocketGate,
    limits: websocket::SocketLimits,
    playground: Option<(PlaygroundAssets, String)>,
    request: Request,
) -> Response {
    use async_graphql_axum::GraphQLProtocol;
    use axum::extract::FromRequestParts as _;
    use axum::extract::ws::WebSocketUpgrade;

    let (mut parts, _) = request.into_parts();
    let upgrade = parts.headers.get(axum::http::header::UPGRADE);
    if !upgrade.is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"websocket")) {
        return match playground {
            Some((assets, api_endpoint)) => assets.graphiql(&api_endpoint),
            None => ApiError::MethodNotAllowed("GET".to_owned()).into_response(),
        };
    }
    if browser_guard::is_cross_origin(&parts.headers) {
        return browser_guard::cross_origin_refusal().into_response();
    }
    let protocol = match GraphQLProtocol::from_request_parts(&mut parts, &()).await {
        Ok(protocol) => protocol,
        Err(rejection) => return rejection.into_response(),
    };
    // A gateway in front names the tenant on the upgrade request; a browser cannot, and names it in its payload.
    let tenant = match authentication::tenant_header(&parts.headers) {
        Ok(tenant) => tenant,
        Err(refusal) => return refusal.into_response(),
    };
    match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => websocket::upgrade(upgrade, schema, protocol, websocket::Connection { gate, tenant }, limits),
        Err(rejection) => rejection.into_response(),
    }
}

/// Where the GraphQL endpoints live and the limits every request is held to.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub api_endpoint: String,
    pub playground_endpoint: String,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    pub websocket_init_timeout: Duration,
    pub websocket_reauthentication_interval: Duration,
    pub max_concurrent_requests: usize,
    pub graphql: graphql::Limits,
}

#[derive(Clone)]
pub struct AppState {
    pub service: Service,
    pub process: ProcessHealth,
}

/// What the probes report on besides the service: the worker's loop, whether shutdown has begun, and where
/// `make run` reports its set-up.
#[derive(Clone)]
pub struct ProcessHealth {
    pub worker: WorkerHealth,
    pub draining: Draining,
    pub setup_progress_file: Option<std::path::PathBuf>,
}

pub fn router(
    service: Service,
    settings: &HttpSettings,
    metrics: Metrics,
    authentication: Authentication,
    process: ProcessHealth,
    playground: PlaygroundAssets,
) -> Router {
    // One set of permits for HTTP requests and operations over WebSockets.
    let in_flight = Arc::new(tokio::sync::Semaphore::new(settings.max_concurrent_requests));
    let schemas = graphql::schemas(service.clone(), settings.graphql, in_flight.clone());
    let state = AppState { service, process };
    let playground_endpoint = settings.playground_endpoint.clone();
    let subscriptions = subscriptions(schemas.websocket.clone(), settings, &authentication, &state, &playground);
    let limited = public_routes(settings, subscriptions, playground)
        .route("/", get(move || async move { Redirect::temporary(&playground_endpoint) }))
        .merge(protected_routes(schemas, settings, authentication, &state))
        .fallback(rest::no_route)
        .method_not_allowed_fallback(rest::method_not_allowed)
        .with_state(state.clone());
    // Probes answer outside the request limits: a flood of requests must not make a healthy pod look dead.
    let health = Router::new()
        .route("/healthz", get(probes::healthz))
        .route("/readyz", get(probes::readyz))
        .route("/livez", get(probes::livez))
        .route("/version", get(probes::version))
        .with_state(state);
    middleware::around(limited, health, settings.request_timeout, in_flight, metrics)
}

/// GET on the GraphQL endpoint: WebSocket subscriptions, and the playground when it is served there too.
fn subscriptions(
    schema: graphql::ProvisionerSchema,
    settings: &HttpSettings,
    authentication: &Authentication,
    state: &AppState,
    playground: &PlaygroundAssets,
) -> MethodRouter<AppState> {
    let gate = websocket::SocketGate { authentication: authentication.clone(), service: state.service.clone() };
    let page = (settings.playground_endpoint == settings.api_endpoint)
        .then(|| (playground.clone(), settings.api_endpoint.clone()));
    let limits = websocket::SocketLimits {
        init_timeout: settings.websocket_init_timeout,
        reauthentication_interval: settings.websocket_reauthentication_interval,
        max_message_bytes: settings.max_body_bytes,
    };
    get(move |request: Request| graphql_get(schema, gate, limits, page, request))
}

/// Everything but health and the static playground pages needs a caller the platform knows.
fn protected_routes(
    schemas: graphql::Schemas,
    settings: &HttpSettings,
    authentication: Authentication,
    state: &AppState,
) -> Router<AppState> {
    let graphql_service = state.service.clone();
    // One count to raise per request, not one per schema.
    let schemas = Arc::new(schemas);
    Router::new()
        .route(
            &settings.api_endpoint,
            // The non-batch extractor: a batch would run many operations under one request's limits.
            post(
                move |Extension(identity): Extension<Identity>,
                      headers: HeaderMap,
                      request: GraphQLRequest<ApiError>| {
                    let schemas = schemas.clone();
                    let budget = graphql_service.log_budget();
                    async move {
                        if !browser_guard::is_json(&headers) {
                            return ApiError::UnsupportedMediaType.into_response();
                        }
                        graphql::execute(&schemas, request.into_inner(), identity, budget).await
                    }
                },
            ),
        )
        .route("/api/v1/runtimes", get(rest::list_runtimes).post(rest::create_runtime))
        .route("/api/v1/runtimes/{id}", get(rest::get_runtime).patch(rest::patch_runtime).delete(rest::delete_runtime))
        .route("/api/v1/runtimes/{id}/hibernate", post(rest::hibernate_runtime))
        .route("/api/v1/runtimes/{id}/wake", post(rest::wake_runtime))
        .route("/api/v1/runtimes/{id}/kubeconfig/rotation", post(rest::rotate_kubeconfig))
        .route("/api/v1/runtimes/{id}/certificates/renewal", post(rest::renew_certificates))
        .route("/api/v1/provisions", get(rest::list_provisions).post(rest::create_provision))
        .route("/api/v1/provisions/{id}/operations", get(rest::list_operations))
        .route("/api/v1/operations/{id}", get(rest::get_operation))
        .route("/api/v1/operations/{id}/cancel", post(rest::cancel_operation))
        .route("/api/v1/operations/{id}/retry", post(rest::retry_operation))
        .route("/api/v1/operations/{id}/approve", post(rest::approve_operation))
        .route("/api/v1/operations/{id}/reject", post(rest::reject_operation))
        .route("/api/v1/operations/{id}/logs", get(rest::get_operation_logs))
        .route("/api/v1/operations/{id}/events", get(rest::get_operation_events))
        .route(
            "/api/v1/provisions/{id}",
            get(rest::get_provision).patch(rest::patch_provision).delete(rest::delete_provision),
        )
        .route("/api/v1/provisions/{id}/hibernate", post(rest::hibernate_provision))
        .route("/api/v1/provisions/{id}/wake", post(rest::wake_provision))
        .route("/api/v1/provisions/{id}/logs", get(rest::get_logs))
        .route("/api/v1/provisions/{id}/kubeconfig", get(rest::get_kubeconfig))
        .route(rest::OPENAPI_PATH, get(rest::openapi))
        .route(&format!("{}/{{code}}", error_code::PROBLEM_TYPES_PATH), get(rest::get_problem_type))
        // The body is read (within its limit) only once the caller is known: a stranger's request is refused
        // before it can hold a request slot by sending its body slowly.
        .route_layer(axum::middleware::from_fn_with_state(settings.max_body_bytes, middleware::limit_body))
        .route_layer(axum::middleware::from_fn_with_state(authentication.clone(), authentication::authorize_route))
        .route_layer(axum::middleware::from_fn_with_state(authentication, authentication::authenticate))
        .route_layer(axum::middleware::from_fn(browser_guard::refuse_cross_origin_changes))
}

/// The GraphQL endpoint's GET (subscriptions), the playground and its assets, and the API reference.
fn public_routes(
    settings: &HttpSettings,
    subscriptions: MethodRouter<AppState>,
    playground: PlaygroundAssets,
) -> Router<AppState> {
    let assets = Router::new()
        .route(&format!("{}/{{name}}", playground::ASSETS_PATH), get(playground::asset))
        .with_state(playground.clone());
    let reference = playground.clone();
    let public = Router::new()
        .route(&settings.api_endpoint, subscriptions)
        .route(playground::API_REFERENCE_PATH, get(move || async move { reference.api_reference(rest::OPENAPI_PATH) }))
        .merge(assets);
    if settings.playground_endpoint == settings.api_endpoint {
        return public;
    }
    let api_endpoint = settings.api_endpoint.clone();
    public.route(&settings.playground_endpoint, get(move || async move { playground.graphiql(&api_endpoint) }))
}

/// The metrics server's router: Prometheus text at `/metrics`, operation gauges refreshed from the store (and the
/// certificate expiries at most once a minute).
pub fn metrics_router(service: Service, metrics: Metrics) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let service = service.clone();
            let metrics = metrics.clone();
            async move {
                match service.operation_counts().await {
                    Ok(counts) => metrics.set_operation_counts(&counts),
                    // An outage is told once, as it begins (telemetry::Dependency), not at every scrape.
                    Err(crate::service::Error::Unavailable { .. }) => {}
                    Err(error) => tracing::warn!(%error, "could not count operations for metrics"),
                }
                if metrics.certificates().refresh_due() {
                    match service.observed_certificates().await {
                        Ok(readings) => metrics.certificates().set_expiries(&readings),
                        Err(crate::service::Error::Unavailable { .. }) => {}
                        Err(error) => tracing::warn!(%error, "could not read certificate expiries for metrics"),
                    }
                }
                ([(axum::http::header::CONTENT_TYPE, Metrics::CONTENT_TYPE)], metrics.encode())
            }
        }),
    )
}
