//! Builds the application from settings and runs it: the API and metrics servers, the Job cache and the worker,
//! supervised together until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::api::authn::Authentication;
use crate::api::{self, HttpSettings, graphql};
use crate::authn::TokenReviewer;
use crate::credentials::{self as auth, AuthClient};
use crate::executor::{Executor, JobSettings};
use crate::render::{self, Renderer};
use crate::service::Service;
use crate::settings::{AuthnSettings, Settings};
use crate::store::{self, Store};
use crate::telemetry::Metrics;
use crate::worker::{Worker, WorkerSettings};

/// How long in-flight work may take to wind down after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open the database ({target}): {source}")]
    Database { target: String, source: store::Error },
    #[error("cannot prepare the SQLite folder {path}: {source}")]
    SqliteFolder { path: String, source: std::io::Error },
    #[error("APP_AUTH_OAUTH_PATH: {0}")]
    Auth(#[from] auth::Error),
    #[error("cannot load the Terraform templates: {0}")]
    Render(#[from] render::Error),
    #[error("cannot listen on {address}: {source}")]
    Bind { address: SocketAddr, source: std::io::Error },
    #[error("server failed: {0}")]
    Serve(std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The wired application: one service behind the API and metrics routers, and the background work.
pub struct App {
    pub service: Service,
    pub router: Router,
    pub metrics_router: Router,
    pub background: Background,
}

/// What runs beside the servers: the watch that keeps the Job cache in sync, and the worker.
#[derive(Default)]
pub struct Background {
    job_cache: Option<Task>,
    worker: Option<Worker>,
}

impl App {
    /// Builds the app with the Kubernetes client inferred from the environment (KUBECONFIG or in-cluster).
    /// Without a cluster operations wait in the queue, and the API works only with authentication off.
    pub async fn build(settings: &Settings) -> Result<Self> {
        let client = match kube::Client::try_default().await {
            Ok(client) => Some(client),
            Err(error) => {
                tracing::warn!(
                    %error,
                    "no Kubernetes cluster configured: operations wait in the queue. \
                     Point KUBECONFIG at a cluster, for example `make dev-cluster` then \
                     `KUBECONFIG=data/dev-cluster/kubeconfig make run`"
                );
                None
            }
        };
        Self::build_with(settings, client).await
    }

    /// Builds the app with the given Kubernetes client (tests pass one with a chosen identity).
    pub async fn build_with(settings: &Settings, kube_client: Option<kube::Client>) -> Result<Self> {
        let database_url = settings.database.url.expose_secret();
        create_sqlite_folder(database_url)?;
        let store = Store::connect(database_url, settings.database.max_connections, settings.database.acquire_timeout)
            .await
            .map_err(|source| Error::Database { target: settings.database.describe(), source })?;
        let auth = AuthClient::new(&settings.auth, settings.auth.timeout)?;
        let metrics = Metrics::new();
        let wake = Arc::new(Notify::new());
        let authentication = authentication(&settings.authn, kube_client.clone(), &metrics);

        let kubernetes = &settings.kubernetes;
        let (executor, job_cache) = match kube_client {
            Some(client) => {
                let job_settings = JobSettings {
                    namespace: kubernetes.job_namespace.clone(),
                    runner_image: kubernetes.terraform_runner_image.clone(),
                    runner_service_account: kubernetes.runner_service_account.clone(),
                    modules_repo_url: kubernetes.modules_repo_url.clone().unwrap_or_default(),
                    modules_ref: kubernetes.modules_repo_ref.clone(),
                };
                let (executor, sync) = Executor::new(client, job_settings);
                (Some(executor), Some(Box::pin(sync) as Task))
            }
            None => (None, None),
        };
        let worker = match (&executor, &kubernetes.modules_repo_url) {
            (Some(executor), Some(_)) => Some(Worker {
                store: store.clone(),
                executor: executor.clone(),
                auth: auth.clone(),
                renderer: Renderer::new()?,
                settings: worker_settings(settings),
                metrics: metrics.clone(),
                wake: wake.clone(),
            }),
            (Some(_), None) => {
                tracing::warn!(
                    "MODULES_REPO_URL is not set: the worker does not start and operations wait in the queue"
                );
                None
            }
            (None, _) => None,
        };

        let service = Service::new(store, settings.validation.clone(), auth, executor, wake);
        let http = HttpSettings {
            api_endpoint: settings.server.api_endpoint.clone(),
            playground_endpoint: settings.server.playground_endpoint.clone(),
            max_body_bytes: settings.server.max_request_body_bytes,
            request_timeout: settings.server.request_timeout,
            max_concurrent_requests: settings.server.max_concurrent_requests,
            graphql: graphql::Limits {
                max_depth: settings.server.graphql_max_depth,
                max_complexity: settings.server.graphql_max_complexity,
                introspection: settings.server.graphql_introspection,
            },
        };
        Ok(App {
            router: api::router(service.clone(), &http, metrics.clone(), authentication),
            metrics_router: api::metrics_router(service.clone(), metrics),
            service,
            background: Background { job_cache, worker },
        })
    }
}

/// Tokens are reviewed with the service's own client; without one, authentication cannot work and the API
/// refuses everything rather than opening up.
fn authentication(settings: &AuthnSettings, client: Option<kube::Client>, metrics: &Metrics) -> Authentication {
    if !settings.enabled {
        tracing::warn!(
            "APP_AUTH_ENABLED=false: the API lets every caller in unauthenticated; only for local development"
        );
        return Authentication::Disabled;
    }
    match client {
        Some(client) => Authentication::Enabled {
            reviewer: Arc::new(TokenReviewer::new(client, settings.audience.clone(), metrics.clone())),
            allowed_users: Arc::new(settings.allowed_users.iter().cloned().collect()),
        },
        None => {
            tracing::error!(
                "authentication needs a Kubernetes cluster to review tokens: every API request is refused \
                 (set APP_AUTH_ENABLED=false for local development without a cluster)"
            );
            Authentication::NoCluster
        }
    }
}

fn worker_settings(settings: &Settings) -> WorkerSettings {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "provisioner".to_owned());
    let operations = &settings.operations;
    WorkerSettings {
        owner: format!("{host}-{}", uuid::Uuid::now_v7().simple()),
        concurrency: operations.worker_concurrency,
        max_runs: operations.worker_max_runs,
        lease: operations.worker_lease,
        poll_interval: operations.worker_poll_interval,
        resume_in_progress: operations.enqueue_in_progress,
        provisioning_timeout: operations.provisioning_timeout,
        deprovisioning_timeout: operations.deprovisioning_timeout,
    }
}

impl Background {
    /// Runs the Job cache and the worker until `shutdown` turns true; the worker then releases its operations.
    /// Dropping this future stops everything at once, as a crash would (tests rely on that).
    pub async fn run(self, shutdown: watch::Receiver<bool>) {
        let mut job_cache = JoinSet::new();
        if let Some(sync) = self.job_cache {
            job_cache.spawn(sync);
        }
        let mut worker = JoinSet::new();
        if let Some(runner) = self.worker {
            worker.spawn(runner.run(shutdown.clone()));
        }
        let mut shutdown = shutdown;
        let _ = shutdown.wait_for(|stop| *stop).await;
        if tokio::time::timeout(SHUTDOWN_GRACE, worker.join_all()).await.is_err() {
            tracing::warn!("the worker did not stop within {SHUTDOWN_GRACE:?}");
        }
        job_cache.shutdown().await;
    }
}

/// The embedded default is a file under `./data`; create its folder on first run.
fn create_sqlite_folder(database_url: &str) -> Result<()> {
    let Some(path) = database_url.strip_prefix("sqlite://") else { return Ok(()) };
    let path = path.split('?').next().unwrap_or_default();
    match std::path::Path::new(path).parent().filter(|parent| !parent.as_os_str().is_empty()) {
        Some(folder) => std::fs::create_dir_all(folder)
            .map_err(|source| Error::SqliteFolder { path: folder.display().to_string(), source }),
        None => Ok(()),
    }
}

/// Both listeners, bound before serving so that callers learn the real ports (port 0 in tests).
pub struct Listeners {
    pub api: TcpListener,
    pub metrics: TcpListener,
}

impl Listeners {
    pub async fn bind(settings: &Settings) -> Result<Self> {
        let bind = |address: SocketAddr| async move {
            TcpListener::bind(address).await.map_err(|source| Error::Bind { address, source })
        };
        Ok(Listeners {
            api: bind(settings.server.address).await?,
            metrics: bind(settings.server.metrics_address).await?,
        })
    }
}

/// Serves the API and the metrics and runs the background work until `shutdown` completes or a server fails;
/// then drains in-flight requests and lets the worker release its operations.
pub async fn serve(app: App, listeners: Listeners, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
    let (stop, stopped) = watch::channel(false);
    let wait_for_stop = |stopped: watch::Receiver<bool>| async move {
        let mut stopped = stopped;
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let api = axum::serve(listeners.api, app.router).with_graceful_shutdown(wait_for_stop(stopped.clone()));
    let metrics =
        axum::serve(listeners.metrics, app.metrics_router).with_graceful_shutdown(wait_for_stop(stopped.clone()));
    let mut servers = JoinSet::new();
    servers.spawn(api.into_future());
    servers.spawn(metrics.into_future());
    let background = tokio::spawn(app.background.run(stopped));

    // Supervision: the first of a shutdown signal or a failing server stops everything.
    let result = tokio::select! {
        () = shutdown => Ok(()),
        Some(finished) = servers.join_next() => match finished {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(Error::Serve(error)),
            Err(panic) => Err(Error::Serve(std::io::Error::other(panic.to_string()))),
        },
    };
    let _ = stop.send(true);
    while servers.join_next().await.is_some() {}
    let _ = background.await;
    result
}
