//! RenderConfig: the Terraform configuration rendered for the runtime into the run's ConfigMap.

use super::Run;
use crate::domain::{Component, FailureReason, OperationType, ProviderVersion, Runtime};
use crate::render::RunInputs;
use crate::worker::Worker;
use crate::worker::cluster::RunCluster;
use crate::worker::step_error::{StepError, StepOutcome};

impl<C: RunCluster> Worker<C> {
    pub(super) async fn render_config(&self, run: &mut Run<'_>) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        let runtime = run.runtime(&self.store).await?;
        let provider = match &operation.terraform_provider {
            Some(provider) => provider.clone(),
            None => ProviderVersion::pinned(runtime.cluster_config.topology.cloud()),
        };
        let (operation_type, action, approved_plan) =
            (operation.operation_type, operation.run_action(), operation.approved_plan());
        // A request's own approval policy holds for its run only.
        let overridden;
        let runtime = match operation.approval_policy {
            Some(policy) if policy != runtime.approval_policy => {
                overridden = Runtime { approval_policy: policy, ..runtime.clone() };
                &overridden
            }
            _ => runtime,
        };
        let renewal = (operation_type == OperationType::RenewCertificates).then(|| operation.id.to_string());
        let inputs = RunInputs { approved_plan, certificate_renewal: renewal.as_deref() };
        let rendered = self.renderer.render(runtime, operation_type, action, &provider, inputs).map_err(|error| {
            StepError::permanent(FailureReason::RenderFailed, Component::Renderer, error.to_string())
        })?;
        self.executor.ensure_config(run.reference(), rendered.files).await?;
        Ok(StepOutcome::Next)
    }
}

#[cfg(test)]
mod tests {
    use crate::worker::step_error::StepOutcome;
    use crate::worker::steps::testing::Fixture;

    #[tokio::test]
    async fn the_rendered_configuration_goes_into_the_runs_config_map() {
        let fixture = Fixture::provisioning().await;
        let mut run = fixture.run();
        let outcome = fixture.worker.render_config(&mut run).await.expect("the step succeeds");
        assert_eq!(outcome, StepOutcome::Next);
        let calls = fixture.calls();
        assert_eq!(calls.len(), 1, "{calls:?}");
        let config_map = &run.names.config_map;
        assert!(calls[0].starts_with(&format!("ensure_config {config_map} [")), "{calls:?}");
        assert!(calls[0].contains("\"runner.json\""), "the runner's manifest is rendered too: {calls:?}");
    }
}
