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

use crate::listener_tls::{LoadError, TlsListener};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::api::audit::AuditTrail;
use crate::api::authentication::token_review::TokenReviewer;
use crate::api::authentication::{Access, Authentication, Mode};
use crate::api::authorization::Authorizer;
use crate::api::playground::PlaygroundAssets;
use crate::api::{self, ProcessHealth};
use crate::credentials::{self, AuthClient, CredentialSource, Credentials, SecretCredentials};
use crate::declarative::reconciler::RuntimeResources;
use crate::executor::Executor;
use crate::fleet::CertificateWatch;
use crate::render::{self, Renderer};
use crate::service::Service;
use crate::settings::{AuthnSettings, AuthzMode, DatabaseSettings, Settings};
use crate::store::{self, Migrations, StatementMetrics, Store};
use crate::telemetry::{Draining, Metrics, WorkerHealth};
use crate::worker::{Retention, Worker};

/// How long in-flight work may take to wind down after a shutdown signal (and its delay).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open the database ({target}): {source}")]
    Database { target: String, source: store::Error },
    #[error("cannot prepare the SQLite folder {path}: {source}")]
    SqliteFolder { path: String, source: std::io::Error },
    #[error("APP_AUTH_OAUTH_PATH: {0}")]
    Auth(#[from] credentials::Error),
    #[error("cannot load the Terraform templates: {0}")]
    Render(#[from] render::Error),
    #[error("cannot listen on {address}: {source}")]
    Bind { address: SocketAddr, source: std::io::Error },
    #[error("APP_TLS_CERT_FILE/APP_TLS_KEY_FILE: {0}")]
    Tls(LoadError),
    #[error("server failed: {0}")]
    Serve(std::io::Error),
    /// A long-running task ended before shutdown; the process goes down with it.
    #[error("the {task} stopped: {reason}")]
    TaskEnded { task: &'static str, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A supervised task: ends with why, if it ends on its own.
type Task = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The wired application: one service behind the API and metrics routers, and the background work.
pub struct App {
    pub service: Service,
    pub router: Router,
    pub metrics_router: Router,
    pub background: Background,
    /// Turned on by the shutdown signal; `/readyz` answers 503 from then on.
    pub draining: Draining,
    /// How long the process keeps serving, not ready, after the shutdown signal ([`ServerSettings::shutdown_delay`]).
    ///
    /// [`ServerSettings::shutdown_delay`]: crate::settings::ServerSettings::shutdown_delay
    pub shutdown_delay: Duration,
}

/// What runs beside the servers: the watch that keeps the Job cache in sync, and the worker.
pub struct Background {
    job_cache: Option<Task>,
    worker: Option<Worker>,
    /// Runs where the worker runs.
    retention: Option<Retention>,
    /// Runs where the worker runs.
    certificate_watch: Option<CertificateWatch>,
    runtime_resources: Option<RuntimeResources>,
    worker_health: WorkerHealth,
}

impl Default for Background {
    fn default() -> Self {
        Background {
            job_cache: None,
            worker: None,
            retention: None,
            certificate_watch: None,
            runtime_resources: None,
            worker_health: WorkerHealth::disabled(),
        }
    }
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
                     Point KUBECONFIG at a cluster (`make run` starts one on this machine)"
                );
                None
            }
        };
        Self::build_with(settings, client, AuditTrail::log()).await
    }

    /// Builds the app with the given Kubernetes client (tests pass one with a chosen identity) and audit trail
    /// (tests keep its entries).
    pub async fn build_with(settings: &Settings, kube_client: Option<kube::Client>, audit: AuditTrail) -> Result<Self> {
        let metrics = Metrics::new();
        let store = connect(&settings.database, settings.database.migrations, metrics.statements()).await?;
        let credentials = credential_source(settings, kube_client.as_ref())?;
        let wake = Arc::new(Notify::new());
        let authentication = authentication(&settings.authn, kube_client.clone(), &metrics, audit);

        let kubernetes = &settings.kubernetes;
        let (executor, job_cache) = match kube_client.clone() {
            Some(client) => {
                let (executor, sync) = Executor::new(client, kubernetes.jobs.clone());
                let sync = async move {
                    sync.await;
                    Err("the Job watch ended".to_owned())
                };
                (Some(executor), Some(Box::pin(sync) as Task))
            }
            None => (None, None),
        };
        // Longer than any turn of the worker's loop may take: a poll, and claims bounded by their store timeout.
        let worker_health = WorkerHealth::running(settings.worker.poll_interval * 2 + Duration::from_secs(60));
        let worker = match (&executor, &kubernetes.modules) {
            (Some(executor), Some(modules)) => Some(Worker {
                store: store.clone(),
                executor: executor.clone(),
                credentials: credentials.clone(),
                renderer: Renderer::new()?
                    .with_operator_api_allowed_cidrs(settings.validation.api_allowed_cidrs.as_deref()),
                settings: settings.worker.clone(),
                modules: modules.clone(),
                metrics: metrics.clone(),
                wake: wake.clone(),
                health: worker_health.clone(),
            }),
            (Some(_), None) => {
                tracing::warn!(
                    "MODULES_REPO_URL is not set: the worker does not start and operations wait in the queue"
                );
                None
            }
            (None, _) => None,
        };

        let retention = worker.as_ref().map(|_| Retention { store: store.clone(), periods: settings.retention });
        let service =
            Service::new(store, settings.validation.clone(), credentials, executor, wake, settings.service.clone());
        let certificate_watch = worker.as_ref().map(|_| CertificateWatch {
            service: service.clone(),
            metrics: metrics.clone(),
            settings: settings.certificates,
        });
        let worker_health = if worker.is_some() { worker_health } else { WorkerHealth::disabled() };
        let runtime_resources = match (&kube_client, &kubernetes.runtime_resources) {
            (Some(client), Some(namespaces)) => Some(RuntimeResources {
                client: client.clone(),
                service: service.clone(),
                namespaces: namespaces.clone(),
            }),
            _ => None,
        };
        let draining = Draining::default();
        Ok(App {
            router: api::router(
                service.clone(),
                &settings.http,
                metrics.clone(),
                authentication,
                ProcessHealth {
                    worker: worker_health.clone(),
                    draining: draining.clone(),
                    setup_progress_file: settings.server.setup_progress_file.clone(),
                },
                PlaygroundAssets::load(&settings.server.playground_assets_dir),
            ),
            metrics_router: api::metrics_router(service.clone(), metrics),
            service,
            background: Background {
                job_cache,
                worker,
                retention,
                certificate_watch,
                runtime_resources,
                worker_health,
            },
            draining,
            shutdown_delay: settings.server.shutdown_delay,
        })
    }
}

