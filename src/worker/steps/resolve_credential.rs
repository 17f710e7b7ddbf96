//! ResolveCredential: the run's credential from auth-service, checked against the topology, into its Secret.

use super::Run;
use crate::domain::{Component, FailureReason, LastError};
use crate::worker::Worker;
use crate::worker::step_error::{StepError, StepOutcome};

impl Worker {
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
        let credential = self.auth.credential(&config.credential_id).await?;
        // The credential may have changed in auth-service since the request was checked.
        let mismatch =
            config.topology.credential_mismatch(&config.credential_id, credential.kind().as_str(), credential.cloud());
        if let Some(message) = mismatch {
            let error = LastError::new(FailureReason::CredentialMismatch, Component::AuthService, message);
            return Ok(StepOutcome::Fail(error));
        }
        run.redact = credential.secret_values();
        self.executor.ensure_credentials(run.reference(), &credential.secret_files()).await?;
        Ok(StepOutcome::Next)
    }
}
