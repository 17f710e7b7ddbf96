//! The background worker: claims queued operations from the store under a lease, runs each through the step
//! machine of [`crate::domain::run`], and records the stage after every step, so that a crash, a restart or a
//! second replica never loses an operation or runs one twice at the same time.

mod outputs;
mod retention;

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use runner_contract::redact::Redactor;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::instrument;
use uuid::Uuid;

use crate::backoff::Backoff;
use crate::credentials::{self as auth, AuthClient};
use crate::domain::run::{AfterStep, JobState, Record, RunNames, RunState, Stage};
use crate::domain::run_log;
use crate::domain::{
    Component, FailureReason, LastError, OperationState, OperationType, ProviderVersion, RunAction, Runtime,
};
use crate::executor::{self, Executor, JobStop, ModulesSettings, RUNNER_GRACE_PERIOD, run_labels};
use crate::render::Renderer;
use crate::store::{self, Claim, Progress, Store};
use crate::telemetry::{Metrics, WorkerHealth};
pub use retention::Retention;

/// How long one step's remote calls may take before the attempt counts as a transient failure.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a store call may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);
/// After this many attempts an operation fails instead of being resumed again: a step that crashes its process
/// every time must not block its runtime forever. Restarts do not count (see `Store::claim_operation`).
const MAX_ATTEMPTS: i32 = 10;
/// How much longer than the operation's remaining time its Job may run.
const JOB_DEADLINE_MARGIN: Duration = Duration::from_secs(30);
/// How long past the runner's grace period a stopped Job's pods may take to go away.
const STOP_MARGIN: Duration = Duration::from_secs(60);
/// How often a running operation looks whether a caller cancelled it (any process may record the request).
const CANCEL_POLL: Duration = Duration::from_secs(2);
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
    pub upgrade_timeout: Duration,
    /// Of a hibernation or a wake-up.
    pub hibernation_timeout: Duration,
    /// What is kept of a run's logs, both containers together.
    pub run_log_max_bytes: usize,
}

/// Claims and drives operations; what a run needs is shared by the worker's tasks through an `Arc`.
pub struct Worker {
    pub store: Store,
    pub executor: Executor,
    pub auth: AuthClient,
    pub renderer: Renderer,
    pub settings: WorkerSettings,
    /// The pinned modules every Job's init container fetches.
    pub modules: ModulesSettings,
    pub metrics: Metrics,
    /// Signalled when this process queues an operation, so the worker need not wait for its next poll.
    pub wake: Arc<Notify>,
    /// Ticked on every turn of the loop, for `/healthz`.
    pub health: WorkerHealth,
}

/// Why the worker stopped before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database holds an operation this version cannot read (an unknown state, type or stage): stop loudly
    /// rather than skip it or run it wrongly.
    #[error("cannot read a claimed operation: {0}")]
    Unreadable(store::Error),
}

/// A failed step: transient ones are retried until the operation's deadline, permanent ones fail the run.
/// `error` is what the operation's status shows; `detail` (which may name internal addresses) goes to the log only.
#[derive(Debug)]
struct StepError {
    transient: bool,
    error: LastError,
    detail: String,
}

impl StepError {
    fn permanent(reason: FailureReason, component: Component, message: impl Into<String>) -> Self {
        let error = LastError::new(reason, component, message);
        StepError { transient: false, detail: error.err_message.clone(), error }
    }
}

impl From<executor::Error> for StepError {
    fn from(error: executor::Error) -> Self {
        StepError {
            transient: error.is_transient(),
            error: LastError::new(FailureReason::KubernetesError, Component::Kubernetes, error.public_message()),
            detail: error.to_string(),
        }
    }
}

impl From<auth::Error> for StepError {
    fn from(error: auth::Error) -> Self {
        let reason = match &error {
            auth::Error::NotFound { .. } => FailureReason::CredentialNotFound,
            auth::Error::InvalidCredential { .. } => FailureReason::InvalidCredential,
            _ => FailureReason::AuthServiceError,
        };
        StepError {
            transient: error.is_transient(),
            error: LastError::new(reason, Component::AuthService, error.public_message()),
            detail: error.to_string(),
        }
    }
}

impl From<store::Error> for StepError {
    fn from(error: store::Error) -> Self {
        StepError {
            transient: true,
            error: LastError::new(FailureReason::DatabaseError, Component::Database, "the database is unavailable"),
            detail: error.to_string(),
        }
    }
}

