//! The subscription: an operation's status changes and its runner's log lines, until the operation ends.

use async_graphql::{Context, SimpleObject};

use super::{GraphQLResult, OperationView, authorize, graphql_error, operation_id, service};
use crate::api::authentication::Identity;
use crate::api::authorization::{Action, Subresource, Verb};
use crate::domain::Operation;
use crate::service::{OperationEvent as ServiceEvent, Service};

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
        let events = service.operation_events(operation_id(&id)?, logs).await.map_err(graphql_error)?;
        Ok(events.then(move |event| {
            let (_slot, service) = (&slot, service.clone());
            async move {
                match event {
                    ServiceEvent::Changed(operation) => status_event(&service, *operation).await,
                    ServiceEvent::LogLine(line) => Ok(OperationEvent { status: None, log_line: Some(line) }),
                }
            }
        }))
    }
}
