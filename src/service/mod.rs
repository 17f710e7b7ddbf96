//! Use cases of the provisioner. Both APIs (GraphQL and REST) call these functions and nothing below them, so
//! validation, conflicts and errors are the same whichever door a request comes through.

mod live_logs;
mod log_followers;
mod streams;
pub mod validation;
mod watch;

use std::sync::Arc;

use runner_contract::redact::Redactor;
use runner_contract::report::kubeconfig_digest;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tracing::instrument;

use crate::credentials::{self as auth, AuthClient};
pub use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::domain::run::{JobState, RunNames, Stage};
use crate::domain::run_log::{self, ContainerLog, KeptLog, LogBudget};
use crate::domain::tenant::Tenant;
use crate::domain::{
    ClusterConfig, Component, LastError, Operation, OperationPage, OperationState, OperationType, ProviderVersion,
    ProvisionRequest, Runtime, RuntimePage, StageEntry, UpgradeClusterInput,
};
use crate::executor::{self, Executor};
use crate::store::{self, Cancel, IdempotencyRecord, OperationCount, Store};
pub use validation::{Invalid, Rejected, upgrade_from_json};

/// Why a request conflicts with the state of a runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// Only one asynchronous operation per runtime at a time.
    OperationInProgress,
    NameTaken,
    /// The provisioning has not succeeded (yet), so there is no kubeconfig.
    NotReady,
    AlreadyDeprovisioned,
    /// No runner pod exists yet, so there are no logs.
    NoRunnerPod,
    /// A Job of an earlier operation on the runtime is still running: only one Terraform per runtime at a time.
    JobStillRunning,
    /// The runtime is the preview of a dry-run provisioning: there is no cluster to change.
    Preview,
    /// The runtime is hibernated: only a wake-up or a deprovisioning may change it.
    Hibernated,
    /// A wake-up of a runtime that is not hibernated.
    NotHibernated,
    /// A cancel of an operation that has already ended.
    AlreadyEnded,
    /// The outputs Secret does not hold the kubeconfig the runtime's last checked apply published.
    UntrustedOutputs,
}

impl Conflict {
    pub fn code(self) -> &'static str {
        match self {
            Conflict::OperationInProgress => "operation_in_progress",
            Conflict::NameTaken => "name_taken",
            Conflict::NotReady => "not_ready",
            Conflict::AlreadyDeprovisioned => "already_deprovisioned",
            Conflict::NoRunnerPod => "no_runner_pod",
            Conflict::JobStillRunning => "job_still_running",
            Conflict::Preview => "preview",
            Conflict::Hibernated => "hibernated",
            Conflict::NotHibernated => "not_hibernated",
            Conflict::AlreadyEnded => "already_ended",
            Conflict::UntrustedOutputs => "untrusted_outputs",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid {}: {}", .0.first.field, .0.first.message)]
    Invalid(Rejected),
    /// An upgrade whose every field already has the requested value.
    #[error("nothing to change: runtime {runtime_id} already has this configuration")]
    NothingToChange { runtime_id: String },
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("{message}")]
    Conflict { conflict: Conflict, message: String },
    #[error("the Idempotency-Key was already used for a different request")]
    IdempotencyKeyReused,
    /// A request that reads more logs than one request may (`APP_MAX_LOG_BYTES_PER_REQUEST`).
    #[error("{message}")]
    OverBudget { message: String },
    /// A new stream over the caps (`APP_MAX_STREAMS_PER_CALLER`, `APP_MAX_STREAMS`).
    #[error("{message}")]
    TooManyStreams { message: String },
    /// A dependency did not answer; `message` says what the caller can do (never an internal address).
    #[error("{component} is unavailable: {message}")]
    Unavailable { component: &'static str, message: String },
    #[error(transparent)]
    Store(store::Error),
}

impl From<store::Error> for Error {
    fn from(error: store::Error) -> Self {
        if error.is_unavailable() {
            // The detail (host, OS error) stays in the log, with the request's id from its span.
            tracing::warn!(%error, "the database is unavailable");
            return Error::Unavailable {
                component: "database",
                message: "it did not answer in time; nothing was changed, try again shortly".to_owned(),
            };
        }
        Error::Store(error)
    }
}

impl From<Invalid> for Error {
    fn from(invalid: Invalid) -> Self {
        Error::Invalid(invalid.into())
    }
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::Invalid(rejected)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The answer to an accepted provisioning request.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvisionAccepted {
    pub operation: Operation,
    /// True when an `Idempotency-Key` matched an earlier request and nothing new was recorded.
    pub replayed: bool,
}

/// A runtime with its last operation (every runtime has one: it is created with its provisioning).
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeStatus {
    pub runtime: Runtime,
    pub last_operation: Operation,
}

/// Whether a runtime sleeps, and whether a hibernation would be accepted now (Kyma's `HibernationStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HibernationStatus {
    pub hibernated: bool,
    pub hibernation_possible: bool,
}

/// Largest page of `runtimes`.
pub const MAX_PAGE_SIZE: i32 = 100;
/// `first` of a page when it is left out.
pub const DEFAULT_PAGE_SIZE: i32 = 20;

/// How long a request of a process that just started waits for the Job cache's first list.
const JOB_CACHE_SYNC: std::time::Duration = std::time::Duration::from_secs(5);

/// How long `/healthz` waits for each dependency.
pub const HEALTH_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

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

#[derive(Clone)]
pub struct Service {
    store: Store,
    policy: ValidationPolicy,
    auth: AuthClient,
    executor: Option<Executor>,
    /// Wakes this process's worker when an operation is queued.
    queued: Arc<Notify>,
    watches: watch::Watches,
    log_followers: log_followers::LogFollowers,
    /// How long an `Idempotency-Key` replays its first answer (`APP_IDEMPOTENCY_KEY_TTL`).
    idempotency_ttl: chrono::TimeDelta,
    /// How many bytes of logs one request may read (`APP_MAX_LOG_BYTES_PER_REQUEST`).
    log_bytes_per_request: usize,
    streams: streams::Streams,
    /// Open WebSockets, counted apart from the streams they carry, to the same limits.
    sockets: streams::Streams,
    /// The tenant this service acts for (see [`Service::for_tenant`]); `None` sees every runtime.
    tenant: Option<Tenant>,
}

/// The service's own settings.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    pub idempotency_key_ttl: std::time::Duration,
    pub log_bytes_per_request: usize,
    pub stream_limits: StreamLimits,
}

