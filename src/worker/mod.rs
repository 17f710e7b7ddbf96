//! The background worker: claims queued operations from the store under a lease, runs each through the step
//! machine of [`crate::domain::run`], and records the stage after every step, so that a crash, a restart or a
//! second replica never loses an operation or runs one twice at the same time.

mod cluster;
mod drive;
mod following;
mod lease;
mod retention;
mod step_error;
mod steps;
mod store_calls;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

use self::following::{Followed, Following};
use crate::credentials::Credentials;
use crate::domain::OperationType;
use crate::executor::{Executor, ModulesSettings};
use crate::render::Renderer;
use crate::store::{self, Claim, Store};
use crate::telemetry::{self, Dependency, Metrics, WorkerHealth};
pub use cluster::RunCluster;
pub use retention::{Retention, RetentionPeriods};

/// How long one step's remote calls may take before the attempt counts as a transient failure.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a store call may take.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);
/// After this many attempts an operation fails instead of being resumed again: a step that crashes its process
/// every time must not block its runtime forever. Restarts do not count (see `Store::claim_operations`).
const MAX_ATTEMPTS: i32 = 10;
/// How much longer than the operation's remaining time its Job may run.
const JOB_DEADLINE_MARGIN: Duration = Duration::from_secs(30);
/// How long past the runner's grace period a stopped Job's pods may take to go away.
const STOP_MARGIN: Duration = Duration::from_secs(60);
/// How often the lease keeper renews the leases of the runs it follows and so hears of cancel requests (any
/// process may record one); a third of the lease when that is shorter.
const LEASE_TICK: Duration = Duration::from_secs(2);
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
    /// Resume operations left InProgress by a process whose lease expired (`APP_ENQUEUE_IN_PROGRESS_OPERATIONS`).
    pub enqueue_in_progress: bool,
    pub provisioning_timeout: Duration,
    pub deprovisioning_timeout: Duration,
    pub upgrade_timeout: Duration,
    /// Of a hibernation or a wake-up.
    pub hibernation_timeout: Duration,
    /// What is kept of a run's logs, both containers together.
    pub run_log_max_bytes: usize,
    /// How long a plan waits for approval before the operation fails (`APP_PLAN_APPROVAL_TTL`).
    pub plan_approval_ttl: Duration,
}

/// Claims and drives operations; what a run needs is shared by the worker's tasks through an `Arc`.
pub struct Worker<C = Executor> {
    pub store: Store,
    /// What the steps do in the cluster ([`RunCluster`]: the executor, or a test's fake).
    pub executor: C,
    pub credentials: Credentials,
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

impl<C: RunCluster> Worker<C> {
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
        let keep_leases = |context: Arc<Self>, following: Arc<Following>, stop: watch::Receiver<bool>| {
            tokio::spawn(async move { context.keep_leases(&following, stop).await })
        };
        let mut keeper = keep_leases(context.clone(), following.clone(), runs_stop.clone());
        tracing::info!(
            owner = %context.settings.owner,
            concurrency = context.settings.concurrency,
            max_runs = context.settings.max_runs,
            "worker started"
        );
        let result = 'poll: loop {
            context.health.tick();
            loop {
                // At most as many at once as steps may run at once: a replica takes no more of a burst than it
                // can start on, and leaves the rest to the others.
                let wanted = run_permits.available_permits().min(context.settings.concurrency.max(1));
                if wanted == 0 {
                    break;
                }
                let (claims, lease_valid_until) = match context.claim(&following, wanted).await {
                    Ok(claimed) => claimed,
                    Err(error) => break 'poll Err(error),
                };
                context.health.tick();
                let drained = claims.len() < wanted;
                for claim in claims {
                    // Only this loop takes run permits, and it counted them before claiming.
                    let permit = run_permits.clone().try_acquire_owned().expect("a run permit was counted free");
                    let followed = following.follow(&claim, lease_valid_until);
                    let context = context.clone();
                    let runs_stop = runs_stop.clone();
                    let steps = steps.clone();
                    runs.spawn(async move {
                        let _permit = permit;
                        context.run_operation(claim, followed, &steps, runs_stop).await;
                    });
                }
                if drained {
                    break;
                }
            }
            tokio::select! {
                _ = shutdown.changed() => break Ok(()),
                _ = tokio::time::sleep(context.settings.poll_interval) => {}
                () = context.wake.notified() => {}
                ended = &mut keeper => {
                    // Its runs lose their leases while it is gone (and stop safely); a new keeper renews the rest.
                    tracing::error!(?ended, "the lease keeper stopped; starting it again");
                    keeper = keep_leases(context.clone(), following.clone(), runs_stop.clone());
                }
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
        let _ = keeper.await;
        tracing::info!("worker stopped");
        result
    }

