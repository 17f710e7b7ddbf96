//! Watching an operation as it changes (the GraphQL subscription): one poll of its record a second per operation,
//! shared by all its watchers, so that many subscribers of one operation cost one indexed read, not one each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use uuid::Uuid;

use super::{Result, Service};
use crate::domain::{Operation, OperationId};

/// How often a watched operation's record is read.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The pollers of the operations being watched; each entry's receiver is the one new watchers clone.
#[derive(Clone, Default)]
pub(super) struct Watches(Arc<Mutex<HashMap<Uuid, watch::Receiver<Operation>>>>);

/// An operation as it was when watching began, and its changes after that (`None` when it had already ended).
pub(super) struct OperationWatch {
    pub first: Operation,
    pub changes: Option<watch::Receiver<Operation>>,
}

/// What a watcher is shown a change of.
pub(super) fn shown_part(operation: &Operation) -> impl PartialEq + use<> {
    (operation.stage, operation.state, operation.message.clone())
}

impl Service {
    /// The operation now and, while it is active, a receiver of its newest record whenever its stage, state or
    /// message changes, until its final state (the last value). A failed read is tried again a second later.
    pub(super) async fn watch_operation(&self, operation_id: OperationId) -> Result<OperationWatch> {
        let first = self.visible_operation(operation_id).await?;
        if !first.state.is_active() {
            return Ok(OperationWatch { first, changes: None });
        }
        let mut polls = self.watches.0.lock().expect("watches lock");
        let changes = match polls.get(&first.id) {
            Some(changes) => changes.clone(),
            None => {
                let (sender, changes) = watch::channel(first.clone());
                polls.insert(first.id, changes.clone());
                tokio::spawn(poll(self.clone(), first.id, sender));
                changes
            }
        };
        Ok(OperationWatch { first, changes: Some(changes) })
    }
}

/// Reads the operation every [`POLL_INTERVAL`] and publishes what a watcher is shown; ends after its final state,
/// or once no watcher is left (only the entry in [`Watches`] holds a receiver then).
async fn poll(service: Service, operation_id: Uuid, sender: watch::Sender<Operation>) {
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    loop {
        tick.tick().await;
        let ended = match service.visible_operation(OperationId(operation_id)).await {
            Ok(operation) => {
                let ended = !operation.state.is_active();
                sender.send_if_modified(|shown| {
                    let changed = shown_part(shown) != shown_part(&operation);
                    *shown = operation;
                    changed
                });
                ended
            }
            Err(error) => {
                tracing::warn!(%operation_id, %error, "reading a watched operation failed; trying again");
                false
            }
        };
        // Under the lock, so that no watcher takes this poller's receiver as it ends.
        let mut polls = service.watches.0.lock().expect("watches lock");
        if ended || sender.receiver_count() <= 1 {
            polls.remove(&operation_id);
            return;
        }
    }
}