/// Tokens are reviewed with the service's own client; without one, authentication cannot work and the API
/// refuses everything rather than opening up.
fn authentication(
    settings: &AuthnSettings,
    client: Option<kube::Client>,
    metrics: &Metrics,
    audit: AuditTrail,
) -> Authentication {
    Authentication {
        mode: authentication_mode(settings, client, metrics),
        audit,
        tenant_required: settings.tenant_required,
    }
}

fn authentication_mode(settings: &AuthnSettings, client: Option<kube::Client>, metrics: &Metrics) -> Mode {
    if !settings.enabled {
        tracing::warn!(
            "APP_AUTH_ENABLED=false: the API lets every caller in unauthenticated; only for local development"
        );
        return Mode::Disabled;
    }
    match client {
        Some(client) => Mode::Enabled {
            reviewer: Arc::new(TokenReviewer::new(client.clone(), settings.audience.clone(), metrics.clone())),
            access: match settings.authorization {
                AuthzMode::AllowList => Access::AllowList(Arc::new(settings.allowed_users.iter().cloned().collect())),
                AuthzMode::Rbac => Access::Rbac(Arc::new(Authorizer::new(client))),
            },
        },
        None => {
            tracing::error!(
                "authentication needs a Kubernetes cluster to review tokens: every API request is refused \
                 (set APP_AUTH_ENABLED=false for local development without a cluster)"
            );
            Mode::NoCluster
        }
    }
}

/// The process's long-running tasks, supervised together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskName {
    ApiServer,
    MetricsServer,
    JobCache,
    Worker,
    Retention,
    CertificateWatch,
    RuntimeResources,
}

impl TaskName {
    fn as_str(self) -> &'static str {
        match self {
            TaskName::ApiServer => "API server",
            TaskName::MetricsServer => "metrics server",
            TaskName::JobCache => "Job cache",
            TaskName::Worker => "worker",
            TaskName::Retention => "retention",
            TaskName::CertificateWatch => "certificate watch",
            TaskName::RuntimeResources => "Runtime resources",
        }
    }
}

/// How long a process whose worker failed keeps answering (`/healthz` with 503) before it exits, so that probes
/// and load balancers see it go.
const FAILURE_DRAIN: Duration = Duration::from_secs(3);

