//! The subscription: an operation's status changes and its runner's log lines, until the operation ends.

use async_graphql::{Context, SimpleObject};

use super::{GraphQLResult, OperationView, authorize, graphql_error, operation_id, service};
use crate::api::authentication::Identity;
use crate::api::authorization::{Action, Subresource, Verb};
use crate::domain::Operation;
use crate::service::{OperationWatch, Service, shown_part};

/// What happened to an operation: its status when its stage, state or message changed, or a line the runner
/// printed.
#[derive(SimpleObject)]
pub struct OperationEvent {
    /// Set when the operation's stage, state or message changed (the first event shows it as it is).
    status: Option<OperationView>,
    /// A line of the runner's log (only with `logs: true`).
    log_line: Option<String>,
}

/// The event that shows `operation` as it is now, with its stages.
async fn status_event(service: &Service, operation: Operation) -> GraphQLResult<OperationEvent> {
    let status = service.with_stages(operation).await.map_err(graphql_error)?;
    Ok(OperationEvent { status: Some(status.into()), log_line: None })
}

pub struct Subscription;

#[async_graphql::Subscription]
impl Subscription {
    /// The operation's changes as they happen, and with `logs: true` the runner's log lines; it ends with the
    /// operation's final state. Over WebSocket (graphql-transport-ws) at the GraphQL endpoint; the bearer token
    /// goes in the `connection_init` payload as `{"Authorization": "Bearer <token>"}`.
    async fn operation_events(
        &self,
        context: &Context<'_>,
        id: String,
        #[graphql(default)] logs: bool,
    ) -> async_graphql::Result<impl futures::Stream<Item = GraphQLResult<OperationEvent>> + use<>> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        if logs {
            authorize(context, Action::on(Subresource::Logs)).await?;
        }
        use futures::StreamExt as _;
        let service = service(context);
        let caller = context.data::<Identity>()?;
        // Held until the subscription ends.
        let slot = service.open_stream(&caller.username).map_err(graphql_error)?;
        let id = operation_id(&id)?;
        let watch = service.watch_operation(id).await.map_err(graphql_error)?;
        let (events, receiver) = tokio::sync::mpsc::channel(64);
        // Ends (and frees its stream slot) when the operation ends or the subscriber goes.
        tokio::spawn(async move {
            let _slot = slot;
            let OperationWatch { first, changes } = watch;
            let mut log_lines = match (logs, &changes) {
                (true, Some(_)) => service.follow_operation_log(id).await.ok(),
                _ => None,
            };
            let mut shown = shown_part(&first);
            if events.send(status_event(&service, first).await).await.is_err() {
                return;
            }
            let Some(mut changes) = changes else { return };
            loop {
                let (event, last) = tokio::select! {
                    () = events.closed() => return,
                    line = async { log_lines.as_mut().expect("only polled with a log").next().await }, if log_lines.is_some() => match line {
                        Some(Ok(line)) => (Ok(OperationEvent { status: None, log_line: Some(line.trim_end().to_owned()) }), false),
                        // The log ended or broke: the status goes on.
                        _ => {
                            log_lines = None;
                            continue;
                        }
                    },
                    changed = changes.changed() => {
                        // The watch ends after the operation's final state, which was the last change.
                        if changed.is_err() {
                            return;
                        }
                        let operation = changes.borrow_and_update().clone();
                        if shown_part(&operation) == shown {
                            continue;
                        }
                        shown = shown_part(&operation);
                        let last = !operation.state.is_active();
                        (status_event(&service, operation).await, last)
                    },
                };
                if events.send(event).await.is_err() || last {
                    return;
                }
            }
        });
        Ok(futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|event| (event, receiver))
        }))
    }
}
