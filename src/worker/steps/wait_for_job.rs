//! WaitForJob: the Job followed through the cache until it ends or the deadline passes.

use chrono::{DateTime, Utc};

use super::Run;
use super::timeout_error;
use crate::domain::run::JobState;
use crate::domain::{Component, FailureReason, LastError};
use crate::store;
use crate::worker::Worker;
use crate::worker::step_error::{StepError, StepOutcome};

impl Worker {
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
                    self.store.record_plan_summary(operation.id, run.claim.token, &report.plan).await?;
                }
                return Ok(StepOutcome::Next);
            }
            JobState::Running => timeout_error(operation.operation_type, self.timeout_of(operation.operation_type)),
            JobState::Missing => LastError::new(
                FailureReason::JobMissing,
                Component::Kubernetes,
                format!("Job {} disappeared before it finished", run.names.job),
            ),
            JobState::Failed { reason, message } => LastError::new(reason, Component::TerraformRunner, message),
        };
        Ok(StepOutcome::Fail(error))
    }
}
