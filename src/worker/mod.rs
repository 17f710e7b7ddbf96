//! The background worker: claims queued operations from the store under a lease, runs each through the step
//! machine of [`crate::domain::run`], and records the stage after every step, so that a crash, a restart or a
//! second replica never loses an operation or runs one twice at the same time.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tracing::instrument;
use uuid::Uuid;

use crate::auth::{self, AuthClient};
use crate::backoff::Backoff;
use crate::domain::run::{JobState, RunNames, Stage};
use crate::domain::{LastError, Operation, OperationState, OperationType, Runtime};
use crate::executor::{self, Executor, run_labels};
use crate::render::{Renderer, RunAction};
use crate::store::{self, Lease, Progress, Store};
use crate::telemetry::Metrics;

/// How long one step's remote calls may take before the attempt counts as a transient failure.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a store call may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);
/// After this many claims an operation fails instead of being resumed again (a run that crashes its process
/// every time must not block its runtime forever).
const MAX_ATTEMPTS: i32 = 10;
/// Retries of a failing step start after about half a second and back off up to half a minute.
const RETRY_INITIAL: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Identifies this process in leases; unique per process.
    pub owner: String,
    /// Steps (calls to Kubernetes and auth-service) executed at once.
    pub concurrency: usize,
    /// Operations followed at once, including those only waiting for their Job (which take no step slot).
    pub max_runs: usize,
    pub lease: Duration,
    pub poll_interval: Duration,
    /// Resume operations left InProgress by a process whose lease expired.
    pub resume_in_progress: bool,
    pub provisioning_timeout: Duration,
    pub deprovisioning_timeout: Duration,
}

/// Claims and drives operations; what a run needs is shared by the worker's tasks through an `Arc`.
pub struct Worker {
    pub store: Store,
    pub executor: Executor,
    pub auth: AuthClient,
    pub renderer: Renderer,
    pub settings: WorkerSettings,
    pub metrics: Metrics,
    /// Signalled when this process queues an operation, so the worker need not wait for its next poll.
    pub wake: Arc<Notify>,
}

/// A failed step: transient ones are retried until the operation's deadline, permanent ones fail the run.
#[derive(Debug)]
struct StepError {
    transient: bool,
    error: LastError,
}

impl StepError {
    fn permanent(reason: &str, component: &str, message: impl Into<String>) -> Self {
        StepError { transient: false, error: last_error(reason, component, message) }
    }
}

impl From<executor::Error> for StepError {
    fn from(error: executor::Error) -> Self {
        StepError {
            transient: error.is_transient(),
            error: last_error("kubernetes_error", "kubernetes", error.to_string()),
        }
    }
}

impl From<auth::Error> for StepError {
    fn from(error: auth::Error) -> Self {
        let reason = match &error {
            auth::Error::NotFound { .. } => "credential_not_found",
            _ => "auth_service_error",
        };
        StepError { transient: error.is_transient(), error: last_error(reason, "auth-service", error.to_string()) }
    }
}

impl From<store::Error> for StepError {
    fn from(error: store::Error) -> Self {
        StepError { transient: true, error: last_error("database_error", "database", error.to_string()) }
    }
}

fn last_error(reason: &str, component: &str, message: impl Into<String>) -> LastError {
    LastError { err_message: message.into(), reason: reason.to_owned(), component: component.to_owned() }
}

/// What a successful step says about the run.
enum StepOutcome {
    Next,
    /// The run failed (the Job failed, the outputs are missing): clean up, then end Failed.
    Fail(LastError),
}

