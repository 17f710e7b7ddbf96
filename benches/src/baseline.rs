//! The baseline of the status reads: a bare axum handler doing what a REST status read does in the database (the
//! runtime, then its operation), in a process of its own as the server is, so that both pay the same for crossing
//! from the load's process to another (a handler in the load's own process would skip those switches).

use std::process::Stdio;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use provisioner::store::Store;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use uuid::Uuid;

use crate::Result;

/// The bench's own binary, run with this flag and a database URL, is the baseline server.
pub const SERVE_FLAG: &str = "--serve-baseline";

/// The baseline as a child process of the bench; killed when dropped.
pub struct BaselineServer {
    _child: tokio::process::Child,
    pub address: String,
    pub pid: u32,
}

impl BaselineServer {
    pub async fn start(database_url: &str) -> Result<Self> {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .arg(SERVE_FLAG)
            .arg(database_url)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().ok_or("the baseline exited at once")?;
        let stdout = child.stdout.take().ok_or("no standard output of the baseline")?;
        let mut lines = BufReader::new(stdout).lines();
        let address = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| "the baseline did not start within 30 s")??
            .ok_or("the baseline exited before it served")?;
        Ok(BaselineServer { _child: child, address, pid })
    }
}

/// Serves the baseline until killed, after printing its address.
pub async fn serve(database_url: &str) -> Result<()> {
    // As the server's default pool.
    let store = Store::connect(database_url, 10, Duration::from_secs(3)).await?;
    let router = router(store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}

/// The baseline's one route, `/runtimes/{id}`.
pub fn router(store: Store) -> axum::Router {
    axum::Router::new().route(PATH, get(status)).with_state(store)
}

/// Where the baseline answers a runtime's status, `{id}` its id.
pub const PATH: &str = "/runtimes/{id}";

async fn status(State(store): State<Store>, UrlPath(id): UrlPath<Uuid>) -> Response {
    let runtime = match store.find_runtime(id).await {
        Ok(Some(runtime)) => runtime,
        Ok(None) => return StatusCode::NOT_FOUND.into_response(),
        Err(error) => return (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    };
    let Some(operation_id) = runtime.last_operation_id else { return StatusCode::NOT_FOUND.into_response() };
    match store.find_operation(operation_id).await {
        Ok(Some(operation)) => Json(json!({
            "id": runtime.id,
            "name": runtime.name,
            "operationId": operation.id,
            "status": format!("{:?}", operation.state),
            "stage": operation.stage.as_str(),
            "message": operation.message,
        }))
        .into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response(),
    }
}
