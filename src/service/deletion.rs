//! Deletion protection of a runtime, and the refusals of a deprovisioning it and the confirmation lead to.

use tracing::instrument;

use super::validation::{Invalid, InvalidReason};
use super::{Conflict, Error, Result, RuntimeStatus, Service};
use crate::domain::RuntimeId;
use crate::domain::deletion::DeletionRefusal;
use crate::store;

/// The answer to a deprovisioning the deletion rules refuse: 409 for a protected runtime or a force it does not
/// need, an invalid `confirm` otherwise.
pub(super) fn deletion_refused(runtime_id: RuntimeId, refusal: DeletionRefusal) -> Error {
    match refusal {
        DeletionRefusal::Protected => Error::Conflict {
            conflict: Conflict::DeletionProtected,
            message: format!("runtime {runtime_id}: {refusal}"),
        },
        DeletionRefusal::ConfirmationMissing => {
            Invalid::new(InvalidReason::Required, "confirm", refusal.to_string()).into()
        }
        DeletionRefusal::ConfirmationMismatch => {
            Invalid::new(InvalidReason::Conflict, "confirm", refusal.to_string()).into()
        }
        DeletionRefusal::ForceNotConfirmed => {
            Invalid::new(InvalidReason::Required, "confirm", refusal.to_string()).into()
        }
        DeletionRefusal::ForceNotNeeded => {
            Error::Conflict { conflict: Conflict::ForceNotAllowed, message: format!("runtime {runtime_id}: {refusal}") }
        }
    }
}

impl Service {
    /// Turns a live runtime's deletion protection on or off (no operation: it is the provisioner's own record).
    #[instrument(skip_all, fields(runtime_id = %runtime_id, enabled))]
    pub async fn set_deletion_protection(&self, runtime_id: RuntimeId, enabled: bool) -> Result<RuntimeStatus> {
        let status = self.latest_to_change(runtime_id).await?;
        let deprovisioned = || Error::Conflict {
            conflict: Conflict::AlreadyDeprovisioned,
            message: format!("runtime {runtime_id} is already deprovisioned"),
        };
        if status.runtime.deleted_at.is_some() {
            return Err(deprovisioned());
        }
        if !self.store.set_deletion_protection(runtime_id.0, enabled, store::now()).await? {
            return Err(deprovisioned());
        }
        tracing::info!(enabled, "deletion protection changed");
        self.runtime_status(runtime_id).await
    }
}
