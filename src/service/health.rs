//! What the probes and metrics ask of the service: the cluster and the database, and the operation counts.

use super::{Error, Result, Service};
use crate::domain::Component;
use crate::executor::Executor;
use crate::store::OperationCount;
use crate::telemetry::Dependency;

/// Whether the Kubernetes side can be reached, for `/healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorHealth {
    Ready,
    /// Configured, but the Job cache has not synced with the API server (yet).
    Syncing,
    /// The API server does not answer within [`HEALTH_BUDGET`].
    Unreachable,
    /// No cluster configured: the API works, operations wait in the queue.
    NotConfigured,
}

/// How long `/healthz` waits for each dependency.
pub const HEALTH_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

impl Service {
    pub(super) fn executor(&self) -> Result<&Executor> {
        self.executor.as_ref().ok_or_else(|| Error::Unavailable {
            component: Component::Kubernetes,
            message: "no Kubernetes cluster is configured (set KUBECONFIG; `make run` starts one on this machine)"
                .to_owned(),
        })
    }

    /// Also tells [`Dependency::Kubernetes`] whether the API server answered.
    pub async fn executor_health(&self) -> ExecutorHealth {
        match &self.executor {
            None => ExecutorHealth::NotConfigured,
            Some(executor) => {
                if !executor.api_server_reachable(HEALTH_BUDGET).await {
                    Dependency::Kubernetes.failed(&"the API server did not answer within 1s");
                    return ExecutorHealth::Unreachable;
                }
                Dependency::Kubernetes.answered();
                let ready =
                    tokio::time::timeout(std::time::Duration::from_millis(50), executor.wait_until_cache_ready()).await;
                if matches!(ready, Ok(true)) { ExecutorHealth::Ready } else { ExecutorHealth::Syncing }
            }
        }
    }

    /// Also tells [`Dependency::Database`] whether the ping succeeded: its log says once that the database went
    /// away, not once per probe.
    pub async fn database_health(&self) -> Result<()> {
        let unavailable =
            |message: &str| Error::Unavailable { component: Component::Database, message: message.to_owned() };
        match tokio::time::timeout(HEALTH_BUDGET, self.store.ping()).await {
            Ok(Ok(())) => {
                Dependency::Database.answered();
                Ok(())
            }
            Ok(Err(error)) => {
                Dependency::Database.failed(&format_args!("health check: {error}"));
                Err(unavailable("the ping failed"))
            }
            Err(_) => {
                Dependency::Database.failed(&"health check: no answer within 1s");
                Err(unavailable("no answer within 1s"))
            }
        }
    }

    pub async fn operation_counts(&self) -> Result<Vec<OperationCount>> {
        Ok(self.store.operation_counts().await?)
    }
}
