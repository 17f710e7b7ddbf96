//! The step loop of one run: deadline and cancel checks, the domain's record of each stage persisted under the
//! lease, and each step retried while its failure is transient.

use chrono::{DateTime, Utc};
use tokio::sync::{Semaphore, watch};
use tracing::Instrument;

use super::step_error::{StepError, StepOutcome};
use super::steps::{Run, step_limit, timeout_error};
use super::store_calls::{self, warn_unless_database_away};
use super::{MAX_ATTEMPTS, RETRY_INITIAL, RETRY_MAX, STORE_TIMEOUT, Worker};
use crate::backoff::Backoff;
use crate::domain::run::{AfterStep, Record, RunNames, RunState, Stage};
use crate::domain::{Component, FailureReason, LastError, Operation, OperationState, OperationType};
use crate::store::{self, Claim, Progress};
use crate::telemetry::{Dependency, SPAN_TARGET};
use crate::worker::cluster::RunCluster;

/// How recording progress ended.
pub(super) enum Recorded {
    Yes,
    /// The claim is no longer current (or the lease keeper could not renew it in time): stop at once.
    LeaseLost,
    /// The store stayed unreachable: stop; the operation resumes from its last recorded stage later.
    Unreachable,
}

impl<C: RunCluster> Worker<C> {
    /// The step loop. Returns the end state and reason once the operation reached it; `None` when it stopped
    /// earlier (lease lost, store unreachable), leaving the operation to be resumed.
    pub(super) async fn drive(
        &self,
        claim: &Claim,
        steps: &Semaphore,
        mut lease_lost: watch::Receiver<bool>,
        mut cancelled: watch::Receiver<Option<String>>,
    ) -> Option<(OperationState, Option<FailureReason>)> {
        let operation = &claim.operation;
        let deadline = operation.run_started_at() + self.timeout_of(operation.operation_type);
        let names = RunNames::of(operation);
        let attempts = (operation.attempts, MAX_ATTEMPTS);
        let holds_plan = operation.holds_plan_for_approval();
        let mut state = RunState::resume(operation.stage, operation.last_error.as_ref(), attempts, holds_plan)
            .with_minor_following(operation.minor_done(store::now()).is_some());
        let chain_step = operation.chain_step();
        if state.failure.as_ref().is_some_and(|failure| failure.reason == FailureReason::AttemptsExhausted) {
            tracing::error!(
                operation_id = %operation.id,
                job = %names.job,
                attempts = operation.attempts,
                "attempts exhausted: the operation was started {MAX_ATTEMPTS} times without progress; stopping its Job and failing it"
            );
        }
        let mut run = Run { claim, names, redact: Vec::new(), runtime: None };
        let mut step_slot = None;

        loop {
            let timeout = self.timeout_of(operation.operation_type);
            end_early_when_due(&mut state, (deadline, timeout), operation.operation_type, cancelled.borrow().clone());
            let stage = state.stage;
            let message = stage.message(operation.operation_type, operation.run_action());
            let message = match &chain_step {
                Some(step) => format!("{message} {step}"),
                None => message.to_owned(),
            };
            let ttl = self.settings.plan_approval_ttl;
            let (progress, finished) = progress_of(state.record(), (stage, &message), ttl, operation);
            match self.persist(claim, progress, &lease_lost).await {
                Recorded::Yes => {}
                Recorded::LeaseLost => {
                    warn_unless_database_away!("lease lost: another worker owns this operation now; stopping");
                    return None;
                }
                Recorded::Unreachable => return None,
            }
            if let Some(finished) = finished {
                log_end(state.failure.as_ref());
                return Some((finished, state.failure.map(|failure| failure.reason)));
            }

            let step_started = std::time::Instant::now();
            // Waiting for a Job only reads the Job cache, so it takes no step slot: a process can follow many
            // long terraform runs while still starting new ones. A run keeps its slot from one step to the next,
            // so that once started it reaches its Job without queueing again behind every run claimed after it.
            if stage == Stage::WaitForJob {
                step_slot = None;
            } else if step_slot.is_none() {
                step_slot = Some(steps.acquire().await.expect("the step semaphore is never closed"));
            }
            let failing = state.failure.is_some();
            // Each step is a span of the trace (not of the log lines, which name the run's span as before).
            let step = tracing::info_span!(target: SPAN_TARGET, "step", otel.name = stage.as_str());
            let outcome = tokio::select! {
                outcome = self.attempt_until(deadline, stage, &mut run, failing).instrument(step) => outcome,
                _ = lease_lost.wait_for(|lost| *lost) => {
                    warn_unless_database_away!(stage = stage.as_str(), "lease lost during a step; stopping");
                    return None;
                }
                // A cancel ends the step at once (steps are idempotent; the clean-up stops the Job); clean-up
                // steps themselves always finish.
                _ = cancelled.wait_for(Option::is_some), if !failing => continue,
            };
            self.metrics.observe_step(stage, step_started.elapsed());
            let result = match outcome {
                Ok(StepOutcome::Next) => Ok(()),
                Ok(StepOutcome::HoldForApproval) => {
                    state.hold_for_approval();
                    Ok(())
                }
                // Only a permanent refusal ends a clean-up step early (transient failures are retried until they pass).
                Ok(StepOutcome::Fail(error)) | Err(StepError { error, .. }) => Err(error),
            };
            let error = result.as_ref().err().cloned();
            log_step_failure(state.after_step(result), error, stage, &run.names.job);
        }
    }

