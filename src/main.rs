#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]
use std::process::ExitCode;

use provisioner::settings::{self, Settings};
use provisioner::startup::{self, App, Listeners};
use provisioner::{build_info, install_crypto_provider, telemetry};

/// mimalloc rather than the C library's allocator: a read allocates and frees many small buffers on every thread,
/// where glibc's arenas took an eighth of the service's CPU (`perf` under `make bench`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let mut migrate_only = false;
    match arguments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => {}
        ["migrate"] => migrate_only = true,
        ["--version" | "-V"] => {
            println!("provisioner {} (commit {})", build_info::VERSION, build_info::COMMIT);
            return ExitCode::SUCCESS;
        }
        ["--help" | "-h"] => {
            print!("{}", settings::help());
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!(
                "provisioner: unexpected arguments {arguments:?}; it is configured by environment variables, see --help"
            );
            return ExitCode::from(2);
        }
    }
    let settings = match Settings::load() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("configuration error: {error}");
            return ExitCode::from(2);
        }
    };
    install_crypto_provider();
    let log = &settings.log;
    let traces = telemetry::init_tracing(&log.level, log.format, &log.traces, None);

    if migrate_only {
        let code = match startup::migrate(&settings).await {
            Ok(()) => {
                tracing::info!(database = %settings.database.describe(), "the database has this release's schema");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("provisioner migrate: {error}");
                ExitCode::FAILURE
            }
        };
        traces.shutdown().await;
        return code;
    }
    let result = async {
        let app = App::build(&settings).await?;
        let listeners = Listeners::bind(&settings).await?;
        let address = listeners.api.local_addr().map_err(startup::Error::Serve)?;
        tracing::info!(
            database = %settings.database.describe(),
            metrics = %settings.server.metrics_address,
            "GraphQL playground at {}://{address}{}",
            if settings.server.tls.is_some() { "https" } else { "http" },
            settings.http.playground_endpoint
        );
        startup::serve(app, listeners, shutdown_signal()).await
    }
    .await;
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "provisioner stopped");
            eprintln!("provisioner: {error}");
            ExitCode::FAILURE
        }
    };
    traces.shutdown().await;
    code
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
}
