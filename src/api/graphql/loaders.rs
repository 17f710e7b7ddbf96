//! Batched reads for the fields every item of a page may ask for: each is read once for all the items a response
//! shows, not once per item.

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::dataloader::Loader;
use uuid::Uuid;

use super::graphql_error;
use crate::service::{ArchivedLog, Service};

/// The kept logs of the operations whose `logs` a response shows, in one query. It only reads by operation id:
/// the operations were found (as their caller may see them) before their `logs` is resolved.
pub(super) struct ArchivedLogs {
    pub(super) service: Service,
}

impl Loader<Uuid> for ArchivedLogs {
    type Value = Arc<[ArchivedLog]>;
    type Error = async_graphql::Error;

    async fn load(&self, operation_ids: &[Uuid]) -> Result<HashMap<Uuid, Self::Value>, Self::Error> {
        let archived = self.service.archived_logs(operation_ids).await.map_err(graphql_error)?;
        Ok(archived.into_iter().map(|(id, logs)| (id, Arc::from(logs))).collect())
    }
}