/// What a successful step says about the run.
enum StepOutcome {
    Next,
    /// The run failed (the Job failed, the outputs are missing): clean up, then end Failed.
    Fail(LastError),
}

/// How recording progress ended.
enum Recorded {
    Yes,
    /// The claim is no longer current (or the heartbeat could not renew it in time): stop at once.
    LeaseLost,
    /// The store stayed unreachable: stop; the operation resumes from its last recorded stage later.
    Unreachable,
}

/// The operations this process runs now, so that it never claims one of them a second time (after an outage let
/// their leases expire); an entry leaves when its run's future ends, however it ends.
#[derive(Default)]
struct Following(std::sync::Mutex<HashSet<Uuid>>);

impl Following {
    fn ids(&self) -> Vec<Uuid> {
        self.0.lock().expect("never poisoned: no code panics while holding it").iter().copied().collect()
    }

    fn follow(self: &Arc<Self>, id: Uuid) -> Followed {
        self.0.lock().expect("never poisoned: no code panics while holding it").insert(id);
        Followed { following: self.clone(), id }
    }
}

struct Followed {
    following: Arc<Following>,
    id: Uuid,
}

impl Drop for Followed {
    fn drop(&mut self) {
        if let Ok(mut ids) = self.following.0.lock() {
            ids.remove(&self.id);
        }
    }
}

