//! What one GraphQL request may ask for: depth, complexity and time, and introspection only when allowed.

use std::sync::Arc;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery};
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{ServerError, ServerResult, Variables};

/// Holds a query or mutation sent over a WebSocket to the request limits an HTTP request has in the router: it
/// takes a permit of the concurrency limit and ends with an error when it runs longer than the timeout (a
/// subscription is not one run).
pub(super) struct OperationLimits {
    pub(super) timeout: std::time::Duration,
    pub(super) in_flight: Arc<tokio::sync::Semaphore>,
}

impl ExtensionFactory for OperationLimits {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(OperationLimits { timeout: self.timeout, in_flight: self.in_flight.clone() })
    }
}

#[async_graphql::async_trait::async_trait]
impl Extension for OperationLimits {
    async fn execute(
        &self,
        context: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> async_graphql::Response {
        let Ok(_permit) = self.in_flight.clone().try_acquire_owned() else {
            return refused("OVERLOADED", "overloaded", "too many requests at once: retry shortly".into());
        };
        match tokio::time::timeout(self.timeout, next.run(context, operation_name)).await {
            Ok(response) => response,
            Err(_) => {
                let limit = humantime::format_duration(self.timeout);
                refused("TIMEOUT", "timeout", format!("the request took longer than {limit}"))
            }
        }
    }
}

/// A response with one error, and nothing run.
pub(super) fn refused(code: &str, reason: &str, message: String) -> async_graphql::Response {
    let mut error = ServerError::new(message, None);
    let mut extensions = async_graphql::ErrorExtensionValues::default();
    extensions.set("code", code);
    extensions.set("error_reason", reason);
    error.extensions = Some(extensions);
    async_graphql::Response::from_errors(vec![error])
}

/// Refuses documents that ask for `__schema` or `__type` before they run (`__typename` stays allowed).
pub(super) struct RefuseIntrospection;

impl ExtensionFactory for RefuseIntrospection {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(RefuseIntrospection)
    }
}

#[async_graphql::async_trait::async_trait]
impl Extension for RefuseIntrospection {
    async fn parse_query(
        &self,
        context: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next.run(context, query, variables).await?;
        match introspection_refusal(&document) {
            Some(refusal) => Err(refusal),
            None => Ok(document),
        }
    }
}

/// The error of a document that asks for `__schema` or `__type` where introspection is disabled.
pub(super) fn introspection_refusal(document: &ExecutableDocument) -> Option<ServerError> {
    let operations = document.operations.iter().map(|(_, operation)| &operation.node.selection_set.node);
    let fragments = document.fragments.values().map(|fragment| &fragment.node.selection_set.node);
    let mut selections = operations.chain(fragments);
    selections
        .any(asks_for_introspection)
        .then(|| ServerError::new("introspection is disabled (APP_GRAPHQL_INTROSPECTION)", None))
}

/// Fragment spreads are not followed: every fragment definition is checked on its own.
fn asks_for_introspection(selections: &SelectionSet) -> bool {
    selections.items.iter().any(|selection| match &selection.node {
        Selection::Field(field) => {
            matches!(field.node.name.node.as_str(), "__schema" | "__type")
                || asks_for_introspection(&field.node.selection_set.node)
        }
        Selection::InlineFragment(fragment) => asks_for_introspection(&fragment.node.selection_set.node),
        Selection::FragmentSpread(_) => false,
    })
}