pub use streams::{StreamLimits, StreamSlot};
pub use watch::{OperationWatch, shown_part};

impl Service {
    pub fn new(
        store: Store,
        policy: ValidationPolicy,
        auth: AuthClient,
        executor: Option<Executor>,
        queued: Arc<Notify>,
        settings: ServiceSettings,
    ) -> Self {
        let idempotency_ttl =
            chrono::TimeDelta::from_std(settings.idempotency_key_ttl).unwrap_or(chrono::TimeDelta::MAX);
        Service {
            store,
            policy,
            auth,
            executor,
            queued,
            watches: watch::Watches::default(),
            log_followers: log_followers::LogFollowers::default(),
            idempotency_ttl,
            log_bytes_per_request: settings.log_bytes_per_request,
            streams: streams::Streams::new(settings.stream_limits),
            sockets: streams::Streams::new(settings.stream_limits),
            tenant: None,
        }
    }

    /// This service for a request that names `tenant`: it creates runtimes of that tenant and finds no other
    /// runtime and no operation of one (as not found, so that nothing tells another tenant's ids apart from
    /// unknown ones). Without a tenant, every runtime.
    pub fn for_tenant(&self, tenant: Option<Tenant>) -> Service {
        Service { tenant, ..self.clone() }
    }

    /// Whether `runtime` is one this service may see.
    fn sees(&self, runtime: &Runtime) -> bool {
        self.tenant.as_ref().is_none_or(|tenant| runtime.tenant.as_ref() == Some(tenant))
    }

    /// A place for one long-lived stream of `caller` (a followed log, a subscription), held until the slot is
    /// dropped; refused when the caller or everyone together holds as many as allowed.
    pub fn open_stream(&self, caller: &str) -> Result<StreamSlot> {
        self.streams.open(caller).map_err(|full| too_many("streams", caller, full))
    }

    /// A place for one open WebSocket of `caller`, to the same limits as streams.
    pub fn open_socket(&self, caller: &str) -> Result<StreamSlot> {
        self.sockets.open(caller).map_err(|full| too_many("WebSockets", caller, full))
    }

    /// A fresh budget for the logs one request reads.
    pub fn log_budget(&self) -> LogBudget {
        LogBudget::new(self.log_bytes_per_request)
    }