impl Worker {
    /// Claims and runs operations until `shutdown` turns true; in-flight runs then release their operations so
    /// the next process resumes them at once. Ends early only when a claimed operation cannot be read.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> Result<(), Error> {
        let context = Arc::new(self);
        let run_permits = Arc::new(Semaphore::new(context.settings.max_runs.max(1)));
        let steps = Arc::new(Semaphore::new(context.settings.concurrency.max(1)));
        let following = Arc::new(Following::default());
        // The runs stop (and release their claims) on the process's shutdown and when the worker fails.
        let (stop_runs, runs_stop) = watch::channel(false);
        let mut runs = JoinSet::new();
        tracing::info!(
            owner = %context.settings.owner,
            concurrency = context.settings.concurrency,
            max_runs = context.settings.max_runs,
            "worker started"
        );
        let result = 'poll: loop {
            context.health.tick();
            while let Ok(permit) = run_permits.clone().try_acquire_owned() {
                let (claim, lease_valid_until) = match context.claim(&following).await {
                    Ok(Some(claimed)) => claimed,
                    Ok(None) => break,
                    Err(error) => break 'poll Err(error),
                };
                context.health.tick();
                let followed = following.follow(claim.operation.id);
                let context = context.clone();
                let runs_stop = runs_stop.clone();
                let steps = steps.clone();
                runs.spawn(async move {
                    let _permit = permit;
                    let _followed = followed;
                    context.run_operation(claim, lease_valid_until, &steps, runs_stop).await;
                });
            }
            tokio::select! {
                _ = shutdown.changed() => break Ok(()),
                _ = tokio::time::sleep(context.settings.poll_interval) => {}
                () = context.wake.notified() => {}
                Some(finished) = runs.join_next(), if !runs.is_empty() => {
                    // A panicking run keeps its lease until it expires; then it is resumed.
                    if let Err(error) = finished {
                        tracing::error!(%error, "a run panicked; its operation will be resumed after its lease expires");
                    }
                }
            }
        };
        let _ = stop_runs.send(true);
        while runs.join_next().await.is_some() {}
        tracing::info!("worker stopped");
        result
    }

    /// Claims the next operation; also returns until when the lease surely holds by this process's clock (the
    /// database set it from its own clock after the call started). A database that does not answer is not an
    /// error here (the next poll tries again); an operation that cannot be read is.
    async fn claim(&self, following: &Following) -> Result<Option<(Claim, Instant)>, Error> {
        let started = Instant::now();
        let settings = &self.settings;
        let exclude = following.ids();
        let claim = self.store.claim_operation(&settings.owner, settings.lease, settings.resume_in_progress, &exclude);
        match tokio::time::timeout(STORE_TIMEOUT, claim).await {
            Ok(Ok(claim)) => Ok(claim.map(|claim| (claim, started + settings.lease))),
            Ok(Err(error @ store::Error::Corrupt(_))) => {
                tracing::error!(%error, "a claimed operation cannot be read; stopping the worker");
                Err(Error::Unreadable(error))
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "could not claim an operation");
                Ok(None)
            }
            Err(_) => {
                tracing::warn!("claiming an operation timed out");
                Ok(None)
            }
        }
    }

    fn timeout_of(&self, operation_type: OperationType) -> Duration {
        match operation_type {
            OperationType::Provision => self.settings.provisioning_timeout,
            OperationType::Deprovision => self.settings.deprovisioning_timeout,
            OperationType::Upgrade => self.settings.upgrade_timeout,
            OperationType::Hibernate | OperationType::WakeUp => self.settings.hibernation_timeout,
        }
    }

    /// Runs one claimed operation to its end, or until its lease is lost or the process shuts down.
    #[instrument(skip_all, fields(operation_id = %claim.operation.id, runtime_id = %claim.operation.runtime_id))]
    async fn run_operation(
        self: Arc<Self>,
        claim: Claim,
        lease_valid_until: Instant,
        steps: &Semaphore,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let operation = &claim.operation;
        self.metrics.run_started(operation.operation_type);
        tracing::info!(
            operation_id = %operation.id,
            stage = %operation.stage,
            attempts = operation.attempts,
            claims = operation.claims,
            "run started"
        );
        // The watch guard is not Send: wait inside a block that drops it before returning.
        let shutting_down = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        };
        let (lost, lease_lost) = watch::channel(false);
        let (cancel_requests, cancelled) = watch::channel(operation.cancel_requested_by.clone());
        // No task is spawned here: when this future is dropped (the process dies), everything stops with it. The
        // heartbeat only raises `lost`; the step loop stops at that signal, but never in the middle of recording
        // progress, so a run that just finished is not mistaken for one that lost its lease.
        let finished = tokio::select! {
            finished = self.drive(&claim, steps, lease_lost, cancelled) => finished,
            never = self.heartbeat(&claim, lease_valid_until, lost) => match never {},
            never = self.watch_for_cancel(&claim, cancel_requests) => match never {},
            () = shutting_down => {
                if let Err(error) = self.store.release(operation.id, claim.token).await {
                    tracing::warn!(%error, "could not release the operation on shutdown; it resumes when its lease expires");
                }
                tracing::info!("shutting down: operation released for the next process");
                None
            }
        };
        self.metrics.run_ended(operation.operation_type, finished);
        tracing::info!(operation_id = %operation.id, finished = finished.is_some(), "run ended");
    }

    /// Extends the lease every third of its length. When the claim is superseded, or the lease may have expired
    /// because the database did not answer in time, it raises `lost` (the run must stop: another worker may take
    /// the operation now) and then waits forever.
    async fn heartbeat(&self, claim: &Claim, mut valid_until: Instant, lost: watch::Sender<bool>) -> Infallible {
        let lease = self.settings.lease;
        let mut next = Instant::now() + lease / 3;
        loop {
            tokio::time::sleep_until(next.min(valid_until)).await;
            let started = Instant::now();
            if started >= valid_until {
                tracing::warn!("the lease could not be renewed before it expired; stopping this run");
                break;
            }
            let extend = self.store.extend_lease(claim.operation.id, claim.token, lease);
            next = match tokio::time::timeout(STORE_TIMEOUT.min(valid_until - started), extend).await {
                Ok(Ok(true)) => {
                    valid_until = started + lease;
                    started + lease / 3
                }
                // Superseded, or finished by this run a moment ago: the step loop tells which when it looks.
                Ok(Ok(false)) => break,
                // A slow or failing database: try again soon, while the lease still holds.
                failed => {
                    match failed {
                        Ok(Err(error)) => tracing::warn!(%error, "could not extend the lease"),
                        _ => tracing::warn!("extending the lease timed out"),
                    }
                    Instant::now() + (lease / 10).min(Duration::from_secs(1))
                }
            };
        }
        let _ = lost.send(true);
        std::future::pending().await
    }

    /// Looks every [`CANCEL_POLL`] whether a caller cancelled the operation, and says who once somebody did
    /// (then waits forever). A failed look is only logged: the next one may succeed.
    async fn watch_for_cancel(&self, claim: &Claim, requests: watch::Sender<Option<String>>) -> Infallible {
        if requests.borrow().is_none() {
            loop {
                tokio::time::sleep(CANCEL_POLL).await;
                match tokio::time::timeout(STORE_TIMEOUT, self.store.cancel_requested_by(claim.operation.id)).await {
                    Ok(Ok(Some(caller))) => {
                        let _ = requests.send(Some(caller));
                        break;
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(error)) => tracing::debug!(%error, "could not look for a cancel request"),
                    Err(_) => tracing::debug!("looking for a cancel request timed out"),
                }
            }
        }
        std::future::pending().await
    }

    /// The step loop. Returns the end state and reason once the operation reached it; `None` when it stopped
    /// earlier (lease lost, store unreachable), leaving the operation to be resumed.
    async fn drive(
        &self,
        claim: &Claim,
        steps: &Semaphore,
        mut lease_lost: watch::Receiver<bool>,
        mut cancelled: watch::Receiver<Option<String>>,
    ) -> Option<(OperationState, Option<FailureReason>)> {
        let operation = &claim.operation;
        let started = operation.started_at.unwrap_or(operation.created_at);
        let deadline = started + self.timeout_of(operation.operation_type);
        let names = RunNames::new(operation.operation_type, operation.runtime_id);
        let mut state =
            RunState::resume(operation.stage, operation.last_error.as_ref(), operation.attempts, MAX_ATTEMPTS);
        if state.failure.as_ref().is_some_and(|failure| failure.reason == FailureReason::AttemptsExhausted) {
            tracing::error!(
                operation_id = %operation.id,
                job = %names.job,
                attempts = operation.attempts,
                "attempts exhausted: the operation was started {MAX_ATTEMPTS} times without progress; stopping its Job and failing it"
            );
        }
        let mut run = Run { claim, names, redact: Vec::new(), runtime: None };

        loop {
            if store::now() > deadline {
                state.end_early(timeout_error(operation.operation_type, self.timeout_of(operation.operation_type)));
            }
            let cancel = cancelled.borrow().clone();
            if let Some(caller) = cancel
                && state.failure.is_none()
            {
                tracing::warn!(caller, stage = state.stage.as_str(), "cancelled; stopping its Job and cleaning up");
                state.end_early(LastError::cancelled_by(&caller));
            }
            let stage = state.stage;
            let message = stage.message(operation.operation_type, operation.run_action());
            let (progress, finished) = match state.record() {
                Record::Stage => (Progress::Stage { stage, message: message.to_owned() }, None),
                Record::Failing(error) => {
                    let message = format!("{message} after a failure");
                    (Progress::Failing { stage, message, error: error.clone() }, None)
                }
                Record::Succeeded => {
                    let state = OperationState::Succeeded;
                    (Progress::Finished { state, stage, message: message.to_owned() }, Some(state))
                }
                Record::Failed(error) => {
                    let state = OperationState::Failed;
                    (Progress::Finished { state, stage, message: error.err_message.clone() }, Some(state))
                }
            };
            match self.persist(claim, progress, &lease_lost).await {
                Recorded::Yes => {}
                Recorded::LeaseLost => {
                    tracing::warn!("lease lost: another worker owns this operation now; stopping");
                    return None;
                }
                Recorded::Unreachable => return None,
            }
            if let Some(finished) = finished {
                match &state.failure {
                    None => tracing::info!("operation succeeded"),
                    Some(error) => tracing::warn!(
                        reason = %error.reason,
                        component = %error.component,
                        message = %error.err_message,
                        "operation failed"
                    ),
                }
                return Some((finished, state.failure.map(|failure| failure.reason)));
            }

            let step_started = std::time::Instant::now();
            // Waiting for a Job only reads the Job cache, so it takes no step slot: a process can follow many
            // long terraform runs while still starting new ones.
            let _step = match stage {
                Stage::WaitForJob => None,
                _ => Some(steps.acquire().await.expect("the step semaphore is never closed")),
            };
            let failing = state.failure.is_some();
            let outcome = tokio::select! {
                outcome = self.attempt_until(deadline, stage, &mut run, failing) => outcome,
                _ = lease_lost.wait_for(|lost| *lost) => {
                    tracing::warn!(stage = stage.as_str(), "lease lost during a step; stopping");
                    return None;
                }
                // A cancel ends the step at once (steps are idempotent; the clean-up stops the Job); clean-up
                // steps themselves always finish.
                _ = cancelled.wait_for(Option::is_some), if !failing => continue,
            };
            self.metrics.observe_step(stage, step_started.elapsed());
            let result = match outcome {
                Ok(StepOutcome::Next) => Ok(()),
                // Only a permanent refusal ends a clean-up step early (transient failures are retried until they pass).
                Ok(StepOutcome::Fail(error)) | Err(StepError { error, .. }) => Err(error),
            };
            let error = result.as_ref().err().cloned();
            match (state.after_step(result), error) {
                (AfterStep::Failed, Some(error)) => tracing::warn!(
                    stage = stage.as_str(),
                    reason = %error.reason,
                    component = %error.component,
                    "run failed; stopping its Job and cleaning up"
                ),
                (AfterStep::CleanupFailed, Some(error)) => {
                    tracing::error!(stage = stage.as_str(), job = %run.names.job, error = %error.err_message, "cleanup failed")
                }
                _ => {}
            }
        }
    }

    /// Records progress, retrying briefly while the lease holds.
    async fn persist(&self, claim: &Claim, progress: Progress, lease_lost: &watch::Receiver<bool>) -> Recorded {
        let mut backoff = Backoff::new(RETRY_INITIAL, RETRY_MAX);
        for _ in 0..5 {
            if *lease_lost.borrow() {
                return Recorded::LeaseLost;
            }
            let record = self.store.record_progress(&claim.operation, claim.token, progress.clone());
            match tokio::time::timeout(STORE_TIMEOUT, record).await {
                Ok(Ok(true)) => return Recorded::Yes,
                Ok(Ok(false)) => return Recorded::LeaseLost,
                Ok(Err(error)) => tracing::warn!(%error, "could not record progress; retrying"),
                Err(_) => tracing::warn!("recording progress timed out; retrying"),
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
        tracing::warn!("the database stayed unreachable; stopping this run, it resumes from its last recorded stage");
        Recorded::Unreachable
    }

    /// Runs a step, retrying transient failures with exponential backoff and jitter: until the deadline for the
    /// steps of a run, without end for cleanup (a run must not end while its Job may still be running). A retry
    /// is shown in the operation's status (unless the run is already failing: then its failure stays shown).
    async fn attempt_until(
        &self,
        deadline: DateTime<Utc>,
        stage: Stage,
        run: &mut Run<'_>,
        failing: bool,
    ) -> Result<StepOutcome, StepError> {
        let mut backoff = Backoff::new(RETRY_INITIAL, RETRY_MAX);
        let operation = &run.claim.operation;
        let (operation_type, action) = (operation.operation_type, operation.run_action());
        loop {
            let result = match step_limit(stage, failing) {
                Some(limit) => {
                    tokio::time::timeout(limit, self.step(stage, run, deadline, failing)).await.unwrap_or_else(|_| {
                        let message =
                            format!("step {} took longer than {}", stage.as_str(), humantime::format_duration(limit));
                        Err(StepError {
                            transient: true,
                            detail: message.clone(),
                            error: LastError::new(FailureReason::StepTimeout, Component::Provisioner, message),
                        })
                    })
                }
                None => self.step(stage, run, deadline, failing).await,
            };
            match result {
                Err(error) if error.transient => {
                    let delay = backoff.next_delay();
                    if store::now() + delay > deadline && stage < Stage::Cleanup {
                        return Err(StepError { transient: false, ..error });
                    }
                    tracing::warn!(
                        stage = stage.as_str(),
                        component = %error.error.component,
                        error = %error.detail,
                        ?delay,
                        "transient failure; retrying"
                    );
                    if !failing {
                        let shown = LastError {
                            err_message: format!("{}; retrying", error.error.err_message),
                            ..error.error.clone()
                        };
                        let progress = Progress::Retrying {
                            message: format!(
                                "{}: retrying after a transient failure",
                                stage.message(operation_type, action)
                            ),
                            error: shown,
                        };
                        let record = self.store.record_progress(&run.claim.operation, run.claim.token, progress);
                        if let Ok(Err(error)) = tokio::time::timeout(STORE_TIMEOUT, record).await {
                            tracing::debug!(%error, "could not show the retry in the status");
                        }
                    }
                    tokio::time::sleep(delay).await;
                }
                Err(error) => {
                    tracing::warn!(stage = stage.as_str(), component = %error.error.component, error = %error.detail, "step failed");
                    return Err(error);
                }
                other => return other,
            }
        }
    }

    async fn step(
        &self,
        stage: Stage,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
        failing: bool,
    ) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        let labels = run_labels(operation.runtime_id, operation.id);
        match stage {
            Stage::Queued | Stage::Done => Ok(StepOutcome::Next),
            Stage::ResolveCredential => {
                // Once per run: after a restart the Secret written earlier is reused. On the first claim no
                // earlier claim can have written it, which saves a request per run.
                if operation.claims > 1 && self.executor.credentials_exist(&run.names, operation.id).await? {
                    run.redact = self.executor.credential_values(&run.names).await?;
                    return Ok(StepOutcome::Next);
                }
                let runtime = run.runtime(&self.store).await?;
                let config = &runtime.cluster_config;
                let credential = self.auth.credential(&config.credential_id).await?;
                // The credential may have changed in auth-service since the request was checked.
                let mismatch = config.topology.credential_mismatch(
                    &config.credential_id,
                    credential.kind().as_str(),
                    credential.cloud(),
                );
                if let Some(message) = mismatch {
                    return Ok(StepOutcome::Fail(LastError::new(
                        FailureReason::CredentialMismatch,
                        Component::AuthService,
                        message,
                    )));
                }
                run.redact = credential.secret_values();
                self.executor.ensure_credentials(&run.names, &labels, &credential.secret_files()).await?;
                Ok(StepOutcome::Next)
            }
            Stage::RenderConfig => {
                let runtime = run.runtime(&self.store).await?;
                let provider = match &operation.terraform_provider {
                    Some(provider) => provider.clone(),
                    None => ProviderVersion::pinned(runtime.cluster_config.topology.cloud()),
                };
                let rendered = self
                    .renderer
                    .render(runtime, operation.operation_type, operation.run_action(), &provider)
                    .map_err(|error| {
                        StepError::permanent(FailureReason::RenderFailed, Component::Renderer, error.to_string())
                    })?;
                self.executor.ensure_config(&run.names, &labels, rendered.files).await?;
                Ok(StepOutcome::Next)
            }
            Stage::CreateJob => {
                // One Terraform per runtime: a Job of an earlier operation that is still running (its run ended
                // without stopping it, or another replica's) must end first. Waiting is transient: it is retried
                // until the deadline.
                if let Some(other) = self.executor.other_run_of_runtime(operation.runtime_id, operation.id).await? {
                    return Err(StepError {
                        transient: true,
                        detail: format!("{other} of another operation on this runtime is still running"),
                        error: LastError::new(
                            FailureReason::JobStillRunning,
                            Component::Kubernetes,
                            format!("waiting for {other} of an earlier operation on this runtime to end"),
                        ),
                    });
                }
                // The Job's own deadline is a backstop for a service that is gone: the worker's comes first and
                // stops the Job gracefully, with the operation's timeout in its message.
                let remaining = (deadline - store::now()).to_std().unwrap_or(Duration::from_secs(1));
                let job_deadline = remaining + JOB_DEADLINE_MARGIN;
                self.executor
                    .ensure_job(&self.modules, operation.run_action(), &run.names, &labels, job_deadline)
                    .await?;
                Ok(StepOutcome::Next)
            }
            Stage::WaitForJob => {
                if run.redact.is_empty() {
                    run.redact = self.executor.credential_values(&run.names).await?;
                }
                let remaining = (deadline - store::now()).to_std().unwrap_or_default();
                match self.executor.wait_for_job(&run.names, operation.id, remaining, &run.redact).await? {
                    JobState::Succeeded => {
                        if let Some(report) = self.executor.run_report(&run.names).await? {
                            self.store.record_plan_summary(operation.id, run.claim.token, &report.plan).await?;
                        }
                        Ok(StepOutcome::Next)
                    }
                    JobState::Running => Ok(StepOutcome::Fail(timeout_error(
                        operation.operation_type,
                        self.timeout_of(operation.operation_type),
                    ))),
                    JobState::Missing => Ok(StepOutcome::Fail(LastError::new(
                        FailureReason::JobMissing,
                        Component::Kubernetes,
                        format!("Job {} disappeared before it finished", run.names.job),
                    ))),
                    JobState::Failed { reason, message } => {
                        Ok(StepOutcome::Fail(LastError::new(reason, Component::TerraformRunner, message)))
                    }
                }
            }
            Stage::Finalize => match operation.run_action() {
                RunAction::Plan => Ok(StepOutcome::Next),
                RunAction::Apply => self.check_outputs(run).await,
                RunAction::Destroy => {
                    self.executor.delete_secret(&run.names.outputs_secret).await?;
                    Ok(StepOutcome::Next)
                }
            },
            Stage::Cleanup => {
                // The logs are kept before anything goes: the credential values to redact them with (the Secret
                // is deleted last), and the logs followed before a running Job is stopped, so that its last lines
                // are in. A clean-up that runs again after a restart keeps the first archive.
                if run.redact.is_empty() {
                    run.redact = self.executor.credential_values(&run.names).await?;
                }
                let logs = match self.store.run_logs_archived(operation.id).await? {
                    true => None,
                    false => self.executor.open_final_logs(operation.id).await?,
                };
                // A failed run may have left its Job running (a timeout, exhausted attempts): stop it and wait
                // for its pods before the credentials they mount go away and the run ends.
                if failing {
                    match self.executor.stop_job(&run.names, operation.id, RUNNER_GRACE_PERIOD + STOP_MARGIN).await? {
                        JobStop::NotRunning => {}
                        JobStop::Stopped => tracing::error!(
                            operation_id = %operation.id,
                            job = %run.names.job,
                            "stopped the Job of a failed run; its pods are gone"
                        ),
                        JobStop::StillRunning { pods } => tracing::error!(
                            operation_id = %operation.id,
                            job = %run.names.job,
                            ?pods,
                            "pods of a stopped Job were still running after their grace period; a new operation on \
                             this runtime waits for them"
                        ),
                    }
                }
                if let Some(logs) = logs {
                    let redactor = Redactor::new(run.redact.clone());
                    let logs = logs.read(RUNNER_GRACE_PERIOD + STOP_MARGIN).await;
                    let redacted = logs.into_iter().map(|log| (log.container, redactor.redact(&log.log))).collect();
                    let kept = run_log::within_budget(redacted, self.settings.run_log_max_bytes);
                    self.store.archive_run_logs(operation.id, &kept).await?;
                }
                self.executor.delete_secret(&run.names.credentials_secret).await?;
                Ok(StepOutcome::Next)
            }
        }
    }
}