/// Runs named tasks until `shutdown` completes or one of them ends on its own. The first to end is logged with
/// its name and why; then every task is told to stop (`stop`) and given [`SHUTDOWN_GRACE`]. Dropping this future
/// stops everything at once, as a crash would (tests rely on that).
async fn supervise(
    tasks: Vec<(TaskName, Task)>,
    stop: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
    worker_health: &WorkerHealth,
) -> Result<()> {
    let mut running = JoinSet::new();
    let mut names = std::collections::HashMap::new();
    for (name, task) in tasks {
        names.insert(running.spawn(task).id(), name);
    }
    let ended = tokio::select! {
        () = shutdown => None,
        Some(ended) = running.join_next_with_id() => Some(match ended {
            Ok((id, Ok(()))) => (names[&id], "it ended without an error".to_owned()),
            Ok((id, Err(reason))) => (names[&id], reason),
            Err(error) => (names[&error.id()], format!("it panicked: {error}")),
        }),
    };
    if let Some((task, reason)) = &ended {
        tracing::error!(task = task.as_str(), %reason, "a long-running task stopped; shutting the process down");
        if *task == TaskName::Worker {
            worker_health.stopped();
            tokio::time::sleep(FAILURE_DRAIN).await;
        }
    }
    let _ = stop.send(true);
    if tokio::time::timeout(SHUTDOWN_GRACE, async { while running.join_next().await.is_some() {} }).await.is_err() {
        tracing::warn!("tasks did not stop within {SHUTDOWN_GRACE:?}");
        running.shutdown().await;
    }
    match ended {
        None => Ok(()),
        Some((task, reason)) => Err(Error::TaskEnded { task: task.as_str(), reason }),
    }
}

impl Background {
    /// The Job cache and the worker as supervised tasks; they stop when `stopped` turns true (the worker then
    /// releases its operations).
    fn tasks(self, stopped: watch::Receiver<bool>) -> Vec<(TaskName, Task)> {
        let mut tasks = Vec::new();
        if let Some(sync) = self.job_cache {
            let mut stopped = stopped.clone();
            let sync = async move {
                tokio::select! {
                    result = sync => result,
                    _ = stopped.wait_for(|stop| *stop) => Ok(()),
                }
            };
            tasks.push((TaskName::JobCache, Box::pin(sync) as Task));
        }
        if let Some(retention) = self.retention {
            tasks.push((TaskName::Retention, Box::pin(retention.run(stopped.clone())) as Task));
        }
        if let Some(watch) = self.certificate_watch {
            tasks.push((TaskName::CertificateWatch, Box::pin(watch.run(stopped.clone())) as Task));
        }
        if let Some(resources) = self.runtime_resources {
            tasks.push((TaskName::RuntimeResources, Box::pin(resources.run(stopped.clone())) as Task));
        }
        if let Some(worker) = self.worker {
            let run = async move { worker.run(stopped).await.map_err(|error| error.to_string()) };
            tasks.push((TaskName::Worker, Box::pin(run) as Task));
        }
        tasks
    }

    /// Runs the Job cache and the worker, supervised, until `shutdown` turns true or one of them fails.
    pub async fn run(self, shutdown: watch::Receiver<bool>) -> Result<()> {
        let worker_health = self.worker_health.clone();
        let (stop, stopped) = watch::channel(false);
        let mut shutdown = shutdown;
        let shutdown = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        supervise(self.tasks(stopped), stop, shutdown, &worker_health).await
    }
}

/// Opens the configured database, applying this release's missing migrations or checking for them.
async fn connect(settings: &DatabaseSettings, migrations: Migrations, statements: &StatementMetrics) -> Result<Store> {
    let url = settings.url.expose_secret();
    create_sqlite_folder(url)?;
    Store::connect_with(url, settings.max_connections, settings.acquire_timeout, migrations, statements)
        .await
        .map_err(|source| Error::Database { target: settings.describe(), source })
}

/// `provisioner migrate`: applies this release's missing migrations and returns; replicas started with
/// `APP_DATABASE_MIGRATE=false` then find them there.
pub async fn migrate(settings: &Settings) -> Result<()> {
    connect(&settings.database, Migrations::Apply, &StatementMetrics::default()).await.map(drop)
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
    pub api: ApiListener,
    pub metrics: TcpListener,
}

