//! Cleanup: the run's logs kept, a failed run's Job stopped, and the credentials Secret and the runner's identity
//! deleted, whatever the result.

use runner_contract::redact::Redactor;

use super::Run;
use crate::domain::run_log;
use crate::executor::{JobStop, RUNNER_CONTAINER, RUNNER_GRACE_PERIOD};
use crate::worker::STOP_MARGIN;
use crate::worker::Worker;
use crate::worker::cluster::RunCluster;
use crate::worker::step_error::{StepError, StepOutcome};

impl<C: RunCluster> Worker<C> {
    /// The logs are kept before anything goes: the credential values to redact them with (the Secret is deleted
    /// last), and the logs followed before a running Job is stopped, so that its last lines are in. A clean-up
    /// that runs again after a restart keeps the first archive.
    pub(super) async fn clean_up(&self, run: &mut Run<'_>, failing: bool) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        if run.redact.is_empty() {
            run.redact = self.executor.credential_values(&run.names).await?;
        }
        let archived_as = run.names.archived_log_name(RUNNER_CONTAINER);
        let logs = match self.store.run_log_archived(operation.id, &archived_as).await? {
            true => None,
            false => self.executor.open_final_logs(operation.id).await?,
        };
        if failing {
            self.stop_the_job_of_a_failed_run(run).await?;
        }
        if let Some(logs) = logs {
            let redactor = Redactor::new(run.redact.clone());
            let logs = logs.read(RUNNER_GRACE_PERIOD + STOP_MARGIN, self.settings.run_log_max_bytes).await;
            let redacted = logs
                .into_iter()
                .map(|log| (run.names.archived_log_name(&log.container), redactor.redact(&log.log)))
                .collect();
            let kept = run_log::within_budget(redacted, self.settings.run_log_max_bytes);
            self.store.archive_run_logs(operation.id, &kept).await?;
        }
        self.executor.delete_secret(&run.names.credentials_secret).await?;
        // The run's pods are done (or stopped): its identity goes now rather than with the Job, which stays a week.
        self.executor.delete_runner_identity(&run.names, operation.id).await?;
        Ok(StepOutcome::Next)
    }

    /// A failed run may have left its Job running (a timeout, exhausted attempts): it is stopped, and its pods
    /// waited for, before the credentials they mount go away and the run ends.
    pub(super) async fn stop_the_job_of_a_failed_run(&self, run: &Run<'_>) -> Result<(), StepError> {
        let operation_id = run.claim.operation.id;
        let job = &run.names.job;
        match self.executor.stop_job(&run.names, operation_id, RUNNER_GRACE_PERIOD + STOP_MARGIN).await? {
            JobStop::NotRunning => {}
            JobStop::Stopped => {
                tracing::error!(%operation_id, %job, "stopped the Job of a failed run; its pods are gone")
            }
            JobStop::StillRunning { pods } => tracing::error!(
                %operation_id,
                %job,
                ?pods,
                "pods of a stopped Job were still running after their grace period; a new operation on this runtime \
                 waits for them"
            ),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::run_log::{KeptLog, LogBudget};
    use crate::executor::JobStop;
    use crate::worker::step_error::StepOutcome;
    use crate::worker::steps::testing::{Fixture, Script};

    #[tokio::test]
    async fn a_failed_run_keeps_its_redacted_logs_and_stops_its_job_before_its_credentials_go() {
        let final_logs = Some(vec![("terraform-runner".to_owned(), "applying with the-secret\n".to_owned())]);
        let script = Script { final_logs, stop: JobStop::Stopped, ..Script::default() };
        let fixture = Fixture::with(crate::domain::OperationType::Provision, script).await;
        let mut run = fixture.run();
        assert_eq!(fixture.worker.clean_up(&mut run, true).await.expect("the step succeeds"), StepOutcome::Next);
        let names = &run.names;
        let expected = [
            format!("credential_values {}", names.credentials_secret),
            "open_final_logs".to_owned(),
            format!("stop_job {}", names.job),
            format!("delete_secret {}", names.credentials_secret),
            format!("delete_runner_identity {}", names.job),
        ];
        assert_eq!(fixture.calls(), expected);
        let id = fixture.claim.operation.id;
        let archived = fixture.worker.store.archived_logs(&[id]).await.unwrap().remove(&id).expect("kept logs");
        let kept: Vec<KeptLog> = archived.iter().map(|log| log.unpack(&LogBudget::new(1 << 20)).unwrap()).collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].text, "applying with [REDACTED]\n");
    }

    #[tokio::test]
    async fn a_clean_up_that_runs_again_keeps_the_first_archive_and_a_succeeded_run_stops_nothing() {
        let fixture = Fixture::provisioning().await;
        let id = fixture.claim.operation.id;
        let first = KeptLog { container: "terraform-runner".to_owned(), text: "first\n".to_owned(), printed_bytes: 6 };
        fixture.worker.store.archive_run_logs(id, &[first]).await.unwrap();
        let mut run = fixture.run();
        assert_eq!(fixture.worker.clean_up(&mut run, false).await.expect("the step succeeds"), StepOutcome::Next);
        let names = &run.names;
        let expected = [
            format!("credential_values {}", names.credentials_secret),
            format!("delete_secret {}", names.credentials_secret),
            format!("delete_runner_identity {}", names.job),
        ];
        assert_eq!(fixture.calls(), expected);
    }
}
