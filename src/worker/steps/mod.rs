//! The steps themselves, one per stage: each idempotent, so that a run resumed after a restart repeats the stage
//! it was in safely.

mod cleanup;
mod create_job;
mod finalize;
mod render_config;
mod resolve_credential;
#[cfg(test)]
mod testing;
mod wait_for_job;

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::step_error::{StepError, StepOutcome};
use super::{STEP_TIMEOUT, STOP_MARGIN, Worker};
use crate::domain::run::{RunNames, Stage};
use crate::domain::{Component, FailureReason, LastError, OperationType, Runtime};
use crate::executor::{RUNNER_GRACE_PERIOD, RunRef};
use crate::store::{Claim, Store};
use crate::worker::cluster::RunCluster;

impl<C: RunCluster> Worker<C> {
    pub(super) async fn step(
        &self,
        stage: Stage,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
        failing: bool,
    ) -> Result<StepOutcome, StepError> {
        match stage {
            Stage::Queued | Stage::Approved | Stage::NextMinor | Stage::AwaitingApproval | Stage::Done => {
                Ok(StepOutcome::Next)
            }
            Stage::ResolveCredential => self.resolve_credential(run).await,
            Stage::RenderConfig => self.render_config(run).await,
            Stage::CreateJob => self.create_job(run, deadline).await,
            Stage::WaitForJob => self.wait_for_job(run, deadline).await,
            Stage::Finalize => self.finalize(run).await,
            Stage::Cleanup => self.clean_up(run, failing).await,
        }
    }
}

/// How long one try of a step may take: waiting for the Job is bounded by the deadline instead, and stopping a
/// failed run's Job by the runner's grace period.
pub(super) fn step_limit(stage: Stage, failing: bool) -> Option<Duration> {
    match stage {
        Stage::WaitForJob => None,
        Stage::Cleanup if failing => Some(STEP_TIMEOUT + RUNNER_GRACE_PERIOD + STOP_MARGIN),
        _ => Some(STEP_TIMEOUT),
    }
}

pub(super) fn timeout_error(operation_type: OperationType, timeout: Duration) -> LastError {
    let what = operation_type.noun();
    LastError::new(
        FailureReason::Timeout,
        Component::Provisioner,
        format!("{what} did not finish within {}", humantime::format_duration(timeout)),
    )
}

/// The state of one run while it is driven.
pub(super) struct Run<'a> {
    pub(super) claim: &'a Claim,
    pub(super) names: RunNames,
    /// Credential values to keep out of failure messages.
    pub(super) redact: Vec<String>,
    pub(super) runtime: Option<Runtime>,
}

impl Run<'_> {
    /// The run as the executor labels and recognises its objects.
    pub(super) fn reference(&self) -> RunRef<'_> {
        let operation = &self.claim.operation;
        RunRef { names: &self.names, runtime_id: operation.runtime_id, operation_id: operation.id }
    }

    /// The runtime as this run works on it: with an upgrade's target configuration, at the current minor of a
    /// chain (the stored runtime keeps the configuration last applied until the upgrade, or the minor, succeeded).
    pub(super) async fn runtime(&mut self, store: &Store) -> Result<&Runtime, StepError> {
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
            if let Some(config) = operation.run_config() {
                runtime.cluster_config = config;
            }
            self.runtime = Some(runtime);
        }
        Ok(self.runtime.as_ref().expect("loaded above"))
    }
}