/// The API's listener: plain, or with TLS (`APP_TLS_CERT_FILE`).
pub enum ApiListener {
    Plain(TcpListener),
    Tls(TlsListener),
}

impl ApiListener {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            ApiListener::Plain(listener) => listener.local_addr(),
            ApiListener::Tls(listener) => axum::serve::Listener::local_addr(listener),
        }
    }
}

impl Listeners {
    pub async fn bind(settings: &Settings) -> Result<Self> {
        let bind = |address: SocketAddr| async move {
            TcpListener::bind(address).await.map_err(|source| Error::Bind { address, source })
        };
        let api = bind(settings.server.address).await?;
        let api = match &settings.server.tls {
            None => ApiListener::Plain(api),
            Some(files) => ApiListener::Tls(TlsListener::new(api, files.clone()).map_err(Error::Tls)?),
        };
        Ok(Listeners { api, metrics: bind(settings.server.metrics_address).await? })
    }
}

/// Serves `router` on `listener` until `stopped` turns true.
fn serving<L>(listener: L, router: Router, stopped: watch::Receiver<bool>) -> Task
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let told = stopped.clone();
    let serving = axum::serve(listener, router).with_graceful_shutdown(async move {
        let mut told = told;
        let _ = told.wait_for(|stop| *stop).await;
    });
    Box::pin(async move {
        serving.await.map_err(|error| error.to_string())?;
        // A server that returns before it was told to stop has stopped serving.
        if *stopped.borrow() { Ok(()) } else { Err("it stopped serving".to_owned()) }
    })
}

/// Serves the API and the metrics and runs the background work, all supervised together, until `shutdown`
/// completes or one of them ends; then drains in-flight requests and lets the worker release its operations.
/// Between the shutdown signal and the stop, `/readyz` answers 503 for [`App::shutdown_delay`].
pub async fn serve(app: App, listeners: Listeners, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
    let (draining, delay) = (app.draining.clone(), app.shutdown_delay);
    let shutdown = async move {
        shutdown.await;
        draining.start();
        if !delay.is_zero() {
            tracing::info!(delay = ?delay, "not ready any more; serving until the delay ends");
            tokio::time::sleep(delay).await;
        }
    };
    let (stop, stopped) = watch::channel(false);
    let worker_health = app.background.worker_health.clone();
    let api = match listeners.api {
        ApiListener::Plain(listener) => serving(listener, app.router, stopped.clone()),
        ApiListener::Tls(listener) => serving(listener, app.router, stopped.clone()),
    };
    let mut tasks = vec![
        (TaskName::ApiServer, api),
        (TaskName::MetricsServer, serving(listeners.metrics, app.metrics_router, stopped.clone())),
    ];
    tasks.extend(app.background.tasks(stopped.clone()));
    supervise(tasks, stop, shutdown, &worker_health).await
}

/// The configured source of credentials: auth-service (its OAuth client file read now), or the tenants' Secrets
/// read with the process's Kubernetes client.
fn credential_source(settings: &Settings, kube_client: Option<&kube::Client>) -> Result<Credentials> {
    Ok(match &settings.credentials {
        CredentialSource::AuthService => {
            Credentials::AuthService(AuthClient::new(&settings.auth, settings.auth.timeout)?)
        }
        CredentialSource::Secrets { platform_namespace } => Credentials::Secrets(SecretCredentials::new(
            kube_client.cloned(),
            platform_namespace.clone(),
            settings.auth.timeout,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_task_to_end_is_named_and_the_others_are_stopped() {
        let (stop, stopped) = watch::channel(false);
        let mut told = stopped.clone();
        let patient: Task = Box::pin(async move {
            let _ = told.wait_for(|stop| *stop).await;
            Ok(())
        });
        let failing: Task = Box::pin(async { panic!("injected") });
        let health = WorkerHealth::running(Duration::from_secs(60));
        let tasks = vec![(TaskName::JobCache, patient), (TaskName::MetricsServer, failing)];
        let result = supervise(tasks, stop, std::future::pending(), &health).await;
        match result {
            Err(Error::TaskEnded { task, reason }) => {
                assert_eq!(task, "metrics server");
                assert!(reason.contains("panicked"), "{reason}");
            }
            other => panic!("expected the metrics server to be named: {other:?}"),
        }
        assert!(*stopped.borrow(), "the other tasks were told to stop");
        // Only the worker's end makes /healthz report it.
        assert_eq!(health.status(), crate::telemetry::WorkerStatus::Running);
    }
}
