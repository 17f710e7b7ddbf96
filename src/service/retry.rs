//! Retrying a failed operation: a new operation of the same type and target on the runtime whose last operation
//! it is (a provisioning resumes against the state it left, an upgrade plans again), unless its failure is one a
//! new run cannot fix.

use tracing::instrument;

use super::changes::check_provisioned;
use super::deletion::deletion_refused;
use super::idempotency::fingerprint;
use super::{Conflict, Error, Latest, Requested, Result, Service};
use crate::domain::deletion;
use crate::domain::retry::{Retryable, retried_already, retry_refusal};
use crate::domain::{Operation, OperationId, OperationType, RuntimeId};
use crate::store;

fn not_retryable(message: String) -> Error {
    Error::Conflict { conflict: Conflict::NotRetryable, message }
}

impl Service {
    /// Queues a retry of `operation_id` for `requested_by`. A repeated request gets the retry that runs or
    /// succeeded; a retry that failed too is retried in its own right.
    #[instrument(skip_all, fields(operation_id = %operation_id))]
    pub async fn retry_operation(
        &self,
        operation_id: OperationId,
        requested_by: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Requested> {
        let failed = self.visible_operation(operation_id).await?;
        let request = ("Retry", operation_id.0);
        let (keyed, earlier) = self.keyed(requested_by, idempotency_key, fingerprint(&request)).await?;
        if let Some(operation) = earlier {
            return Ok(Requested::Replayed(operation));
        }
        let status = self.latest(RuntimeId(failed.runtime_id)).await?;
        let last = &status.last_operation;
        if retried_already(&failed, last) {
            let retry = last.clone();
            return Ok(if retry.state.is_active() { Requested::Running(retry) } else { Requested::Done(retry) });
        }
        if let Some(refusal) = retry_refusal(&failed, last) {
            return Err(not_retryable(refusal.to_string()));
        }
        self.check_changeable(&status).await?;
        self.check_retry_target(&status, &failed).await?;
        let provider = match &failed.terraform_provider {
            Some(provider) => provider.clone(),
            None => self.state_provider(&status.runtime).await?,
        };
        let operation = Operation {
            target_config: failed.target_config.clone(),
            dry_run: failed.dry_run,
            approval_policy: failed.approval_policy,
            requested_by: Some(requested_by.to_owned()),
            retry_of: Some(failed.id),
            ..Operation::queued(failed.runtime_id, failed.operation_type, provider, store::now())
        };
        // A chain that failed resumes from the minor the runtime last reached.
        let operation = operation.chained_from(&status.runtime.cluster_config);
        self.queue(RuntimeId(failed.runtime_id), operation, keyed.as_ref()).await
    }

    /// What the failed operation's type needs of the runtime now, as a new request of that type would: a cluster
    /// to change, awake or hibernated as the change expects, and a credential that passes when it was the cause.
    async fn check_retry_target(&self, status: &Latest, failed: &Operation) -> Result<()> {
        let runtime = &status.runtime;
        match failed.operation_type {
            OperationType::Upgrade | OperationType::Hibernate | OperationType::RenewCertificates
                if runtime.hibernated =>
            {
                return Err(Error::Conflict {
                    conflict: Conflict::Hibernated,
                    message: format!("runtime {} is hibernated; wake it up first", runtime.id),
                });
            }
            OperationType::Upgrade | OperationType::Hibernate | OperationType::RenewCertificates => {
                check_provisioned(status, "change")?
            }
            OperationType::WakeUp if !runtime.hibernated => {
                return Err(Error::Conflict {
                    conflict: Conflict::NotHibernated,
                    message: format!("runtime {} is not hibernated; there is nothing to wake up", runtime.id),
                });
            }
            OperationType::Deprovision => deletion::check_protection(runtime)
                .map_err(|refusal| deletion_refused(RuntimeId(runtime.id), refusal))?,
            OperationType::WakeUp | OperationType::Provision => {}
        }
        let cause = failed.last_error.as_ref().map(|error| error.reason);
        if cause.map(|reason| reason.retryable()) != Some(Retryable::OnceTheCredentialPasses) {
            return Ok(());
        }
        let config = failed.target_config.as_ref().unwrap_or(&runtime.cluster_config);
        // The runtime's tenant, as the worker will resolve it (a caller without a tenant may retry any runtime).
        match self.check_credential(config, runtime.tenant.as_ref()).await {
            Err(Error::Invalid(refused)) => Err(not_retryable(format!(
                "operation {} failed with reason {} and the credential is still refused: {}",
                failed.id,
                cause.map(|reason| reason.as_str()).unwrap_or_default(),
                refused.first.message
            ))),
            checked => checked,
        }
    }
}
