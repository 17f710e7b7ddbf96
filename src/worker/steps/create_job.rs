//! CreateJob: the run's Job, once no earlier operation's Job on the runtime is running.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Run;
use crate::domain::{Component, FailureReason, LastError};
use crate::store;
use crate::worker::JOB_DEADLINE_MARGIN;
use crate::worker::Worker;
use crate::worker::step_error::{StepError, StepOutcome};

impl Worker {
    pub(super) async fn create_job(
        &self,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
    ) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        // One Terraform per runtime: a Job of an earlier operation that is still running (its run ended without
        // stopping it, or another replica's) must end first. Waiting is transient: it is retried until the deadline.
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
        // The Job's own deadline is a backstop for a service that is gone: the worker's comes first and stops the
        // Job gracefully, with the operation's timeout in its message.
        let remaining = (deadline - store::now()).to_std().unwrap_or(Duration::from_secs(1));
        let action = operation.run_action();
        self.executor.ensure_job(&self.modules, action, run.reference(), remaining + JOB_DEADLINE_MARGIN).await?;
        Ok(StepOutcome::Next)
    }
}
