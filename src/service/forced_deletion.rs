//! A forced deprovisioning: the way out for a runtime no run can destroy any more, because the cloud or
//! auth-service refuses its credential. It marks the runtime deleted without a run and keeps what the last apply
//! recorded of the cluster, which may remain in the cloud.

use runner_contract::failure::RUNTIME_ID_TAG;
use tracing::instrument;

use super::changes::Requested;
use super::deletion::deletion_refused;
use super::idempotency::Keyed;
use super::status::Latest;
use super::{Result, Service, executor_error};
use crate::domain::deletion::{self, Forced};
use crate::domain::run::{RunNames, Stage};
use crate::domain::{Operation, OperationState, OperationType, RuntimeId};
use crate::store;

impl Service {
    /// Marks the runtime deleted, once [`deletion::check_force`] and its protection allow it, with an operation
    /// that has ended as it is recorded. A repeated request gets that operation, and removes the outputs Secret
    /// again if removing it failed the first time.
    #[instrument(skip_all, fields(runtime_id = %runtime_id))]
    pub(super) async fn force_deprovisioning(
        &self,
        runtime_id: RuntimeId,
        status: Latest,
        confirm: Option<&str>,
        requested_by: &str,
        keyed: Option<&Keyed<'_>>,
    ) -> Result<Requested> {
        let names = RunNames::new(OperationType::Deprovision, runtime_id.0);
        if status.runtime.deleted_at.is_some() {
            if status.last_operation.forced.is_some() {
                self.remove_outputs(&names).await;
            }
            return Ok(Requested::Done(status.last_operation));
        }
        let refused = |refusal| deletion_refused(runtime_id, refusal);
        deletion::check_force(&status.runtime, &status.last_operation, confirm).map_err(refused)?;
        deletion::check_protection(&status.runtime).map_err(refused)?;
        self.check_changeable(&status).await?;
        let recorded = match &self.executor {
            Some(executor) => executor.recorded_resources(&names).await.map_err(executor_error)?,
            None => None,
        };
        let forced = Forced { inventory_recorded: recorded.is_some(), remaining: recorded.unwrap_or_default() };
        let now = store::now();
        let provider = self.state_provider(&status.runtime).await?;
        let operation = Operation {
            state: OperationState::Succeeded,
            stage: Stage::Done,
            message: forced_message(runtime_id, &forced),
            requested_by: Some(requested_by.to_owned()),
            started_at: Some(now),
            finished_at: Some(now),
            forced: Some(forced),
            ..Operation::queued(runtime_id.0, OperationType::Deprovision, provider, now)
        };
        let requested = self.queue(runtime_id, operation, keyed).await?;
        if matches!(requested, Requested::Queued(_)) {
            tracing::warn!(
                remaining = requested.operation().forced.as_ref().map(|forced| forced.remaining.len()),
                "runtime deprovisioned by force"
            );
            self.remove_outputs(&names).await;
        }
        Ok(requested)
    }

    /// The outputs Secret holds a kubeconfig of a cluster the provisioner no longer serves. A failure is logged:
    /// the runtime is deleted already, and a repeated forced request tries again.
    async fn remove_outputs(&self, names: &RunNames) {
        let Some(executor) = &self.executor else { return };
        if let Err(error) = executor.delete_secret(&names.outputs_secret).await {
            tracing::warn!(secret = %names.outputs_secret, %error, "removing the outputs Secret failed; a repeated forced deprovisioning tries again");
        }
    }
}

/// What the forced operation says: nothing was destroyed, and where to look for what remains.
fn forced_message(runtime_id: RuntimeId, forced: &Forced) -> String {
    let tag = format!("{RUNTIME_ID_TAG}={runtime_id}");
    let known = if forced.inventory_recorded {
        format!(
            "the last apply recorded {} cloud resources, listed in forced.remaining, which may remain",
            forced.remaining.len()
        )
    } else {
        "no apply recorded what the cluster is made of".to_owned()
    };
    format!(
        "Deprovisioned by force without a run: nothing was destroyed in the cloud; {known}. Everything the cluster \
         had carries the tag {tag}."
    )
}
