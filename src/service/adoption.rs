//! A `Runtime` resource taking over a runtime created through the APIs (`spec.adopt`): from then on only that
//! object changes it.

use super::{Conflict, Error, Result, RuntimeStatus, Service};
use crate::domain::RuntimeId;
use crate::service::validation::{Invalid, InvalidReason};
use crate::store;

impl Service {
    /// Makes this service's resource the manager of `runtime_id`, a live runtime of its tenant with the object's
    /// name that no other resource manages; adopting it again changes nothing.
    pub async fn adopt_runtime(&self, runtime_id: RuntimeId) -> Result<RuntimeStatus> {
        let Some(resource) = &self.resource else {
            let message = "only a Runtime resource adopts a runtime";
            return Err(Error::Invalid(Invalid::new(InvalidReason::NotAllowed, "spec.adopt", message).into()));
        };
        let latest = self.latest_to_change(runtime_id).await?;
        if latest.runtime.name != resource.name {
            let message = format!(
                "runtime {} is named {:?}: the Runtime that adopts it must have its name",
                runtime_id.0, latest.runtime.name
            );
            return Err(Error::Invalid(Invalid::new(InvalidReason::Conflict, "spec.adopt", message).into()));
        }
        if !self.store.adopt_runtime(runtime_id.0, resource, store::now()).await? {
            return Err(Error::Conflict {
                conflict: Conflict::AlreadyDeprovisioned,
                message: format!("runtime {} is deprovisioned or managed by another Runtime", runtime_id.0),
            });
        }
        tracing::info!(runtime_id = %runtime_id.0, resource = %resource, "a Runtime adopted the runtime");
        self.runtime_status(runtime_id).await
    }
}
