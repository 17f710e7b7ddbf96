//! What the reconciler of `Runtime` resources follows instead of polling each runtime: the writes to the operations
//! of the runtimes resources manage, by any replica's worker or API.

use chrono::{DateTime, Utc};

use super::{Result, Service};
use crate::domain::managed_by::ManagedOperationChange;

impl Service {
    /// The writes after `since` to operations of runtimes a resource manages (of this service's tenant, if it has
    /// one), oldest first, at most `limit`.
    pub async fn managed_operation_changes(
        &self,
        since: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ManagedOperationChange>> {
        let mut changes = self.store.managed_operation_changes(since, limit).await?;
        if let Some(tenant) = &self.tenant {
            changes.retain(|change| change.resource.namespace == tenant.as_str());
        }
        Ok(changes)
    }
}
