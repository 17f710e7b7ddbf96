//! What Kubernetes and operators ask of the process itself: liveness, readiness, health and the build.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::setup_progress::{self, SetupProgress};
use crate::build_info;
use crate::service::ExecutorHealth;

/// Liveness: the process serves HTTP. It checks no dependency, so an outage elsewhere never restarts the pod.
#[utoipa::path(
    get,
    tag = "health",
    path = "/livez",
    summary = "Liveness",
    security(()),
    responses((status = 200, description = "The process is serving", body = Liveness))
)]
pub async fn livez() -> Json<Liveness> {
    Json(Liveness { status: "ok".to_owned() })
}

/// What `/livez` answers.
#[derive(Serialize, ToSchema)]
pub struct Liveness {
    status: String,
}

/// Readiness: the dependencies of `/healthz`, and not shutting down. From the shutdown signal on it answers 503
/// with status `draining` while the process still serves, so that nothing new is sent to it.
#[utoipa::path(
    get,
    tag = "health",
    path = "/readyz",
    summary = "Readiness",
    security(()),
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "The database is unreachable, the worker is gone or the process is shutting down", body = Health),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    let mut health = health(&state).await;
    if state.process.draining.is_draining() {
        health.status = "draining".to_owned();
    }
    health.into_response()
}

#[utoipa::path(
    get,
    tag = "health",
    path = "/healthz",
    summary = "Health of the service and its dependencies",
    security(()),
    responses(
        (status = 200, description = "Healthy", body = Health),
        (status = 503, description = "The database is unreachable or the worker is gone", body = Health),
    )
)]
pub async fn healthz(State(state): State<AppState>) -> Response {
    health(&state).await.into_response()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`; `unavailable` when the database cannot be reached or the worker is gone; on `/readyz`, `draining`
    /// once the process is shutting down. Anything but `ok` comes with 503.
    status: String,
    /// `ok`, or `unavailable` when a ping does not succeed within 1 s.
    database: String,
    /// `ok`, `syncing` (the Job cache has not listed yet) or `unavailable` (the API server does not answer within
    /// 1 s, or no cluster is configured: operations wait in the queue). It does not make the answer 503: the API
    /// still serves, and restarting would not help.
    kubernetes: String,
    /// `ok`, `disabled` (this process runs no worker), or `stalled` / `stopped` (then the answer is 503).
    worker: String,
    /// Only under `make run` while it builds and starts the local cluster and cloud (`APP_SETUP_PROGRESS_FILE`):
    /// which step, how long it has taken and how long it is expected to take. It does not make the answer 503.
    #[serde(skip_serializing_if = "Option::is_none")]
    setup: Option<SetupProgress>,
}

impl IntoResponse for Health {
    fn into_response(self) -> Response {
        if self.status == "ok" {
            return (StatusCode::OK, Json(self)).into_response();
        }
        let retry_after = [(header::RETRY_AFTER, crate::api::error::UNAVAILABLE_RETRY_AFTER_SECONDS)];
        (StatusCode::SERVICE_UNAVAILABLE, retry_after, Json(self)).into_response()
    }
}

async fn health(state: &AppState) -> Health {
    // Each dependency has its own budget, checked at the same time, so the answer comes within about a second.
    let setup = async {
        match &state.process.setup_progress_file {
            Some(file) => setup_progress::read(file).await,
            None => None,
        }
    };
    let (kubernetes, database, setup) =
        tokio::join!(state.service.executor_health(), state.service.database_health(), setup);
    let kubernetes = match kubernetes {
        ExecutorHealth::Ready => "ok",
        ExecutorHealth::Syncing => "syncing",
        ExecutorHealth::Unreachable | ExecutorHealth::NotConfigured => "unavailable",
    };
    let worker = state.process.worker.status();
    let database = match database {
        Ok(()) => "ok",
        Err(error) => {
            // The database's outage is told once, by `database_health`.
            tracing::debug!(%error, "health check failed");
            "unavailable"
        }
    };
    let healthy = database == "ok" && worker.is_healthy();
    Health {
        status: if healthy { "ok" } else { "unavailable" }.to_owned(),
        database: database.to_owned(),
        kubernetes: kubernetes.to_owned(),
        worker: worker.as_str().to_owned(),
        setup,
    }
}

/// The build that answers: its version and the commit it was built from.
#[utoipa::path(
    get,
    tag = "health",
    path = "/version",
    summary = "The running version",
    security(()),
    responses((status = 200, description = "The running build", body = Version))
)]
pub async fn version() -> Json<Version> {
    Json(Version { version: build_info::VERSION.to_owned(), commit: build_info::COMMIT.to_owned() })
}

#[derive(Serialize, ToSchema)]
pub struct Version {
    /// The package version, such as `0.1.0`.
    version: String,
    /// The git commit the binary was built from, or `unknown` when the build had none.
    commit: String,
}
