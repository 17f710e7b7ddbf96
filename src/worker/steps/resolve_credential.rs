//! ResolveCredential: the run's credential from auth-service, resolved within the runtime's tenant and checked
//! against its configuration, into its Secret.

use super::Run;
use crate::domain::{Component, FailureReason, LastError};
use crate::worker::Worker;
use crate::worker::cluster::RunCluster;
use crate::worker::step_error::{StepError, StepOutcome};

impl<C: RunCluster> Worker<C> {
    pub(super) async fn resolve_credential(&self, run: &mut Run<'_>) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        // Once per run: after a restart the Secret written earlier is reused. On the first claim no earlier claim
        // can have written it, which saves a request per run.
        if operation.claims > 1 && self.executor.credentials_exist(&run.names, operation.id).await? {
            run.redact = self.executor.credential_values(&run.names).await?;
            return Ok(StepOutcome::Next);
        }
        let runtime = run.runtime(&self.store).await?;
        let config = &runtime.cluster_config;
        let resolved = self.credentials.credential(&config.credential_id, runtime.tenant.as_ref()).await?;
        let credential = &resolved.credential;
        // The credential may have changed in auth-service since the request was checked.
        if let Some(mismatch) = config.credential_mismatch(credential, &resolved.project_ids) {
            let error = LastError::new(FailureReason::CredentialMismatch, Component::AuthService, mismatch.to_string());
            return Ok(StepOutcome::Fail(error));
        }
        run.redact = credential.secret_values();
        self.executor.ensure_credentials(run.reference(), &credential.secret_files()).await?;
        Ok(StepOutcome::Next)
    }
}

#[cfg(test)]
mod tests {
    use crate::worker::step_error::StepOutcome;
    use crate::worker::steps::testing::{Fixture, Script};

    #[tokio::test]
    async fn a_resumed_run_reuses_the_credentials_its_earlier_claim_wrote() {
        let script = Script { credentials_exist: true, ..Script::default() };
        let mut fixture = Fixture::with(crate::domain::OperationType::Provision, script).await;
        fixture.claim.operation.claims = 2;
        let mut run = fixture.run();
        // auth-service does not answer: the step succeeds only because it does not ask it.
        let outcome = fixture.worker.resolve_credential(&mut run).await.expect("the step succeeds");
        assert_eq!(outcome, StepOutcome::Next);
        assert_eq!(run.redact, ["the-secret"]);
        let secret = &run.names.credentials_secret;
        assert_eq!(fixture.calls(), [format!("credentials_exist {secret}"), format!("credential_values {secret}")]);
    }

    #[tokio::test]
    async fn a_first_claim_asks_auth_service_and_its_outage_is_retried_with_nothing_written() {
        let fixture = Fixture::provisioning().await;
        let mut run = fixture.run();
        let error = fixture.worker.resolve_credential(&mut run).await.expect_err("auth-service does not answer");
        assert!(error.transient, "{error:?}");
        assert_eq!(error.error.component, crate::domain::Component::AuthService, "{error:?}");
        assert!(fixture.calls().is_empty(), "{:?}", fixture.calls());
    }
}
