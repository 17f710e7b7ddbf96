//! What every request goes through: the request limits (body size, time, concurrency), the request id, its span
//! (an authenticated request's exported span too: [`traced_request`]) and the HTTP metrics. A 5xx answer is no
//! ERROR line of its own: [`log_request`] logs it at INFO with its status, the metrics count it by status, and what
//! caused it says so once (a dependency's outage: [`crate::telemetry::Dependency`]; a bug: the ERROR of
//! [`super::error`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{BoxError, Extension, Router};
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use super::browser_guard;
use super::error::ApiError;
use super::problem;
use crate::telemetry::{self, Metrics};

/// The limited routes under the time and concurrency limits, then with `health` the security headers, the
/// metrics, the request id and the request's span around both.
pub(super) fn around(
    limited: Router,
    health: Router,
    timeout: Duration,
    in_flight: Arc<tokio::sync::Semaphore>,
    metrics: Metrics,
) -> Router {
    let x_request_id = axum::http::HeaderName::from_static("x-request-id");
    limited
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(move |error: BoxError| async move { limit_error(error, timeout) }))
                // Beyond the limit, answer 503 at once rather than queueing.
                .load_shed()
                // Global: one semaphore shared by every route the layer is applied to.
                .layer(GlobalConcurrencyLimitLayer::with_semaphore(in_flight))
                .timeout(timeout),
        )
        .merge(health)
        .layer(middleware::from_fn(browser_guard::response_headers))
        .layer(middleware::from_fn(record_metrics))
        .layer(middleware::from_fn(problem::with_request_id))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(x_request_id.clone(), MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(request_span)
                        .on_response(())
                        .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
                )
                .layer(middleware::from_fn(log_request))
                .layer(PropagateRequestIdLayer::new(x_request_id))
                .layer(Extension(metrics)),
        )
}

/// Reads the whole body within the limit before any handler of an authenticated route runs, so that every such
/// route (the GraphQL extractor included) answers a body that is too large with the same 413.
pub(super) async fn limit_body(State(limit): State<usize>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(_) => ApiError::PayloadTooLarge { limit }.into_response(),
    }
}

/// The errors of the timeout and load-shed layers, as JSON answers.
fn limit_error(error: BoxError, timeout: Duration) -> ApiError {
    if error.is::<tower::timeout::error::Elapsed>() {
        ApiError::Timeout(timeout)
    } else if error.is::<tower::load_shed::error::Overloaded>() {
        ApiError::Overloaded
    } else {
        ApiError::Unavailable(error.to_string())
    }
}

/// The span of every request, for its log lines: never exported (`untraced`, see
/// [`process_support::traces::UNTRACED`]). It starts before the caller is authenticated, so a caller's
/// `traceparent` is not read here: [`traced_request`] makes the exported span once [`super::authentication`] has
/// let the caller in (issue #52 item 5). The public routes (the playground, its assets, the API reference, the
/// GraphQL endpoint's GET and its WebSocket subscriptions, whose operations run in the socket's own task), health
/// and unmatched paths are therefore not traced at all. `otel.name` and `otel.kind` stay so that log lines read as
/// they did.
fn request_span(request: &Request) -> tracing::Span {
    let (method, route, request_id) = described(request);
    tracing::info_span!(
        "request",
        %method,
        route,
        request_id,
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        untraced = tracing::field::Empty
    )
}

/// The request's method, route template and id, as its spans show them.
fn described(request: &Request) -> (&Method, &str, &str) {
    let route = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str).unwrap_or("unmatched");
    let request_id =
        request.extensions().get::<RequestId>().and_then(|id| id.header_value().to_str().ok()).unwrap_or("-");
    (request.method(), route, request_id)
}

/// The exported span of a request whose caller is authenticated: a server span `{METHOD} {route}`, a child of the
/// caller's `traceparent` when it sent one (set before the span is entered, the only time it can be). Whether it
/// is sampled is this process's sampler's decision: the caller's flag counts only with a `parentbased_*`
/// `OTEL_TRACES_SAMPLER`. Of target [`telemetry::SPAN_TARGET`], it is not named in log lines, which keep naming
/// the `request` span around it; the operation the request queues keeps its context (`current_traceparent`).
pub(super) fn traced_request(request: &Request) -> tracing::Span {
    let (method, route, request_id) = described(request);
    let span = tracing::info_span!(
        target: telemetry::SPAN_TARGET,
        "request",
        %method,
        route,
        request_id,
        otel.name = format!("{method} {route}"),
        otel.kind = "server"
    );
    if let Some(traceparent) = request.headers().get("traceparent").and_then(|value| value.to_str().ok()) {
        telemetry::continue_trace(&span, traceparent);
    }
    span
}

/// In the extensions of an answer to an authenticated request: its exported span, which the request's log line is
/// written in, so that the line carries the trace's ids; the span ends then.
#[derive(Clone)]
pub(super) struct TracedRequest(pub(super) tracing::Span);

/// A read slower than this is logged at `info` like a change.
const SLOW_REQUEST: Duration = Duration::from_secs(1);

/// In the extensions of an answer to a request that only read though its method may change (a GraphQL query is
/// a POST): its line is logged as a GET's is.
#[derive(Debug, Clone, Copy)]
pub(super) struct AnsweredRead;

/// One line per request, in its span: at `info` for a change, a refused or failed request, or a slow one; at
/// `debug` for a read answered in time. The metrics count every request; a line for each read cost a sixth of the
/// status reads' throughput.
async fn log_request(request: Request, next: Next) -> Response {
    let get = matches!(*request.method(), Method::GET | Method::HEAD);
    let started = Instant::now();
    let mut response = next.run(request).await;
    let read = get || response.extensions().get::<AnsweredRead>().is_some();
    let latency = started.elapsed();
    let (status, duration_ms) = (response.status().as_u16(), latency.as_secs_f64() * 1000.0);
    let traced =
        response.extensions_mut().remove::<TracedRequest>().map_or_else(tracing::Span::none, |traced| traced.0);
    traced.in_scope(|| {
        if read && status < 400 && latency < SLOW_REQUEST {
            tracing::debug!(status, duration_ms, "request");
        } else {
            tracing::info!(status, duration_ms, "request");
        }
    });
    response
}

/// Counts requests and their durations by route template (never the raw path, which would explode the labels).
async fn record_metrics(Extension(metrics): Extension<Metrics>, request: Request, next: Next) -> impl IntoResponse {
    // Both are kept without copying their text: a matched path is shared, a standard method a constant.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let started = Instant::now();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    metrics.observe_http(method.as_str(), route, response.status().as_u16(), started.elapsed());
    response
}
