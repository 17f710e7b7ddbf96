//! An operation's events for a subscriber: its record whenever what a watcher is shown changes, and with the
//! runner's log lines between them, until the operation ends. One stream that any adapter can serve.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::watch;

use super::operation_changes::{OperationWatch, shown_part};
use super::{Result, Service};
use crate::domain::{Operation, OperationId};

/// What happened to an operation.
#[derive(Debug)]
pub enum OperationEvent {
    /// Its stage, state or message changed (the first event shows it as it is).
    Changed(Box<Operation>),
    /// Its runner printed a line.
    LogLine(String),
}

/// Where a subscriber's stream is between two events.
struct Following {
    /// The operation as it was when the subscription began, until it is sent.
    first: Option<Operation>,
    /// Its changes; `None` once it ended.
    changes: Option<watch::Receiver<Operation>>,
    log_lines: Option<BoxStream<'static, Result<String>>>,
    shown: Option<Operation>,
}

impl Service {
    /// The operation as it is, then its changes and (with `logs`) its runner's log lines, ending after its final
    /// state. The stream ends when the subscriber drops it; a log that ends or breaks leaves the changes going on.
    pub async fn operation_events(
        &self,
        operation_id: OperationId,
        logs: bool,
    ) -> Result<BoxStream<'static, OperationEvent>> {
        let OperationWatch { first, changes } = self.watch_operation(operation_id).await?;
        let log_lines = match (logs, &changes) {
            (true, Some(_)) => self.follow_operation_log(operation_id).await.ok(),
            _ => None,
        };
        let following = Following { first: Some(first), changes, log_lines, shown: None };
        Ok(futures::stream::unfold(following, next_event).boxed())
    }
}

async fn next_event(mut following: Following) -> Option<(OperationEvent, Following)> {
    if let Some(first) = following.first.take() {
        following.shown = Some(first.clone());
        return Some((OperationEvent::Changed(Box::new(first)), following));
    }
    loop {
        let changes = following.changes.as_mut()?;
        tokio::select! {
            line = async { following.log_lines.as_mut().expect("only polled with a log").next().await }, if following.log_lines.is_some() => match line {
                Some(Ok(line)) => return Some((OperationEvent::LogLine(line.trim_end().to_owned()), following)),
                // The log ended or broke: the changes go on.
                _ => following.log_lines = None,
            },
            changed = changes.changed() => {
                // The watch ends after the operation's final state, which was the last change.
                if changed.is_err() {
                    return None;
                }
                let operation = changes.borrow_and_update().clone();
                if following.shown.as_ref().is_some_and(|shown| shown_part(shown) == shown_part(&operation)) {
                    continue;
                }
                if !operation.state.is_active() {
                    following.changes = None;
                    following.log_lines = None;
                }
                following.shown = Some(operation.clone());
                return Some((OperationEvent::Changed(Box::new(operation)), following));
            },
        }
    }
}