    /// Claims up to `wanted` operations; also returns until when their leases surely hold by this process's
    /// clock (the database set them from its own clock after the call started). A database that does not answer
    /// is not an error here (the next poll tries again, and nothing is claimed); an operation that cannot be read is.
    async fn claim(&self, following: &Following, wanted: usize) -> Result<(Vec<Claim>, Instant), Error> {
        let started = Instant::now();
        let settings = &self.settings;
        let exclude = following.ids();
        let claim = self.store.claim_operations(
            &settings.owner,
            settings.lease,
            settings.enqueue_in_progress,
            &exclude,
            wanted as u64,
        );
        let claims = match tokio::time::timeout(STORE_TIMEOUT, claim).await {
            Ok(Ok(claims)) => {
                Dependency::Database.answered();
                claims
            }
            Ok(Err(error @ store::Error::Corrupt(_))) => {
                tracing::error!(%error, "a claimed operation cannot be read; stopping the worker");
                return Err(Error::Unreadable(error));
            }
            Ok(Err(error)) => {
                store_calls::failed(Some(&error), "claiming an operation");
                Vec::new()
            }
            Err(_) => {
                store_calls::failed(None, "claiming an operation");
                Vec::new()
            }
        };
        Ok((claims, started + settings.lease))
    }

    fn timeout_of(&self, operation_type: OperationType) -> Duration {
        match operation_type {
            OperationType::Provision => self.settings.provisioning_timeout,
            OperationType::Deprovision => self.settings.deprovisioning_timeout,
            OperationType::Upgrade | OperationType::RenewCertificates => self.settings.upgrade_timeout,
            OperationType::Hibernate | OperationType::WakeUp => self.settings.hibernation_timeout,
        }
    }

    /// Runs one claimed operation to its end, or until its lease is lost or the process shuts down. Its span
    /// continues the trace of the request that queued the operation.
    async fn run_operation(
        self: Arc<Self>,
        claim: Claim,
        followed: Followed,
        steps: &Semaphore,
        shutdown: watch::Receiver<bool>,
    ) {
        let operation = &claim.operation;
        let span = tracing::info_span!(
            "run_operation",
            operation_id = %operation.id,
            runtime_id = %operation.runtime_id,
            otel.name = format!("{} run", operation.operation_type.as_str()),
        );
        if let Some(parent) = &operation.trace_parent {
            telemetry::continue_trace(&span, parent.as_str());
        }
        self.run_claimed(claim, followed, steps, shutdown).instrument(span).await
    }

    async fn run_claimed(
        self: Arc<Self>,
        claim: Claim,
        followed: Followed,
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
        // No task is spawned here: when this future is dropped (the process dies), the run stops and leaves
        // `Following`, so the keeper stops renewing its lease. The keeper only raises `lease_lost`; the step loop
        // stops at that signal, but never in the middle of recording progress, so a run that just finished is not
        // mistaken for one that lost its lease.
        let finished = tokio::select! {
            finished = self.drive(&claim, steps, followed.lease_lost.clone(), followed.cancel_requests.clone()) => finished,
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
}
