//! Finalize: a plan has nothing to finalize, a destroy removes the outputs Secret, and after an apply the outputs
//! Secret is trusted only when it holds the kubeconfig this run's own
//! pod reported (see `runner_contract::report`); its digest is then recorded, and the service serves that
//! content only.

use runner_contract::report::kubeconfig_digest;

use super::Run;
use crate::domain::{Component, FailureReason, LastError, RunAction};
use crate::worker::Worker;
use crate::worker::step_error::{StepError, StepOutcome};

impl Worker {
    pub(super) async fn finalize(&self, run: &Run<'_>) -> Result<StepOutcome, StepError> {
        match run.claim.operation.run_action() {
            RunAction::Plan => Ok(StepOutcome::Next),
            RunAction::Apply => self.check_outputs(run).await,
            RunAction::Destroy => {
                self.executor.delete_secret(&run.names.outputs_secret).await?;
                Ok(StepOutcome::Next)
            }
        }
    }

    async fn check_outputs(&self, run: &Run<'_>) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        let secret = &run.names.outputs_secret;
        let Some(kubeconfig) = self.executor.kubeconfig(&run.names).await? else {
            return Ok(StepOutcome::Fail(LastError::new(
                FailureReason::MissingOutputs,
                Component::TerraformRunner,
                format!("the Job succeeded but Secret {secret} with the kubeconfig does not exist"),
            )));
        };
        let reported = self.executor.run_report(&run.names).await?.and_then(|report| report.kubeconfig_sha256);
        let published = kubeconfig_digest(kubeconfig.as_bytes());
        if reported.as_deref() != Some(published.as_str()) {
            tracing::warn!(
                operation_id = %operation.id,
                secret,
                reported = reported.as_deref().unwrap_or("nothing"),
                published,
                "an outputs Secret does not hold the kubeconfig its run reported; it is not served"
            );
            return Ok(StepOutcome::Fail(LastError::new(
                FailureReason::UntrustedOutputs,
                Component::TerraformRunner,
                format!(
                    "Secret {secret} does not hold the kubeconfig the run's pod reported publishing (another writer \
                     replaced it, or the pod is gone); it is not served"
                ),
            )));
        }
        self.store.record_kubeconfig_digest(operation.id, run.claim.token, &published).await?;
        Ok(StepOutcome::Next)
    }
}
