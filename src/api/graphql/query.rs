//! The queries: runtimes, operations and their logs, the kubeconfig.

use async_graphql::connection::{Connection, Edge, EmptyFields};
use async_graphql::{Context, Object};

use super::{
    GraphQLResult, OperationView, RuntimeNode, RuntimeStatus, authorize, graphql_error, operation_connection,
    operation_id, page_weight, runtime_id, service,
};
use crate::api::authorization::{Action, Verb};
use crate::domain::OperationState;
use crate::service::RuntimeQuery;

pub struct Query;

#[Object]
impl Query {
    async fn runtime_status(&self, context: &Context<'_>, id: String) -> GraphQLResult<RuntimeStatus> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        let status = service(context).runtime_status(runtime_id(&id)?).await.map_err(graphql_error)?;
        Ok(RuntimeStatus::new(status.into()))
    }

    /// A runtime with its configuration, state and conditions.
    async fn runtime(&self, context: &Context<'_>, id: String) -> GraphQLResult<RuntimeNode> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        let status = service(context).runtime_status(runtime_id(&id)?).await.map_err(graphql_error)?;
        Ok(RuntimeNode::new(status))
    }

    async fn runtime_operation_status(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        Ok(service(context).operation_status(operation_id(&id)?).await.map_err(graphql_error)?.into())
    }

    /// Every operation of a runtime, newest first; `after` is the cursor of the last operation of the previous
    /// page.
    #[graphql(complexity = "page_weight(first, child_complexity)")]
    async fn runtime_operations(
        &self,
        context: &Context<'_>,
        #[graphql(name = "runtimeID")] runtime_id: String,
        first: Option<i32>,
        after: Option<String>,
    ) -> GraphQLResult<Connection<String, OperationView, EmptyFields, EmptyFields>> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        operation_connection(context, super::runtime_id(&runtime_id)?, first, after).await
    }

    /// Runtimes in creation order; `after` is the cursor of the last runtime of the previous page.
    #[graphql(complexity = "page_weight(first, child_complexity)")]
    async fn runtimes(
        &self,
        context: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        state: Option<OperationState>,
        #[graphql(desc = "Only runtimes with this label, as `key=value`")] label: Option<String>,
    ) -> GraphQLResult<Connection<String, RuntimeNode, EmptyFields, EmptyFields>> {
        authorize(context, Action::on_runtimes(Verb::List)).await?;
        let service = service(context);
        let query = RuntimeQuery { last_operation_state: state, label: label.as_deref(), ..RuntimeQuery::everything() };
        let page = service.runtimes(query, after.as_deref(), first).await.map_err(graphql_error)?;
        let mut connection = Connection::new(after.is_some(), page.has_next_page);
        connection.edges.extend(
            page.items.into_iter().map(|status| Edge::new(status.runtime.id.to_string(), RuntimeNode::new(status))),
        );
        Ok(connection)
    }
}
