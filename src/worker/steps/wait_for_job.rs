//! WaitForJob: the Job followed through the cache until it ends or the deadline passes.

use chrono::{DateTime, Utc};

use super::Run;
use super::timeout_error;
use crate::domain::run::JobState;
use crate::domain::{Component, FailureReason, LastError};
use crate::store;
use crate::telemetry::OrphanOutcome;
use crate::worker::Worker;
use crate::worker::cluster::RunCluster;
use crate::worker::step_error::{StepError, StepOutcome};

impl<C: RunCluster> Worker<C> {
    pub(super) async fn wait_for_job(
        &self,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
    ) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        if run.redact.is_empty() {
            run.redact = self.executor.credential_values(&run.names).await?;
        }
        let remaining = (deadline - store::now()).to_std().unwrap_or_default();
        let error = match self.executor.wait_for_job(&run.names, operation.id, remaining, &run.redact).await? {
            JobState::Succeeded => {
                if let Some(report) = self.executor.run_report(&run.names).await? {
                    let saved_plan = report.saved_plan_sha256.as_deref();
                    self.store.record_plan_summary(operation.id, run.claim.token, &report.plan, saved_plan).await?;
                    self.metrics.orphans_found(OrphanOutcome::Deleted, report.plan.swept.len());
                    self.metrics.orphans_found(OrphanOutcome::Recorded, report.plan.orphans.len());
                    self.metrics.orphans_found(OrphanOutcome::Foreign, report.plan.foreign.len());
                }
                return Ok(StepOutcome::Next);
            }
            JobState::Running => timeout_error(operation.operation_type, self.timeout_of(operation.operation_type)),
            JobState::Missing => LastError::new(
                FailureReason::JobMissing,
                Component::Kubernetes,
                format!("Job {} disappeared before it finished", run.names.job),
            ),
            JobState::Failed { reason, message } => {
                if reason == FailureReason::Leftovers
                    && let Some(leftovers) = self.executor.leftovers(&run.names).await?
                {
                    self.metrics.orphans_found(OrphanOutcome::Left, leftovers.resources.len());
                }
                LastError::of_failed_run(reason, message)
            }
        };
        Ok(StepOutcome::Fail(error))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use runner_contract::plan::PlanSummary;
    use runner_contract::report::RunReport;

    use crate::domain::run::JobState;
    use crate::domain::{Component, FailureReason, LastError, OperationType};
    use crate::store;
    use crate::worker::step_error::StepOutcome;
    use crate::worker::steps::testing::{Fixture, Script};

    async fn wait(job_state: JobState, report: Option<RunReport>) -> (Fixture, StepOutcome) {
        let fixture = Fixture::with(OperationType::Provision, Script { job_state, report, ..Script::default() }).await;
        let mut run = fixture.run();
        let deadline = store::now() + Duration::from_secs(600);
        let outcome = fixture.worker.wait_for_job(&mut run, deadline).await.expect("the step succeeds");
        (fixture, outcome)
    }

    #[tokio::test]
    async fn a_failed_job_fails_the_run_with_the_runners_reason_and_message() {
        let failed = JobState::Failed { reason: FailureReason::DestructivePlan, message: "would destroy".to_owned() };
        let (fixture, outcome) = wait(failed, None).await;
        let expected = LastError::new(FailureReason::DestructivePlan, Component::TerraformRunner, "would destroy");
        assert_eq!(outcome, StepOutcome::Fail(expected));
        // The Job is waited for with the credential values to redact its messages with.
        let names = fixture.run().names;
        let expected_calls = [
            format!("credential_values {}", names.credentials_secret),
            format!("wait_for_job {} redacting [\"the-secret\"]", names.job),
        ];
        assert_eq!(fixture.calls(), expected_calls);
    }

    #[tokio::test]
    async fn a_job_that_vanished_fails_the_run_as_missing() {
        let (_, outcome) = wait(JobState::Missing, None).await;
        let StepOutcome::Fail(error) = outcome else { panic!("{outcome:?}") };
        assert_eq!((error.reason, error.component), (FailureReason::JobMissing, Component::Kubernetes));
    }

    #[tokio::test]
    async fn a_job_still_running_at_the_deadline_times_the_run_out() {
        let (_, outcome) = wait(JobState::Running, None).await;
        let StepOutcome::Fail(error) = outcome else { panic!("{outcome:?}") };
        assert_eq!(error.reason, FailureReason::Timeout);
        assert!(error.err_message.contains("1h"), "names the provisioning timeout: {error:?}");
    }

    #[tokio::test]
    async fn a_succeeded_job_records_the_plan_its_pod_reported() {
        let plan = PlanSummary { add: 3, change: 1, ..PlanSummary::default() };
        let report = RunReport::of_plan(plan.clone());
        let (fixture, outcome) = wait(JobState::Succeeded, Some(report)).await;
        assert_eq!(outcome, StepOutcome::Next);
        assert_eq!(fixture.stored().await.plan_summary, Some(plan));
    }
}
