//! What looks a Runtime over again when its runtime's operation changes (claimed, a stage, ended, approved), by
//! whichever replica wrote it: one read a second of the operations written since the last read, shared by every
//! watched scope, instead of each object polling its runtime while an operation runs.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use futures::Stream;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::broadcast;

use crate::domain::managed_by::{ManagedOperationChange, ResourceRef};
use crate::service::Service;

use super::resource::RuntimeResource;

/// How often the operations are read.
const READ_EVERY: Duration = Duration::from_secs(1);
/// How far before the newest write seen each read looks again: a write stamped by a replica whose clock is behind,
/// or committed after a later-stamped one, is still seen (and one seen before is not told twice).
const OVERLAP: TimeDelta = TimeDelta::seconds(10);
/// The most writes one read takes; the next read goes on from the last.
const READ_LIMIT: u64 = 500;
/// The objects told of and not yet taken by a slow controller; a controller further behind misses some (the
/// object's periodic look catches them up).
const CAPACITY: usize = 1024;

/// Where the feed is: the newest write seen, and the writes already told within the overlap.
#[derive(Debug)]
struct Cursor {
    newest: DateTime<Utc>,
    told: HashSet<(uuid::Uuid, DateTime<Utc>)>,
}

impl Cursor {
    fn starting_at(now: DateTime<Utc>) -> Self {
        Cursor { newest: now - OVERLAP, told: HashSet::new() }
    }

    /// Where the next read starts: never after the reader's own clock, so that a write stamped in the future by a
    /// replica whose clock is ahead does not hide the others' writes.
    fn read_from(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.newest.min(now) - OVERLAP
    }

    /// The resources of the writes not told before, each once per read; forgets what is before the next read.
    fn take(&mut self, changes: Vec<ManagedOperationChange>, now: DateTime<Utc>) -> Vec<ResourceRef> {
        let mut resources = Vec::new();
        for change in changes {
            self.newest = self.newest.max(change.updated_at);
            if self.told.insert((change.operation_id.0, change.updated_at)) && !resources.contains(&change.resource) {
                resources.push(change.resource);
            }
        }
        let from = self.read_from(now);
        self.told.retain(|(_, updated_at)| *updated_at > from);
        resources
    }
}

/// The sender every scope's trigger subscribes to.
pub(super) fn channel() -> broadcast::Sender<ResourceRef> {
    broadcast::channel(CAPACITY).0
}

/// Reads the operations written every [`READ_EVERY`] and tells `sender` the resources they belong to, until
/// dropped. A failed read is said once, and its end once.
pub(super) async fn follow(service: Service, sender: broadcast::Sender<ResourceRef>) {
    let mut cursor = Cursor::starting_at(Utc::now());
    let mut failing = false;
    let mut tick = tokio::time::interval(READ_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Utc::now();
        match service.managed_operation_changes(cursor.read_from(now), READ_LIMIT).await {
            Ok(changes) => {
                if std::mem::take(&mut failing) {
                    tracing::info!("the Runtimes' operations are read again");
                }
                for resource in cursor.take(changes, now) {
                    // No subscriber: no scope runs now, and each looks at every object when it starts.
                    let _ = sender.send(resource);
                }
            }
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, "reading the Runtimes' operations failed; trying again every second");
            }
            Err(_) => {}
        }
    }
}

/// The objects of `namespace` (of every namespace with `None`) whose operations changed, as a controller's trigger.
pub(super) fn triggers(
    sender: &broadcast::Sender<ResourceRef>,
    namespace: Option<String>,
) -> impl Stream<Item = ObjectRef<RuntimeResource>> + Send + 'static {
    futures::stream::unfold(sender.subscribe(), move |mut receiver| {
        let namespace = namespace.clone();
        async move {
            loop {
                match receiver.recv().await {
                    Ok(resource) if namespace.as_ref().is_none_or(|only| *only == resource.namespace) => {
                        let object = ObjectRef::new(&resource.name).within(&resource.namespace);
                        return Some((object, receiver));
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "the Runtimes' reconciler fell behind the operations' changes");
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OperationId;

    fn change(name: &str, operation: u128, at: DateTime<Utc>) -> ManagedOperationChange {
        let resource = ResourceRef { namespace: "team-a".to_owned(), name: name.to_owned() };
        ManagedOperationChange { resource, operation_id: OperationId(uuid::Uuid::from_u128(operation)), updated_at: at }
    }

    #[test]
    fn each_write_is_told_once_though_reads_overlap() {
        let now = Utc::now();
        let mut cursor = Cursor::starting_at(now);
        let first = vec![change("blue", 1, now), change("blue", 1, now + TimeDelta::milliseconds(5))];
        assert_eq!(cursor.take(first.clone(), now).len(), 1, "one object per read");
        assert!(cursor.take(first, now).is_empty(), "the same writes read again");
        let later = change("blue", 1, now + TimeDelta::seconds(1));
        assert_eq!(cursor.take(vec![later], now).len(), 1, "a later write of the same operation");
    }

    #[test]
    fn a_write_stamped_late_or_by_a_clock_behind_is_still_read() {
        let now = Utc::now();
        let mut cursor = Cursor::starting_at(now);
        cursor.take(vec![change("blue", 1, now)], now);
        let behind = now - TimeDelta::seconds(3);
        assert!(cursor.read_from(now) < behind);
        assert_eq!(cursor.take(vec![change("green", 2, behind)], now).len(), 1);
    }

    #[test]
    fn a_write_stamped_in_the_future_does_not_move_the_reads_past_the_others() {
        let now = Utc::now();
        let mut cursor = Cursor::starting_at(now);
        cursor.take(vec![change("blue", 1, now + TimeDelta::minutes(5))], now);
        assert!(cursor.read_from(now) <= now - OVERLAP, "reads start from the reader's own clock");
    }
}