impl Worker {
    /// Claims and runs operations until `shutdown` turns true; in-flight runs then release their operations so
    /// the next process resumes them at once.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let context = Arc::new(self);
        let run_permits = Arc::new(Semaphore::new(context.settings.max_runs.max(1)));
        let steps = Arc::new(Semaphore::new(context.settings.concurrency.max(1)));
        let mut runs = JoinSet::new();
        tracing::info!(
            owner = %context.settings.owner,
            concurrency = context.settings.concurrency,
            max_runs = context.settings.max_runs,
            "worker started"
        );
        loop {
            while let Ok(permit) = run_permits.clone().try_acquire_owned() {
                let Some(operation) = context.claim().await else { break };
                let context = context.clone();
                let shutdown = shutdown.clone();
                let steps = steps.clone();
                runs.spawn(async move {
                    let _permit = permit;
                    context.run_operation(operation, &steps, shutdown).await;
                });
            }
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep(context.settings.poll_interval) => {}
                () = context.wake.notified() => {}
                Some(finished) = runs.join_next(), if !runs.is_empty() => {
                    // A panicking run keeps its lease until it expires; then it is resumed (and counted).
                    if let Err(error) = finished {
                        tracing::error!(%error, "a run panicked; its operation will be resumed after its lease expires");
                    }
                }
            }
        }
        while runs.join_next().await.is_some() {}
        tracing::info!("worker stopped");
    }

    fn lease(&self) -> Lease {
        Lease { owner: self.settings.owner.clone(), expires_at: store::now() + self.settings.lease }
    }

    async fn claim(&self) -> Option<Operation> {
        let lease = self.lease();
        let claim = self.store.claim_operation(&lease, store::now(), self.settings.resume_in_progress);
        match tokio::time::timeout(STORE_TIMEOUT, claim).await {
            Ok(Ok(operation)) => operation,
            Ok(Err(error)) => {
                tracing::warn!(%error, "could not claim an operation");
                None
            }
            Err(_) => {
                tracing::warn!("claiming an operation timed out");
                None
            }
        }
    }

    fn timeout_of(&self, operation_type: OperationType) -> Duration {
        match operation_type {
            OperationType::Provision => self.settings.provisioning_timeout,
            OperationType::Deprovision => self.settings.deprovisioning_timeout,
        }
    }

    /// Runs one claimed operation to its end, or until its lease is lost or the process shuts down.
    #[instrument(skip_all, fields(operation_id = %operation.id, runtime_id = %operation.runtime_id))]
    async fn run_operation(
        self: Arc<Self>,
        operation: Operation,
        steps: &Semaphore,
        mut shutdown: watch::Receiver<bool>,
    ) {
        self.metrics.run_started(operation.operation_type);
        // The watch guard is not Send: wait inside a block that drops it before returning.
        let shutting_down = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        // No task is spawned here: when this future is dropped (the process dies), everything stops with it.
        let finished = tokio::select! {
            finished = self.drive(&operation, steps) => finished,
            () = self.heartbeat(operation.id) => {
                tracing::warn!("lease lost: another worker owns this operation now; stopping");
                None
            }
            () = shutting_down => {
                if let Err(error) = self.store.release(operation.id, &self.settings.owner).await {
                    tracing::warn!(%error, "could not release the operation on shutdown; it resumes when its lease expires");
                }
                tracing::info!("shutting down: operation released for the next process");
                None
            }
        };
        self.metrics
            .run_ended(operation.operation_type, finished.as_ref().map(|(state, reason)| (*state, reason.as_str())));
    }

    /// Extends the lease every third of its length; returns when the lease is lost.
    async fn heartbeat(&self, operation_id: Uuid) {
        let mut ticker = tokio::time::interval(self.settings.lease / 3);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            match tokio::time::timeout(STORE_TIMEOUT, self.store.extend_lease(operation_id, &self.lease())).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return,
                // A slow or failing database: try again at the next tick, the lease still has two thirds left.
                Ok(Err(error)) => tracing::warn!(%error, "could not extend the lease"),
                Err(_) => tracing::warn!("extending the lease timed out"),
            }
        }
    }

    /// The step loop. Returns the end state and reason once the operation reached it; `None` when it stopped
    /// earlier (lease lost, store unreachable), leaving the operation to be resumed.
    async fn drive(&self, operation: &Operation, steps: &Semaphore) -> Option<(OperationState, String)> {
        let started = operation.started_at.unwrap_or(operation.created_at);
        let deadline = started + self.timeout_of(operation.operation_type);
        let names = RunNames::new(operation.operation_type, operation.runtime_id);
        let mut run = Run { operation, names, redact: Vec::new(), runtime: None };
        let mut failure = operation.last_error.clone();
        let mut stage = match Stage::parse(&operation.stage) {
            Some(Stage::Queued) | None => Stage::ResolveCredential,
            Some(stage) => stage,
        };
        if operation.attempts > MAX_ATTEMPTS && failure.is_none() {
            failure = Some(last_error(
                "attempts_exhausted",
                "provisioner",
                format!("the operation was started {MAX_ATTEMPTS} times without finishing"),
            ));
            stage = Stage::Cleanup;
        }

        loop {
            if failure.is_none() && stage < Stage::Cleanup && store::now() > deadline {
                failure = Some(timeout_error(operation.operation_type, self.timeout_of(operation.operation_type)));
                stage = Stage::Cleanup;
            }
            let progress = match (&failure, stage) {
                (None, Stage::Done) => Progress::Finished {
                    state: OperationState::Succeeded,
                    stage: stage.as_str().to_owned(),
                    message: stage.message(operation.operation_type).to_owned(),
                },
                (Some(error), Stage::Done) => Progress::Finished {
                    state: OperationState::Failed,
                    stage: stage.as_str().to_owned(),
                    message: error.err_message.clone(),
                },
                (Some(error), _) => Progress::Failing {
                    stage: stage.as_str().to_owned(),
                    message: format!("{} after a failure", stage.message(operation.operation_type)),
                    error: error.clone(),
                },
                (None, _) => Progress::Stage {
                    stage: stage.as_str().to_owned(),
                    message: stage.message(operation.operation_type).to_owned(),
                },
            };
            let finished = matches!(progress, Progress::Finished { .. });
            if !self.persist(operation, progress).await {
                return None;
            }
            if finished {
                let (state, reason) = match &failure {
                    None => (OperationState::Succeeded, "succeeded".to_owned()),
                    Some(error) => (OperationState::Failed, error.reason.clone()),
                };
                tracing::info!(?state, %reason, "operation finished");
                return Some((state, reason));
            }

            let step_started = std::time::Instant::now();
            // Waiting for a Job only reads the Job cache, so it takes no step slot: a process can follow many
            // long terraform runs while still starting new ones.
            let _step = match stage {
                Stage::WaitForJob => None,
                _ => Some(steps.acquire().await.expect("the step semaphore is never closed")),
            };
            let outcome = self.attempt_until(deadline, stage, &mut run).await;
            self.metrics.observe_step(stage.as_str(), step_started.elapsed());
            match outcome {
                Ok(StepOutcome::Next) => stage = stage.next(),
                Ok(StepOutcome::Fail(error)) | Err(StepError { error, .. }) if stage < Stage::Cleanup => {
                    tracing::warn!(stage = stage.as_str(), reason = %error.reason, "run failed");
                    failure.get_or_insert(error);
                    stage = Stage::Cleanup;
                }
                // Cleanup is best effort: the Secret is owned by the Job and goes with it anyway.
                Ok(StepOutcome::Fail(error)) | Err(StepError { error, .. }) => {
                    tracing::warn!(stage = stage.as_str(), error = %error.err_message, "cleanup failed");
                    stage = stage.next();
                }
            }
        }
    }

    /// Records progress, retrying briefly; false when the lease is lost or the store stays unreachable.
    async fn persist(&self, operation: &Operation, progress: Progress) -> bool {
        let mut backoff = Backoff::new(RETRY_INITIAL, RETRY_MAX);
        for _ in 0..5 {
            match tokio::time::timeout(
                STORE_TIMEOUT,
                self.store.record_progress(operation, &self.settings.owner, progress.clone()),
            )
            .await
            {
                Ok(Ok(owned)) => return owned,
                Ok(Err(error)) => tracing::warn!(%error, "could not record progress; retrying"),
                Err(_) => tracing::warn!("recording progress timed out; retrying"),
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
        // Stop without the lease's heartbeat: the operation resumes from its last recorded stage later.
        false
    }

    /// Runs a step, retrying transient failures with exponential backoff and jitter until the deadline.
    async fn attempt_until(
        &self,
        deadline: DateTime<Utc>,
        stage: Stage,
        run: &mut Run<'_>,
    ) -> Result<StepOutcome, StepError> {
        let mut backoff = Backoff::new(RETRY_INITIAL, RETRY_MAX);
        loop {
            let limit = if stage == Stage::WaitForJob { None } else { Some(STEP_TIMEOUT) };
            let result = match limit {
                Some(limit) => {
                    tokio::time::timeout(limit, self.step(stage, run, deadline)).await.unwrap_or_else(|_| {
                        Err(StepError {
                            transient: true,
                            error: last_error(
                                "step_timeout",
                                "provisioner",
                                format!("step {} took longer than {limit:?}", stage.as_str()),
                            ),
                        })
                    })
                }
                None => self.step(stage, run, deadline).await,
            };
            match result {
                Err(error) if error.transient => {
                    let delay = backoff.next_delay();
                    if store::now() + delay > deadline && stage < Stage::Cleanup {
                        return Err(StepError { transient: false, error: error.error });
                    }
                    if stage >= Stage::Cleanup && backoff.attempts() > 5 {
                        return Err(error);
                    }
                    tracing::info!(stage = stage.as_str(), error = %error.error.err_message, ?delay, "transient failure; retrying");
                    tokio::time::sleep(delay).await;
                }
                other => return other,
            }
        }
    }

    async fn step(&self, stage: Stage, run: &mut Run<'_>, deadline: DateTime<Utc>) -> Result<StepOutcome, StepError> {
        let operation = run.operation;
        let labels = run_labels(operation.runtime_id, operation.id);
        match stage {
            Stage::Queued | Stage::Done => Ok(StepOutcome::Next),
            Stage::ResolveCredential => {
                // Once per run: after a restart the Secret written earlier is reused. On the first claim no
                // earlier attempt can have written it, which saves a request per run.
                if operation.attempts > 1 && self.executor.credentials_exist(&run.names, operation.id).await? {
                    run.redact = self.executor.credential_values(&run.names).await?;
                    return Ok(StepOutcome::Next);
                }
                let runtime = run.runtime(&self.store).await?;
                let config = &runtime.cluster_config;
                let credential = self.auth.credential(&config.credential_id).await?;
                if credential.cloud() != config.topology.cloud() {
                    return Ok(StepOutcome::Fail(last_error(
                        "credential_mismatch",
                        "auth-service",
                        format!(
                            "credential {} is for {}, but topology {} needs {}",
                            config.credential_id,
                            credential.cloud().as_str(),
                            config.topology.as_str(),
                            config.topology.cloud().as_str()
                        ),
                    )));
                }
                run.redact = credential.secret_values();
                self.executor.ensure_credentials(&run.names, &labels, &credential.secret_files()).await?;
                Ok(StepOutcome::Next)
            }
            Stage::RenderConfig => {
                let action = match operation.operation_type {
                    OperationType::Provision => RunAction::Apply,
                    OperationType::Deprovision => RunAction::Destroy,
                };
                let runtime = run.runtime(&self.store).await?;
                let rendered = self
                    .renderer
                    .render(runtime, action)
                    .map_err(|error| StepError::permanent("render_failed", "renderer", error.to_string()))?;
                self.executor.ensure_config(&run.names, &labels, rendered.files).await?;
                Ok(StepOutcome::Next)
            }
            Stage::CreateJob => {
                let remaining = (deadline - store::now()).to_std().unwrap_or(Duration::from_secs(1));
                self.executor.ensure_job(operation.operation_type, &run.names, &labels, remaining).await?;
                Ok(StepOutcome::Next)
            }
            Stage::WaitForJob => {
                if run.redact.is_empty() {
                    run.redact = self.executor.credential_values(&run.names).await?;
                }
                let remaining = (deadline - store::now()).to_std().unwrap_or_default();
                match self.executor.wait_for_job(&run.names, operation.id, remaining, &run.redact).await? {
                    JobState::Succeeded => Ok(StepOutcome::Next),
                    JobState::Running => Ok(StepOutcome::Fail(timeout_error(
                        operation.operation_type,
                        self.timeout_of(operation.operation_type),
                    ))),
                    JobState::Missing => Ok(StepOutcome::Fail(last_error(
                        "job_missing",
                        "kubernetes",
                        format!("Job {} disappeared before it finished", run.names.job),
                    ))),
                    JobState::Failed { reason, message } => {
                        Ok(StepOutcome::Fail(last_error(&reason, "terraform-runner", message)))
                    }
                }
            }
            Stage::Finalize => match operation.operation_type {
                OperationType::Provision => match self.executor.kubeconfig(&run.names).await? {
                    Some(_) => Ok(StepOutcome::Next),
                    None => Ok(StepOutcome::Fail(last_error(
                        "missing_outputs",
                        "terraform-runner",
                        format!(
                            "the Job succeeded but Secret {} with the kubeconfig does not exist",
                            run.names.outputs_secret
                        ),
                    ))),
                },
                OperationType::Deprovision => {
                    self.executor.delete_secret(&run.names.outputs_secret).await?;
                    Ok(StepOutcome::Next)
                }
            },
            Stage::Cleanup => {
                self.executor.delete_secret(&run.names.credentials_secret).await?;
                Ok(StepOutcome::Next)
            }
        }
    }
}

fn timeout_error(operation_type: OperationType, timeout: Duration) -> LastError {
    let what = match operation_type {
        OperationType::Provision => "provisioning",
        OperationType::Deprovision => "deprovisioning",
    };
    last_error(
        "timeout",
        "provisioner",
        format!("{what} did not finish within {}", humantime::format_duration(timeout)),
    )
}

/// The state of one run while it is driven.
struct Run<'a> {
    operation: &'a Operation,
    names: RunNames,
    /// Credential values to keep out of failure messages.
    redact: Vec<String>,
    runtime: Option<Runtime>,
}

impl Run<'_> {
    async fn runtime(&mut self, store: &Store) -> Result<&Runtime, StepError> {
        if self.runtime.is_none() {
            let runtime = store.find_runtime(self.operation.runtime_id).await?.ok_or_else(|| {
                StepError::permanent(
                    "runtime_missing",
                    "database",
                    format!("runtime {} does not exist", self.operation.runtime_id),
                )
            })?;
            self.runtime = Some(runtime);
        }
        Ok(self.runtime.as_ref().expect("loaded above"))
    }
}
