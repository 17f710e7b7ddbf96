//! Builds the application from settings and runs its two servers (API and metrics) until shutdown.

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;

use crate::api::{self, HttpSettings};
use crate::service::Service;
use crate::settings::Settings;
use crate::store::{self, Store};
use crate::telemetry::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open the database ({target}): {source}")]
    Database {
        target: String,
        source: store::Error,
    },
    #[error("cannot prepare the SQLite folder {path}: {source}")]
    SqliteFolder {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("server failed: {0}")]
    Serve(std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The wired application: one service behind the API router and the metrics router.
#[derive(Clone)]
pub struct App {
    pub service: Service,
    pub router: Router,
    pub metrics_router: Router,
}

impl App {
    pub async fn build(settings: &Settings) -> Result<Self> {
        let database_url = settings.database.url.expose_secret();
        create_sqlite_folder(database_url)?;
        let store = Store::connect(database_url, settings.database.max_connections)
            .await
            .map_err(|source| Error::Database {
                target: settings.database.describe(),
                source,
            })?;
        let service = Service::new(store, settings.validation.clone());
        let metrics = Metrics::new();
        let http = HttpSettings {
            api_endpoint: settings.server.api_endpoint.clone(),
            playground_endpoint: settings.server.playground_endpoint.clone(),
            max_body_bytes: settings.server.max_request_body_bytes,
        };
        Ok(App {
            router: api::router(service.clone(), &http, metrics.clone()),
            metrics_router: api::metrics_router(service.clone(), metrics),
            service,
        })
    }
}

/// The embedded default is a file under `./data`; create its folder on first run.
fn create_sqlite_folder(database_url: &str) -> Result<()> {
    let Some(path) = database_url.strip_prefix("sqlite://") else {
        return Ok(());
    };
    let path = path.split('?').next().unwrap_or_default();
    match std::path::Path::new(path)
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        Some(folder) => std::fs::create_dir_all(folder).map_err(|source| Error::SqliteFolder {
            path: folder.display().to_string(),
            source,
        }),
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
            TcpListener::bind(address)
                .await
                .map_err(|source| Error::Bind { address, source })
        };
        Ok(Listeners {
            api: bind(settings.server.address).await?,
            metrics: bind(settings.server.metrics_address).await?,
        })
    }
}

/// Serves the API and the metrics until `shutdown` completes, then drains in-flight requests.
pub async fn serve(
    app: App,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let wait_for_stop = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|stopped| *stopped).await;
        }
    };
    let api = axum::serve(listeners.api, app.router).with_graceful_shutdown(wait_for_stop());
    let metrics =
        axum::serve(listeners.metrics, app.metrics_router).with_graceful_shutdown(wait_for_stop());
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let (api_result, metrics_result) = tokio::join!(api.into_future(), metrics.into_future());
    api_result.and(metrics_result).map_err(Error::Serve)
}
