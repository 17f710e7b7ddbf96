//! Finalize: a plan has nothing to finalize, a destroy removes the outputs Secret (and the kubeconfig last minted
//! from it), an apply whose plan the runner
//! saved for approval holds the run, and after an apply the outputs Secret is trusted only when it holds the
//! kubeconfig this run's own pod reported (see `runner_contract::report`); its digest is then recorded, and the
//! service serves that content only.

use runner_contract::report::kubeconfig_digest;

use super::Run;
use crate::domain::{Component, FailureReason, LastError, RunAction, kubeconfig_lifetime};
use crate::worker::Worker;
use crate::worker::cluster::RunCluster;
use crate::worker::step_error::{StepError, StepOutcome};

impl<C: RunCluster> Worker<C> {
    pub(super) async fn finalize(&self, run: &Run<'_>) -> Result<StepOutcome, StepError> {
        match run.claim.operation.run_action() {
            RunAction::Plan => Ok(StepOutcome::Next),
            RunAction::Apply => {
                let report = self.executor.run_report(&run.names).await?;
                let saved_plan = report.as_ref().and_then(|report| report.saved_plan_sha256.as_ref());
                if saved_plan.is_some() && !run.names.applies_approved_plan {
                    return Ok(StepOutcome::HoldForApproval);
                }
                self.check_outputs(run, report.and_then(|report| report.kubeconfig_sha256)).await
            }
            RunAction::Destroy => {
                self.executor.delete_secret(&run.names.outputs_secret).await?;
                let runtime_id = run.claim.operation.runtime_id;
                self.executor.delete_secret(&kubeconfig_lifetime::kept_secret_name(runtime_id)).await?;
                Ok(StepOutcome::Next)
            }
        }
    }

    /// `reported`: the digest of the kubeconfig the run's pod reported publishing.
    async fn check_outputs(&self, run: &Run<'_>, reported: Option<String>) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        let secret = &run.names.outputs_secret;
        let Some(kubeconfig) = self.executor.kubeconfig(&run.names).await? else {
            return Ok(StepOutcome::Fail(LastError::new(
                FailureReason::MissingOutputs,
                Component::TerraformRunner,
                format!("the Job succeeded but Secret {secret} with the kubeconfig does not exist"),
            )));
        };
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

#[cfg(test)]
mod tests {
    use runner_contract::report::{RunReport, kubeconfig_digest};

    use crate::domain::{FailureReason, OperationType, PlanSummary, kubeconfig_lifetime};
    use crate::worker::step_error::StepOutcome;
    use crate::worker::steps::testing::{Fixture, Script};

    async fn finalize(operation_type: OperationType, kubeconfig: Option<&str>, reported: Option<&str>) -> Fixture {
        let report = RunReport {
            kubeconfig_sha256: reported.map(|text| kubeconfig_digest(text.as_bytes())),
            ..RunReport::default()
        };
        let script = Script { kubeconfig: kubeconfig.map(str::to_owned), report: Some(report), ..Script::default() };
        Fixture::with(operation_type, script).await
    }

    #[tokio::test]
    async fn a_destroy_deletes_the_outputs_secret_and_the_kubeconfig_minted_from_it() {
        let fixture = finalize(OperationType::Deprovision, None, None).await;
        let run = fixture.run();
        assert_eq!(fixture.worker.finalize(&run).await.expect("the step succeeds"), StepOutcome::Next);
        let kept = kubeconfig_lifetime::kept_secret_name(run.claim.operation.runtime_id);
        assert_eq!(
            fixture.calls(),
            [format!("delete_secret {}", run.names.outputs_secret), format!("delete_secret {kept}")]
        );
    }

    #[tokio::test]
    async fn an_apply_without_its_kubeconfig_fails_with_missing_outputs() {
        let fixture = finalize(OperationType::Provision, None, None).await;
        let outcome = fixture.worker.finalize(&fixture.run()).await.expect("the step succeeds");
        let StepOutcome::Fail(error) = outcome else { panic!("{outcome:?}") };
        assert_eq!(error.reason, FailureReason::MissingOutputs);
    }

    #[tokio::test]
    async fn an_outputs_secret_holding_another_kubeconfig_than_the_pod_reported_is_not_trusted() {
        let fixture = finalize(OperationType::Provision, Some("written by someone else"), Some("published")).await;
        let outcome = fixture.worker.finalize(&fixture.run()).await.expect("the step succeeds");
        let StepOutcome::Fail(error) = outcome else { panic!("{outcome:?}") };
        assert_eq!(error.reason, FailureReason::UntrustedOutputs);
        let runtime_id = fixture.claim.operation.runtime_id;
        assert_eq!(
            fixture.worker.store.checked_kubeconfig_digest(runtime_id).await.unwrap(),
            None,
            "nothing is served"
        );
    }

    #[tokio::test]
    async fn a_plan_saved_for_approval_holds_the_run_and_publishes_nothing() {
        let report = RunReport::awaiting_approval(PlanSummary::default(), "a".repeat(64));
        let script = Script { report: Some(report), ..Script::default() };
        let fixture = Fixture::with(OperationType::Upgrade, script).await;
        assert_eq!(
            fixture.worker.finalize(&fixture.run()).await.expect("the step succeeds"),
            StepOutcome::HoldForApproval
        );
        let runtime_id = fixture.claim.operation.runtime_id;
        assert_eq!(fixture.worker.store.checked_kubeconfig_digest(runtime_id).await.unwrap(), None);
    }

    #[tokio::test]
    async fn the_kubeconfig_the_pod_reported_is_recorded_as_the_one_to_serve() {
        let fixture = finalize(OperationType::Provision, Some("published"), Some("published")).await;
        assert_eq!(fixture.worker.finalize(&fixture.run()).await.expect("the step succeeds"), StepOutcome::Next);
        let runtime_id = fixture.claim.operation.runtime_id;
        let checked = fixture.worker.store.checked_kubeconfig_digest(runtime_id).await.unwrap();
        assert_eq!(checked, Some(kubeconfig_digest(b"published")));
    }
}