    /// Records progress, retrying briefly while the lease holds.
    pub(super) async fn persist(
        &self,
        claim: &Claim,
        progress: Progress,
        lease_lost: &watch::Receiver<bool>,
    ) -> Recorded {
        let mut backoff = Backoff::new(RETRY_INITIAL, RETRY_MAX);
        for _ in 0..5 {
            if *lease_lost.borrow() {
                return Recorded::LeaseLost;
            }
            let record = self.store.record_progress(&claim.operation, claim.token, progress.clone());
            match tokio::time::timeout(STORE_TIMEOUT, record).await {
                Ok(Ok(recorded)) => {
                    Dependency::Database.answered();
                    return if recorded { Recorded::Yes } else { Recorded::LeaseLost };
                }
                Ok(Err(error)) => store_calls::failed(Some(&error), "recording progress"),
                Err(_) => store_calls::failed(None, "recording progress"),
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
        warn_unless_database_away!(
            "the database stayed unreachable; stopping this run, it resumes from its last recorded stage"
        );
        Recorded::Unreachable
    }

    /// Runs a step, retrying transient failures with exponential backoff and jitter: until the deadline for the
    /// steps of a run, without end for cleanup (a run must not end while its Job may still be running). A retry
    /// is shown in the operation's status (unless the run is already failing: then its failure stays shown).
    pub(super) async fn attempt_until(
        &self,
        deadline: DateTime<Utc>,
        stage: Stage,
        run: &mut Run<'_>,
        failing: bool,
    ) -> Result<StepOutcome, StepError> {
        let mut backoff = Backoff::new(RETRY_INITIAL, RETRY_MAX);
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
                        self.show_retry(run.claim, stage, &error.error).await;
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

    /// A retry is shown in the operation's status; not being able to show it does not stop the retry.
    pub(super) async fn show_retry(&self, claim: &Claim, stage: Stage, error: &LastError) {
        let operation = &claim.operation;
        let shown = LastError { err_message: format!("{}; retrying", error.err_message), ..error.clone() };
        let message = stage.message(operation.operation_type, operation.run_action());
        let progress =
            Progress::Retrying { message: format!("{message}: retrying after a transient failure"), error: shown };
        let record = self.store.record_progress(operation, claim.token, progress);
        if let Ok(Err(error)) = tokio::time::timeout(STORE_TIMEOUT, record).await {
            tracing::debug!(%error, "could not show the retry in the status");
        }
    }
}

/// Past the deadline the run ends as timed out; once a caller cancelled it, as cancelled (unless it already fails).
fn end_early_when_due(
    state: &mut RunState,
    (deadline, timeout): (DateTime<Utc>, std::time::Duration),
    operation_type: OperationType,
    cancelled_by: Option<String>,
) {
    if store::now() > deadline {
        state.end_early(timeout_error(operation_type, timeout));
    }
    if let Some(caller) = cancelled_by
        && state.failure.is_none()
    {
        tracing::warn!(caller, stage = state.stage.as_str(), "cancelled; stopping its Job and cleaning up");
        state.end_early(LastError::cancelled_by(&caller));
    }
}

fn log_end(failure: Option<&LastError>) {
    match failure {
        None => tracing::info!("operation succeeded"),
        Some(error) => tracing::warn!(
            reason = %error.reason,
            component = %error.component,
            message = %error.err_message,
            "operation failed"
        ),
    }
}

/// What the store is to record for the domain's `record` of the stage (with its message); and the state the
/// run ends the operation in, once it ends (a plan held for approval may be approved for `approval_ttl`; a chain
/// hands over to its next minor, started now).
pub(super) fn progress_of(
    record: Record<'_>,
    (stage, message): (Stage, &str),
    approval_ttl: std::time::Duration,
    operation: &Operation,
) -> (Progress, Option<OperationState>) {
    match record {
        Record::NextMinor => {
            let done = operation.minor_done(store::now()).expect("a run hands over only when another minor follows");
            let next = done.minors.last().map(|minor| minor.version.to_string()).unwrap_or_default();
            let message =
                format!("Upgraded to {}; waiting for a worker to upgrade to {next}", done.applied.kubernetes_version);
            (Progress::NextMinor { message, done: Box::new(done) }, Some(OperationState::Pending))
        }
        Record::AwaitingApproval => {
            let expires_at = store::now() + approval_ttl;
            let progress = Progress::AwaitingApproval { message: message.to_owned(), expires_at };
            (progress, Some(OperationState::AwaitingApproval))
        }
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
    }
}

pub(super) fn log_step_failure(after: AfterStep, error: Option<LastError>, stage: Stage, job: &str) {
    match (after, error) {
        (AfterStep::Failed, Some(error)) => tracing::warn!(
            stage = stage.as_str(),
            reason = %error.reason,
            component = %error.component,
            "run failed; stopping its Job and cleaning up"
        ),
        (AfterStep::CleanupFailed, Some(error)) => {
            tracing::error!(stage = stage.as_str(), job, error = %error.err_message, "cleanup failed")
        }
        _ => {}
    }
}