    /// Validates and records a new runtime with a queued provisioning operation. With an idempotency key, a
    /// repeated identical request returns the operation recorded the first time instead of a new one. A dry run
    /// records a preview runtime (its name stays free) whose operation only plans.
    #[instrument(skip_all, fields(runtime_name = %request.runtime_input.name))]
    pub async fn provision_runtime(
        &self,
        request: ProvisionRequest,
        idempotency_key: Option<&str>,
        dry_run: bool,
        requested_by: &str,
    ) -> Result<ProvisionAccepted> {
        self.policy.validate(&request)?;
        let fingerprint = request_fingerprint(&request, dry_run, self.tenant.as_ref());
        let not_before =
            store::now().checked_sub_signed(self.idempotency_ttl).unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
        if let Some(key) = idempotency_key {
            check_idempotency_key(key)?;
            if let Some(record) = self.store.find_idempotency_record(requested_by, key, not_before).await? {
                return self.replay(record, &fingerprint).await;
            }
            self.store.forget_expired_idempotency_record(requested_by, key, not_before).await?;
        }

        // Fail fast: nothing is recorded for a credential that does not exist or does not fit the topology.
        self.check_credential(&request.cluster_config).await?;

        let (mut runtime, mut operation) = Runtime::requested(request, dry_run, store::now());
        runtime.tenant = self.tenant.clone();
        operation.requested_by = Some(requested_by.to_owned());
        let runtime_id = runtime.id;
        let record = idempotency_key.map(|key| IdempotencyRecord {
            caller: requested_by.to_owned(),
            key: key.to_owned(),
            request_fingerprint: fingerprint.clone(),
            runtime_id,
            operation_id: operation.id,
        });
        match self.store.insert_runtime(&runtime, &operation, record.as_ref()).await {
            Ok(()) => {
                tracing::info!(runtime_id = %runtime_id, operation_id = %operation.id, dry_run, "provisioning queued");
                self.queued.notify_one();
                Ok(ProvisionAccepted { operation, replayed: false })
            }
            Err(store::Error::NameTaken) => Err(Error::Conflict {
                conflict: Conflict::NameTaken,
                message: format!("a runtime named {:?} already exists", runtime.name),
            }),
            // A concurrent request with the same key won the race: answer as it did.
            Err(store::Error::IdempotencyKeyTaken) => {
                let key = idempotency_key.unwrap_or_default();
                let record = self.store.find_idempotency_record(requested_by, key, not_before).await?;
                let record = record.ok_or(Error::IdempotencyKeyReused)?;
                self.replay(record, &fingerprint).await
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn check_credential(&self, config: &ClusterConfig) -> Result<()> {
        let field = "clusterConfig.credentialId";
        match self.auth.credential(&config.credential_id).await {
            Ok(credential) => {
                match config.topology.credential_mismatch(
                    &config.credential_id,
                    credential.kind().as_str(),
                    credential.cloud(),
                ) {
                    None => Ok(()),
                    Some(message) => Err(Invalid { field: field.into(), message }.into()),
                }
            }
            Err(auth::Error::NotFound { id }) => Err(Invalid {
                field: field.into(),
                message: format!("credential {id:?} does not exist in auth-service"),
            }
            .into()),
            Err(error @ auth::Error::InvalidCredential { .. }) => {
                Err(Invalid { field: field.into(), message: error.to_string() }.into())
            }
            Err(error) => {
                tracing::warn!(%error, "could not resolve the credential at request time");
                let what = match &error {
                    auth::Error::Unavailable { .. } => "no answer, or a server error".to_owned(),
                    other => other.public_message(),
                };
                Err(Error::Unavailable {
                    component: "auth-service",
                    message: format!(
                        "{what}; the credential could not be checked and nothing was recorded, try again shortly"
                    ),
                })
            }
        }
    }

    async fn replay(&self, record: IdempotencyRecord, fingerprint: &str) -> Result<ProvisionAccepted> {
        if record.request_fingerprint != fingerprint {
            return Err(Error::IdempotencyKeyReused);
        }
        let operation = self
            .store
            .find_operation(record.operation_id)
            .await?
            .ok_or_else(|| Error::NotFound { what: "operation", id: record.operation_id.to_string() })?;
        Ok(ProvisionAccepted { operation, replayed: true })
    }

    /// Queues the teardown of a runtime. Refused while another operation on it is active.
    #[instrument(skip_all, fields(runtime_id = %runtime_id))]
    pub async fn deprovision_runtime(&self, runtime_id: &str, requested_by: &str) -> Result<Operation> {
        let status = self.runtime_status(runtime_id).await?;
        self.check_changeable(&status).await?;
        // The provider that last wrote the cluster's state destroys it, whatever this release pins; a hibernated
        // cluster is destroyed as it is.
        self.queue_run(&status, OperationType::Deprovision, requested_by).await
    }

    /// Queues a change of a provisioned cluster: the configuration `upgrade` makes of the one last applied, checked
    /// as a provisioning is plus the upgrade's own rules. The runtime shows the new configuration only once the
    /// upgrade succeeded; a dry run only plans it.
    #[instrument(skip_all, fields(runtime_id = %runtime_id, dry_run))]
    pub async fn upgrade_cluster(
        &self,
        runtime_id: &str,
        upgrade: UpgradeClusterInput,
        dry_run: bool,
        requested_by: &str,
    ) -> Result<Operation> {
        let status = self.runtime_status(runtime_id).await?;
        let runtime = &status.runtime;
        // Validation first: a bad request is answered the same whatever the runtime is doing.
        let target = self
            .policy
            .validate_upgrade(&runtime.cluster_config, &upgrade)?
            .ok_or_else(|| Error::NothingToChange { runtime_id: runtime.id.to_string() })?;
        self.check_changeable(&status).await?;
        if runtime.hibernated {
            return Err(Error::Conflict {
                conflict: Conflict::Hibernated,
                message: format!("runtime {} is hibernated; wake it up before upgrading it", runtime.id),
            });
        }
        self.check_provisioned(runtime, "upgrade").await?;
        let provider = self.state_provider(&status.runtime).await?;
        let operation = Operation {
            target_config: Some(target),
            dry_run,
            requested_by: Some(requested_by.to_owned()),
            ..Operation::queued(status.runtime.id, OperationType::Upgrade, provider, store::now())
        };
        self.queue(runtime_id, operation).await
    }

    /// Queues the hibernation of a provisioned cluster: every worker pool scaled to zero (a vanilla control plane
    /// stopped too); the configuration keeps the sizes a wake-up restores.
    #[instrument(skip_all, fields(runtime_id = %runtime_id))]
    pub async fn hibernate_runtime(&self, runtime_id: &str, requested_by: &str) -> Result<Operation> {
        let status = self.runtime_status(runtime_id).await?;
        let runtime = &status.runtime;
        self.check_changeable(&status).await?;
        if runtime.hibernated {
            return Err(Error::Conflict {
                conflict: Conflict::Hibernated,
                message: format!("runtime {} is already hibernated", runtime.id),
            });
        }
        self.check_provisioned(runtime, "hibernate").await?;
        self.queue_run(&status, OperationType::Hibernate, requested_by).await
    }

    /// Queues the wake-up of a hibernated cluster: back at its configured sizes (a vanilla control plane started,
    /// and the run ends once its API server answers).
    #[instrument(skip_all, fields(runtime_id = %runtime_id))]
    pub async fn wake_up_runtime(&self, runtime_id: &str, requested_by: &str) -> Result<Operation> {
        let status = self.runtime_status(runtime_id).await?;
        self.check_changeable(&status).await?;
        if !status.runtime.hibernated {
            return Err(Error::Conflict {
                conflict: Conflict::NotHibernated,
                message: format!("runtime {} is not hibernated; there is nothing to wake up", status.runtime.id),
            });
        }
        self.queue_run(&status, OperationType::WakeUp, requested_by).await
    }

    /// Whether the runtime sleeps, and whether [`Service::hibernate_runtime`] would accept it now.
    pub async fn hibernation_status(&self, status: &RuntimeStatus) -> Result<HibernationStatus> {
        let runtime = &status.runtime;
        let operation = &status.last_operation;
        let changeable = runtime.deleted_at.is_none() && !runtime.preview && !operation.state.is_active();
        let hibernation_possible = changeable
            && !runtime.hibernated
            // A successful provisioning, upgrade or wake-up last: the cluster exists, no need to look further.
            && ((operation.state == OperationState::Succeeded && !operation.dry_run && operation.operation_type != OperationType::Deprovision)
                || self.store.was_provisioned(runtime.id).await?);
        Ok(HibernationStatus { hibernated: runtime.hibernated, hibernation_possible })
    }

    /// A change of a cluster needs a cluster: a provisioning of the runtime succeeded.
    async fn check_provisioned(&self, runtime: &Runtime, what: &str) -> Result<()> {
        if self.store.was_provisioned(runtime.id).await? {
            return Ok(());
        }
        Err(Error::Conflict {
            conflict: Conflict::NotReady,
            message: format!("runtime {} has no cluster to {what}: its provisioning has not succeeded", runtime.id),
        })
    }

    /// Queues a run of the runtime's own configuration with the provider that last wrote its state.
    async fn queue_run(
        &self,
        status: &RuntimeStatus,
        operation_type: OperationType,
        requested_by: &str,
    ) -> Result<Operation> {
        let provider = self.state_provider(&status.runtime).await?;
        let operation = Operation {
            requested_by: Some(requested_by.to_owned()),
            ..Operation::queued(status.runtime.id, operation_type, provider, store::now())
        };
        self.queue(&status.runtime.id.to_string(), operation).await
    }

    /// Whether a new operation may be queued on the runtime: live, not a preview, no active operation, and no
    /// Job of an earlier operation still running (a run that ended without stopping it): a second Terraform on
    /// the same state must not start beside it.
    async fn check_changeable(&self, status: &RuntimeStatus) -> Result<()> {
        let runtime = &status.runtime;
        if runtime.deleted_at.is_some() {
            return Err(Error::Conflict {
                conflict: Conflict::AlreadyDeprovisioned,
                message: format!("runtime {} is already deprovisioned", runtime.id),
            });
        }
        if runtime.preview {
            return Err(Error::Conflict {
                conflict: Conflict::Preview,
                message: format!(
                    "runtime {} is the preview of a dry run and has no cluster; provision it without dryRun",
                    runtime.id
                ),
            });
        }
        if status.last_operation.state.is_active() {
            return Err(operation_in_progress(&status.last_operation));
        }
        let running = match &self.executor {
            Some(executor) => {
                executor.cached_active_job_of_runtime(runtime.id, JOB_CACHE_SYNC).await.map_err(executor_error)?
            }
            None => None,
        };
        if let Some(job) = running {
            return Err(Error::Conflict {
                conflict: Conflict::JobStillRunning,
                message: format!(
                    "Job {job} of an earlier operation on runtime {} is still running; try again once it has ended",
                    runtime.id
                ),
            });
        }
        Ok(())
    }

    /// The provider version the runtime's state was last written with (a cluster keeps the provider that built
    /// it until a release moves it on deliberately).
    async fn state_provider(&self, runtime: &Runtime) -> Result<ProviderVersion> {
        Ok(match self.store.last_terraform_provider(runtime.id).await? {
            Some(provider) => provider,
            None => ProviderVersion::pinned(runtime.cluster_config.topology.cloud()),
        })
    }

    async fn queue(&self, runtime_id: &str, operation: Operation) -> Result<Operation> {
        match self.store.insert_operation(&operation).await {
            Ok(()) => {
                tracing::info!(
                    operation_id = %operation.id,
                    operation_type = operation.operation_type.as_str(),
                    dry_run = operation.dry_run,
                    "operation queued"
                );
                self.queued.notify_one();
                Ok(operation)
            }
            // Another request queued an operation since we read the status: report that one.
            Err(store::Error::ActiveOperationExists) => {
                Err(operation_in_progress(&self.runtime_status(runtime_id).await?.last_operation))
            }
            Err(store::Error::RuntimeNotFound(id)) => Err(Error::Conflict {
                conflict: Conflict::AlreadyDeprovisioned,
                message: format!("runtime {id} is already deprovisioned"),
            }),
            Err(error) => Err(error.into()),
        }
    }

    /// Cancels an operation for `requested_by`: a queued one ends at once, `Failed` with reason `cancelled`; a
    /// running one is stopped by the worker that runs it (its Job's pod gets its grace period, in which Terraform
    /// stops at a safe point and releases the state lock), then it ends the same way. 409 once it has ended.
    #[instrument(skip_all, fields(operation_id = %operation_id))]
    pub async fn cancel_operation(&self, operation_id: &str, requested_by: &str) -> Result<Operation> {
        let id = validation::parse_id("id", operation_id)?;
        if self.tenant.is_some() {
            self.operation_status(operation_id).await?;
        }
        match self.store.cancel_operation(id, requested_by).await? {
            Cancel::Ended | Cancel::Requested => self.operation_status(operation_id).await,
            Cancel::AlreadyEnded(state) => Err(Error::Conflict {
                conflict: Conflict::AlreadyEnded,
                message: format!(
                    "operation {id} has already ended ({state}); only a queued or running one can be cancelled"
                ),
            }),
            Cancel::NotFound => Err(Error::NotFound { what: "operation", id: id.to_string() }),
        }
    }

    pub async fn operation_status(&self, operation_id: &str) -> Result<Operation> {
        let id = validation::parse_id("id", operation_id)?;
        let not_found = || Error::NotFound { what: "operation", id: id.to_string() };
        let operation = self.store.find_operation(id).await?.ok_or_else(not_found)?;
        if self.tenant.is_some() {
            let runtime = self.store.find_runtime(operation.runtime_id).await?;
            runtime.filter(|runtime| self.sees(runtime)).ok_or_else(not_found)?;
        }
        Ok(self.with_live_job_state(operation))
    }

    /// An active operation as its Job shows it right now (from the watch-backed cache, no API request): a Job
    /// that failed a second ago reads as failed before the worker has handled it.
    fn with_live_job_state(&self, mut operation: Operation) -> Operation {
        let Some(executor) = &self.executor else { return operation };
        if !operation.state.is_active() {
            return operation;
        }
        let names = RunNames::new(operation.operation_type, operation.runtime_id);
        match executor.cached_job_state(&names, operation.id) {
            JobState::Failed { reason, message } => {
                operation.state = OperationState::Failed;
                operation.message = message.clone();
                operation.last_error = Some(LastError::new(reason, Component::TerraformRunner, message));
            }
            JobState::Succeeded if operation.stage == Stage::WaitForJob => {
                operation.message = format!("Job {} completed; finishing the operation", names.job);
            }
            JobState::Succeeded | JobState::Running | JobState::Missing => {}
        }
        operation
    }

    pub async fn runtime_status(&self, runtime_id: &str) -> Result<RuntimeStatus> {
        let id = validation::parse_id("id", runtime_id)?;
        let not_found = || Error::NotFound { what: "runtime", id: id.to_string() };
        let runtime = self.store.find_runtime(id).await?.filter(|runtime| self.sees(runtime)).ok_or_else(not_found)?;
        let operation_id = runtime.last_operation_id.ok_or_else(not_found)?;
        let last_operation = self.store.find_operation(operation_id).await?.ok_or_else(not_found)?;
        Ok(RuntimeStatus { runtime, last_operation: self.with_live_job_state(last_operation) })
    }

    /// The kubeconfig of a live runtime whose provisioning succeeded (also while it is being upgraded); 409
    /// before then and once it is deprovisioned.
    pub async fn kubeconfig(&self, runtime_id: &str) -> Result<String> {
        let status = self.runtime_status(runtime_id).await?;
        let operation = &status.last_operation;
        let live = status.runtime.deleted_at.is_none() && !status.runtime.preview;
        let deprovisioning = operation.operation_type == OperationType::Deprovision && operation.state.is_active();
        if !live || deprovisioning || !self.store.was_provisioned(status.runtime.id).await? {
            return Err(Error::Conflict {
                conflict: Conflict::NotReady,
                message: format!(
                    "no kubeconfig: runtime {} has no provisioned cluster (its last operation is {} {})",
                    status.runtime.id, operation.operation_type, operation.state
                ),
            });
        }
        let names = RunNames::new(OperationType::Provision, status.runtime.id);
        match self.executor()?.kubeconfig(&names).await {
            Ok(Some(kubeconfig)) => self.checked(status.runtime.id, &names.outputs_secret, kubeconfig).await,
            Ok(None) => Err(Error::Conflict {
                conflict: Conflict::NotReady,
                message: format!("Secret {} with the kubeconfig does not exist", names.outputs_secret),
            }),
            Err(error) => Err(executor_error(error)),
        }
    }

    /// `kubeconfig` when it is exactly what the runtime's last checked apply published: any runner may write any
    /// outputs Secret, so other content is refused, never served.
    async fn checked(&self, runtime_id: uuid::Uuid, secret: &str, kubeconfig: String) -> Result<String> {
        let checked = self.store.checked_kubeconfig_digest(runtime_id).await?;
        if checked.as_deref() == Some(kubeconfig_digest(kubeconfig.as_bytes()).as_str()) {
            return Ok(kubeconfig);
        }
        tracing::warn!(%runtime_id, secret, "an outputs Secret does not hold the kubeconfig its runtime's last apply published; it is not served");
        Err(Error::Conflict {
            conflict: Conflict::UntrustedOutputs,
            message: format!(
                "Secret {secret} does not hold the kubeconfig the runtime's last apply published; it is not served \
                 (an update of the runtime publishes it again)"
            ),
        })
    }

    /// The runner logs of a runtime's operation: its last one, or `operation_id`, which must be one of its own.
    pub async fn logs(
        &self,
        runtime_id: &str,
        operation_id: Option<&str>,
        tail_lines: Option<i64>,
        budget: &LogBudget,
    ) -> Result<Vec<ContainerLog>> {
        let status = self.runtime_status(runtime_id).await?;
        let operation = match operation_id {
            None => status.last_operation,
            Some(operation_id) => {
                let id = validation::parse_id("operationId", operation_id)?;
                let operation = self.store.find_operation(id).await?;
                operation
                    .filter(|operation| operation.runtime_id == status.runtime.id)
                    .ok_or_else(|| Error::NotFound { what: "operation of this runtime", id: id.to_string() })?
            }
        };
        self.logs_of(&operation, tail_lines, budget).await
    }

    /// The runner logs of an operation (the last `tail_lines` of each container): kept in the database once its
    /// run ended, read from its pod while it runs; 409 while it has no pod, and for a run that kept none.
    pub async fn operation_logs(
        &self,
        operation_id: &str,
        tail_lines: Option<i64>,
        budget: &LogBudget,
    ) -> Result<Vec<ContainerLog>> {
        let operation = self.operation_status(operation_id).await?;
        self.logs_of(&operation, tail_lines, budget).await
    }

    /// The runner's log of an operation as it prints it, until its container ends (see
    /// `Executor::follow_runner_log`), read once for all who follow it; once the run ended, its kept log at once.
    pub async fn follow_operation_log(
        &self,
        operation_id: &str,
    ) -> Result<futures::stream::BoxStream<'static, Result<String>>> {
        use futures::StreamExt as _;
        let operation = self.operation_status(operation_id).await?;
        if let Some(kept) = self.kept_logs(&operation, &self.log_budget()).await? {
            let runner = kept.into_iter().find(|log| log.container == executor::RUNNER_CONTAINER);
            return Ok(futures::stream::iter(runner.map(|log| Ok(log.text))).boxed());
        }
        if let Some(refusal) = before_its_job(&operation) {
            return Err(refusal);
        }
        let start = async || {
            let redactor = self.run_redactor(&operation).await?;
            let lines = self.executor()?.follow_runner_log(operation.id, operation.state.is_active());
            Ok(live_logs::redact_stream(lines.map(|line| line.map_err(executor_error)).boxed(), redactor))
        };
        self.log_followers.follow(operation.id, start).await
    }

    async fn logs_of(
        &self,
        operation: &Operation,
        tail_lines: Option<i64>,
        budget: &LogBudget,
    ) -> Result<Vec<ContainerLog>> {
        let lines = match tail_lines {
            None => None,
            Some(lines) => Some(
                usize::try_from(lines)
                    .ok()
                    .filter(|lines| *lines >= 1)
                    .ok_or_else(|| Invalid { field: "tailLines".into(), message: "must be at least 1".into() })?,
            ),
        };
        if let Some(kept) = self.kept_logs(operation, budget).await? {
            return Ok(kept
                .into_iter()
                .map(|log| ContainerLog {
                    log: run_log::tail_lines(&log.text, lines).to_owned(),
                    container: log.container,
                })
                .collect());
        }
        if let Some(refusal) = before_its_job(operation) {
            return Err(refusal);
        }
        let no_pod = |why: String| Error::Conflict { conflict: Conflict::NoRunnerPod, message: why };
        let redactor = self.run_redactor(operation).await?;
        match self.executor()?.logs(operation.id, tail_lines).await {
            Ok(logs) => {
                let bytes = logs.iter().map(|log| log.log.len()).sum();
                if !budget.spend(bytes) {
                    return Err(over_budget(budget));
                }
                Ok(live_logs::redact_logs(logs, &redactor))
            }
            Err(executor::Error::NoPod(_)) if !operation.state.is_active() => Err(no_pod(format!(
                "operation {} ended ({}) without a runner pod or kept logs",
                operation.id, operation.state
            ))),
            Err(executor::Error::NoPod(_)) => Err(no_pod(format!(
                "no runner pod exists for operation {} (stage {})",
                operation.id,
                operation.stage.as_str()
            ))),
            Err(error) => Err(executor_error(error)),
        }
    }

    /// The kept logs of an operation, taken from `budget`.
    async fn kept_logs(&self, operation: &Operation, budget: &LogBudget) -> Result<Option<Vec<KeptLog>>> {
        match self.store.run_logs(operation.id, budget).await {
            Ok(kept) => Ok(kept),
            Err(store::Error::OverBudget { .. }) => Err(over_budget(budget)),
            Err(error) => Err(error.into()),
        }
    }

    /// The credential values of a running operation's run, to redact its live logs with.
    async fn run_redactor(&self, operation: &Operation) -> Result<Redactor> {
        let names = RunNames::new(operation.operation_type, operation.runtime_id);
        let values = self.executor()?.credential_values(&names).await.map_err(executor_error)?;
        Ok(Redactor::new(values))
    }

    fn executor(&self) -> Result<&Executor> {
        self.executor.as_ref().ok_or_else(|| Error::Unavailable {
            component: "kubernetes",
            message: "no Kubernetes cluster is configured (set KUBECONFIG; `make run` starts one on this machine)"
                .to_owned(),
        })
    }

    pub async fn executor_health(&self) -> ExecutorHealth {
        match &self.executor {
            None => ExecutorHealth::NotConfigured,
            Some(executor) => {
                if !executor.api_server_reachable(HEALTH_BUDGET).await {
                    return ExecutorHealth::Unreachable;
                }
                let ready =
                    tokio::time::timeout(std::time::Duration::from_millis(50), executor.wait_until_cache_ready()).await;
                if matches!(ready, Ok(true)) { ExecutorHealth::Ready } else { ExecutorHealth::Syncing }
            }
        }
    }

    /// One page of runtimes in creation order, optionally only those whose last operation is in `state` and
    /// those with the label `key=value`.
    pub async fn runtimes(
        &self,
        state: Option<OperationState>,
        label: Option<&str>,
        after: Option<&str>,
        first: Option<i32>,
    ) -> Result<RuntimePage> {
        let first = page_size(first)?;
        let label = label.map(|filter| validation::parse_label_filter("label", filter)).transpose()?;
        let after = after.map(|cursor| validation::parse_id("after", cursor)).transpose()?;
        let label = label.as_ref().map(|(key, value)| (key.as_str(), value.as_str()));
        Ok(self.store.list_runtimes(self.tenant.as_ref(), state, label, after, first).await?)
    }

    /// One page of a runtime's operations, newest first; `after` is the cursor (id) of the last operation of the
    /// previous page.
    pub async fn runtime_operations(
        &self,
        runtime_id: &str,
        after: Option<&str>,
        first: Option<i32>,
    ) -> Result<OperationPage> {
        let first = page_size(first)?;
        let id = validation::parse_id("id", runtime_id)?;
        let after = after.map(|cursor| validation::parse_id("after", cursor)).transpose()?;
        if !self.store.find_runtime(id).await?.is_some_and(|runtime| self.sees(&runtime)) {
            return Err(Error::NotFound { what: "runtime", id: id.to_string() });
        }
        let mut page = self.store.list_operations(id, after, first).await?;
        page.operations = page.operations.into_iter().map(|operation| self.with_live_job_state(operation)).collect();
        Ok(page)
    }

    /// When the operation entered each of its stages.
    pub async fn operation_stages(&self, operation_id: uuid::Uuid) -> Result<Vec<StageEntry>> {
        Ok(self.store.stages_of(operation_id).await?)
    }

    pub async fn database_health(&self) -> Result<()> {
        let unavailable = |message: &str| Error::Unavailable { component: "database", message: message.to_owned() };
        match tokio::time::timeout(HEALTH_BUDGET, self.store.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => {
                tracing::warn!(%error, "health check: the database is unavailable");
                Err(unavailable("the ping failed"))
            }
            Err(_) => Err(unavailable("no answer within 1s")),
        }
    }

    pub async fn operation_counts(&self) -> Result<Vec<OperationCount>> {
        Ok(self.store.operation_counts().await?)
    }
}

/// How long an operation ran: from its first start to its end, or to now while it runs.
/// Before the Job is created there is no pod to ask for logs: the 409 that says so.
fn before_its_job(operation: &Operation) -> Option<Error> {
    (operation.stage < Stage::CreateJob).then(|| Error::Conflict {
        conflict: Conflict::NoRunnerPod,
        message: format!(
            "no runner pod exists yet: operation {} is at stage {}",
            operation.id,
            operation.stage.as_str()
        ),
    })
}

pub fn duration_seconds(operation: &Operation) -> Option<f64> {
    let started = operation.started_at?;
    let ended = operation.finished_at.filter(|_| !operation.state.is_active()).unwrap_or_else(store::now);
    Some((ended - started).num_milliseconds().max(0) as f64 / 1000.0)
}

/// `first` of a page: [`DEFAULT_PAGE_SIZE`] when left out, at most [`MAX_PAGE_SIZE`].
fn page_size(first: Option<i32>) -> Result<u64> {
    let first = first.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&first) {
        return Err(Invalid { field: "first".into(), message: format!("must be 1 to {MAX_PAGE_SIZE}") }.into());
    }
    Ok(first as u64)
}

fn executor_error(error: executor::Error) -> Error {
    tracing::warn!(%error, "Kubernetes request failed");
    Error::Unavailable { component: "kubernetes", message: format!("{}; try again shortly", error.public_message()) }
}

fn operation_in_progress(operation: &Operation) -> Error {
    Error::Conflict {
        conflict: Conflict::OperationInProgress,
        message: format!(
            "runtime {} already has an active {:?} operation {} ({:?}); only one operation per runtime runs at a time",
            operation.runtime_id, operation.operation_type, operation.id, operation.state
        ),
    }
}

fn too_many(what: &str, caller: &str, full: streams::Full) -> Error {
    let message = match full {
        streams::Full::Caller(limit) => {
            format!("{caller} already holds {limit} open {what} (APP_MAX_STREAMS_PER_CALLER); close one first")
        }
        streams::Full::Total(limit) => format!("the service holds {limit} open {what} (APP_MAX_STREAMS); retry later"),
    };
    Error::TooManyStreams { message }
}

fn over_budget(budget: &LogBudget) -> Error {
    Error::OverBudget {
        message: format!(
            "the logs asked for are longer than the {} bytes one request may read; ask for fewer (or a tail)",
            budget.total()
        ),
    }
}

fn check_idempotency_key(key: &str) -> Result<(), Invalid> {
    let valid = !key.is_empty() && key.len() <= 255 && key.bytes().all(|byte| byte.is_ascii_graphic());
    if !valid {
        return Err(Invalid {
            field: "Idempotency-Key".into(),
            message: "must be 1 to 255 visible ASCII characters".into(),
        });
    }
    Ok(())
}

/// A digest of the validated request, to tell a retry from a different request under the same key (a dry run
/// and a real provisioning of the same request are different requests).
fn request_fingerprint(request: &ProvisionRequest, dry_run: bool, tenant: Option<&Tenant>) -> String {
    // A request's digest without a dry run or a tenant is what it was before those existed, so recorded keys keep
    // matching; the same key sent for another tenant is another request.
    let canonical = match (dry_run, tenant) {
        (false, None) => serde_json::to_vec(request),
        (true, None) => serde_json::to_vec(&(request, dry_run)),
        (_, Some(tenant)) => serde_json::to_vec(&(request, dry_run, tenant.as_str())),
    };
    let canonical = canonical.unwrap_or_default();
    Sha256::digest(canonical).iter().map(|byte| format!("{byte:02x}")).collect()
}
