//! CreateJob: the run's Job, once no earlier operation's Job on the runtime is running.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Run;
use crate::domain::{Component, FailureReason, LastError};
use crate::store;
use crate::worker::JOB_DEADLINE_MARGIN;
use crate::worker::Worker;
use crate::worker::cluster::RunCluster;
use crate::worker::step_error::{StepError, StepOutcome};

impl<C: RunCluster> Worker<C> {
    pub(super) async fn create_job(
        &self,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
    ) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        // One Terraform per runtime: a Job of an earlier operation that is still running (its run ended without
        // stopping it, or another replica's) must end first. Waiting is transient: it is retried until the deadline.
        // The runtime's first operation has no earlier one, so a burst of provisionings asks the API server
        // nothing here (two lists that read every Job and pod of the namespace).
        if !operation.is_its_runtimes_first()
            && let Some(other) = self.executor.other_run_of_runtime(operation.runtime_id, operation.id).await?
        {
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
        // The Job's own deadline is a backstop for a service that is gone: the worker's comes first and stops the
        // Job gracefully, with the operation's timeout in its message.
        let remaining = (deadline - store::now()).to_std().unwrap_or(Duration::from_secs(1));
        let action = operation.run_action();
        self.executor.ensure_job(&self.modules, action, run.reference(), remaining + JOB_DEADLINE_MARGIN).await?;
        Ok(StepOutcome::Next)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::domain::{FailureReason, OperationType};
    use crate::store;
    use crate::worker::step_error::StepOutcome;
    use crate::worker::steps::testing::{Fixture, Script};

    #[tokio::test]
    async fn a_running_job_of_another_operation_holds_the_run_back_until_it_ends() {
        let script = Script { other_run: Some("Job deprovision-earlier".to_owned()), ..Script::default() };
        let fixture = Fixture::with(OperationType::Upgrade, script).await;
        let mut run = fixture.run();
        let deadline = store::now() + Duration::from_secs(600);
        let error = fixture.worker.create_job(&mut run, deadline).await.expect_err("another Job runs");
        assert!(error.transient, "retried until the deadline: {error:?}");
        assert_eq!(error.error.reason, FailureReason::JobStillRunning);
        assert_eq!(fixture.calls(), ["other_run_of_runtime"], "no Job of this run is created");
    }

    #[tokio::test]
    async fn the_job_runs_for_the_operations_remaining_time_and_a_margin() {
        let fixture = Fixture::provisioning().await;
        let mut run = fixture.run();
        let deadline = store::now() + Duration::from_secs(600);
        let outcome = fixture.worker.create_job(&mut run, deadline).await.expect("the step succeeds");
        assert_eq!(outcome, StepOutcome::Next);
        // Ten minutes left and the thirty seconds of margin: under eleven minutes. A runtime's first provisioning
        // has no other run to wait for.
        let job = format!("ensure_job {} apply within 11 min", run.names.job);
        assert_eq!(fixture.calls(), [job]);
    }

    #[tokio::test]
    async fn a_retried_provisioning_asks_whether_the_failed_ones_job_still_runs() {
        let mut fixture = Fixture::provisioning().await;
        fixture.claim.operation.retry_of = Some(uuid::Uuid::now_v7());
        let mut run = fixture.run();
        let deadline = store::now() + Duration::from_secs(600);
        fixture.worker.create_job(&mut run, deadline).await.expect("the step succeeds");
        let job = format!("ensure_job {} apply within 11 min", run.names.job);
        assert_eq!(fixture.calls(), ["other_run_of_runtime".to_owned(), job]);
    }
}