/// How long one try of a step may take: waiting for the Job is bounded by the deadline instead, and stopping a
/// failed run's Job by the runner's grace period.
fn step_limit(stage: Stage, failing: bool) -> Option<Duration> {
    match stage {
        Stage::WaitForJob => None,
        Stage::Cleanup if failing => Some(STEP_TIMEOUT + RUNNER_GRACE_PERIOD + STOP_MARGIN),
        _ => Some(STEP_TIMEOUT),
    }
}

fn timeout_error(operation_type: OperationType, timeout: Duration) -> LastError {
    let what = operation_type.verb();
    LastError::new(
        FailureReason::Timeout,
        Component::Provisioner,
        format!("{what} did not finish within {}", humantime::format_duration(timeout)),
    )
}

/// The state of one run while it is driven.
struct Run<'a> {
    claim: &'a Claim,
    names: RunNames,
    /// Credential values to keep out of failure messages.
    redact: Vec<String>,
    runtime: Option<Runtime>,
}

impl Run<'_> {
    /// The runtime as this run works on it: with an upgrade's target configuration (the stored runtime keeps the
    /// configuration last applied until the upgrade succeeded).
    async fn runtime(&mut self, store: &Store) -> Result<&Runtime, StepError> {
        if self.runtime.is_none() {
            let operation = &self.claim.operation;
            let runtime_id = operation.runtime_id;
            let mut runtime = store.find_runtime(runtime_id).await?.ok_or_else(|| {
                StepError::permanent(
                    FailureReason::RuntimeMissing,
                    Component::Database,
                    format!("runtime {runtime_id} does not exist"),
                )
            })?;
            if let Some(config) = &operation.target_config {
                runtime.cluster_config = config.clone();
            }
            self.runtime = Some(runtime);
        }
        Ok(self.runtime.as_ref().expect("loaded above"))
    }
}
