//! RenderConfig: the Terraform configuration rendered for the runtime into the run's ConfigMap.

use super::Run;
use crate::domain::{Component, FailureReason, ProviderVersion};
use crate::worker::Worker;
use crate::worker::step_error::{StepError, StepOutcome};

impl Worker {
    pub(super) async fn render_config(&self, run: &mut Run<'_>) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        let runtime = run.runtime(&self.store).await?;
        let provider = match &operation.terraform_provider {
            Some(provider) => provider.clone(),
            None => ProviderVersion::pinned(runtime.cluster_config.topology.cloud()),
        };
        let rendered =
            self.renderer.render(runtime, operation.operation_type, operation.run_action(), &provider).map_err(
                |error| StepError::permanent(FailureReason::RenderFailed, Component::Renderer, error.to_string()),
            )?;
        self.executor.ensure_config(run.reference(), rendered.files).await?;
        Ok(StepOutcome::Next)
    }
}
