//! What a run's steps do in the cluster, as a trait: the executor does it for real, and the steps' unit tests
//! give a recording fake instead, so each step is tested without a cluster (the real-cluster tests stay the
//! end-to-end layer).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use runner_contract::failure::Leftovers;
use runner_contract::report::RunReport;
use secrecy::SecretString;
use uuid::Uuid;

use crate::domain::RunAction;
use crate::domain::run::{JobState, RunNames};
use crate::executor::{self, Executor, FinalLogs, JobStop, ModulesSettings, RunRef};

type Result<T> = executor::Result<T>;

/// The run's objects (credentials Secret, configuration ConfigMap, runner identity, Job), its Job's state and outputs,
/// and its logs.
pub trait RunCluster: Send + Sync + 'static {
    /// Whether this operation's credentials Secret exists (written by an earlier claim of the run).
    fn credentials_exist(&self, names: &RunNames, operation_id: Uuid) -> impl Future<Output = Result<bool>> + Send;
    /// The values in the run's credentials Secret, to redact.
    fn credential_values(&self, names: &RunNames) -> impl Future<Output = Result<Vec<String>>> + Send;
    fn ensure_credentials(
        &self,
        run: RunRef<'_>,
        files: &BTreeMap<String, SecretString>,
    ) -> impl Future<Output = Result<()>> + Send;
    fn ensure_config(
        &self,
        run: RunRef<'_>,
        files: BTreeMap<String, String>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The Job of another operation on the runtime that is still running, by name.
    fn other_run_of_runtime(
        &self,
        runtime_id: Uuid,
        operation_id: Uuid,
    ) -> impl Future<Output = Result<Option<String>>> + Send;
    fn ensure_job(
        &self,
        modules: &ModulesSettings,
        action: RunAction,
        run: RunRef<'_>,
        active_deadline: Duration,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The Job's state once it ended, or `Running` when `timeout` passed first.
    fn wait_for_job(
        &self,
        names: &RunNames,
        operation_id: Uuid,
        timeout: Duration,
        redact: &[String],
    ) -> impl Future<Output = Result<JobState>> + Send;
    /// What the run's pod reported (its plan summary, the kubeconfig it published).
    fn run_report(&self, names: &RunNames) -> impl Future<Output = Result<Option<RunReport>>> + Send;
    /// What the run's pod reported when it found resources left in the cloud.
    fn leftovers(&self, names: &RunNames) -> impl Future<Output = Result<Option<Leftovers>>> + Send;
    /// The kubeconfig in the run's outputs Secret.
    fn kubeconfig(&self, names: &RunNames) -> impl Future<Output = Result<Option<String>>> + Send;
    fn delete_secret(&self, name: &str) -> impl Future<Output = Result<()>> + Send;
    /// Deletes the operation's runner identity (ServiceAccount, Role, RoleBinding) once its run has ended.
    fn delete_runner_identity(&self, names: &RunNames, operation_id: Uuid) -> impl Future<Output = Result<()>> + Send;
    /// The logs of the operation's newest pod, followed until its containers stop.
    fn open_final_logs(&self, operation_id: Uuid) -> impl Future<Output = Result<Option<FinalLogs>>> + Send;
    fn stop_job(
        &self,
        names: &RunNames,
        operation_id: Uuid,
        wait: Duration,
    ) -> impl Future<Output = Result<JobStop>> + Send;
}

impl RunCluster for Executor {
    async fn credentials_exist(&self, names: &RunNames, operation_id: Uuid) -> Result<bool> {
        Executor::credentials_exist(self, names, operation_id).await
    }

    async fn credential_values(&self, names: &RunNames) -> Result<Vec<String>> {
        Executor::credential_values(self, names).await
    }

    async fn ensure_credentials(&self, run: RunRef<'_>, files: &BTreeMap<String, SecretString>) -> Result<()> {
        Executor::ensure_credentials(self, run, files).await
    }

    async fn ensure_config(&self, run: RunRef<'_>, files: BTreeMap<String, String>) -> Result<()> {
        Executor::ensure_config(self, run, files).await
    }

    async fn other_run_of_runtime(&self, runtime_id: Uuid, operation_id: Uuid) -> Result<Option<String>> {
        Executor::other_run_of_runtime(self, runtime_id, operation_id).await
    }

    async fn ensure_job(
        &self,
        modules: &ModulesSettings,
        action: RunAction,
        run: RunRef<'_>,
        active_deadline: Duration,
    ) -> Result<()> {
        Executor::ensure_job(self, modules, action, run, active_deadline).await
    }

    async fn wait_for_job(
        &self,
        names: &RunNames,
        operation_id: Uuid,
        timeout: Duration,
        redact: &[String],
    ) -> Result<JobState> {
        Executor::wait_for_job(self, names, operation_id, timeout, redact).await
    }

    async fn run_report(&self, names: &RunNames) -> Result<Option<RunReport>> {
        Executor::run_report(self, names).await
    }

    async fn leftovers(&self, names: &RunNames) -> Result<Option<Leftovers>> {
        Executor::leftovers(self, names).await
    }

    async fn kubeconfig(&self, names: &RunNames) -> Result<Option<String>> {
        Executor::kubeconfig(self, names).await
    }

    async fn delete_secret(&self, name: &str) -> Result<()> {
        Executor::delete_secret(self, name).await
    }

    async fn delete_runner_identity(&self, names: &RunNames, operation_id: Uuid) -> Result<()> {
        Executor::delete_runner_identity(self, names, operation_id).await
    }

    async fn open_final_logs(&self, operation_id: Uuid) -> Result<Option<FinalLogs>> {
        Executor::open_final_logs(self, operation_id).await
    }

    async fn stop_job(&self, names: &RunNames, operation_id: Uuid, wait: Duration) -> Result<JobStop> {
        Executor::stop_job(self, names, operation_id, wait).await
    }
}
