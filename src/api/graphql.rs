//! GraphQL adapter in the style of the Kyma Runtime Provisioner. Resolvers only translate between GraphQL and
//! the service; every service error becomes a GraphQL error with `extensions` in [`graphql_error`].

use std::sync::Arc;

use async_graphql::connection::{Connection, Edge, EmptyFields};
use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery};
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{Context, ErrorExtensions, Object, Schema, ServerError, ServerResult, SimpleObject, Variables};
use async_graphql_axum::GraphQLResponse;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use super::audit::{ApiKind, AuditEvent};
use super::authorization::{Action, Subresource, Verb};
use super::caller::Identity;
use crate::domain::run_log::LogBudget;

use super::error::{ApiError, classify};
use crate::domain::run_log::ContainerLog;
use crate::domain::{
    ClusterConfig, Labels, LastError, Operation, OperationState, OperationType, PlanSummary, ProvisionRequest,
    UpgradeClusterInput,
};
use crate::service::{self, Conflict, OperationWatch, Service, shown_part};

pub type ProvisionerSchema = Schema<Query, Mutation, Subscription>;

/// What one GraphQL request may ask for.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_depth: usize,
    pub max_complexity: usize,
    pub introspection: bool,
    /// How long a query or mutation may run (`APP_REQUEST_TIMEOUT`), also over a WebSocket, where no HTTP
    /// request timeout applies.
    pub operation_timeout: std::time::Duration,
}

/// `in_flight`: the permits of `APP_MAX_CONCURRENT_REQUESTS`, which HTTP requests take in the router and
/// operations over a WebSocket here.
pub fn schema(service: Service, limits: Limits, in_flight: Arc<tokio::sync::Semaphore>) -> ProvisionerSchema {
    let builder = Schema::build(Query, Mutation, Subscription)
        .data(service)
        .limit_depth(limits.max_depth)
        .limit_complexity(limits.max_complexity)
        .extension(OperationLimits { timeout: limits.operation_timeout, in_flight });
    if limits.introspection {
        builder.finish()
    } else {
        // Disabled alone would answer `__schema: null`; the extension says why instead.
        builder.disable_introspection().extension(RefuseIntrospection).finish()
    }
}

/// Marks a request that came over HTTP: the router already holds it to the request limits.
struct ViaHttp;

/// Holds a query or mutation to the request limits: it ends with an error when it runs longer than the timeout,
/// and one sent over a WebSocket takes a permit of the concurrency limit as an HTTP request does (a subscription
/// is not one run).
struct OperationLimits {
    timeout: std::time::Duration,
    in_flight: Arc<tokio::sync::Semaphore>,
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
        let _permit = match context.data_opt::<ViaHttp>() {
            Some(_) => None,
            None => match self.in_flight.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    return refused("OVERLOADED", "overloaded", "too many requests at once: retry shortly".into());
                }
            },
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
fn refused(code: &str, reason: &str, message: String) -> async_graphql::Response {
    let mut error = ServerError::new(message, None);
    let mut extensions = async_graphql::ErrorExtensionValues::default();
    extensions.set("code", code);
    extensions.set("error_reason", reason);
    error.extensions = Some(extensions);
    async_graphql::Response::from_errors(vec![error])
}

/// Refuses documents that ask for `__schema` or `__type` before they run (`__typename` stays allowed).
struct RefuseIntrospection;

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
        let operations = document.operations.iter().map(|(_, operation)| &operation.node.selection_set.node);
        let fragments = document.fragments.values().map(|fragment| &fragment.node.selection_set.node);
        if operations.chain(fragments).any(asks_for_introspection) {
            return Err(ServerError::new("introspection is disabled (APP_GRAPHQL_INTROSPECTION)", None));
        }
        Ok(document)
    }
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

/// Runs one request as `identity`. A request refused before anything ran (parse or validation errors, the
/// depth and complexity limits among them: errors without a path) answers 400 instead of 200.
/// Its fields share `budget` for the logs they read.
pub async fn execute(
    schema: &ProvisionerSchema,
    request: async_graphql::Request,
    identity: Identity,
    budget: LogBudget,
) -> Response {
    let response = schema.execute(request.data(identity).data(budget).data(ViaHttp)).await;
    let refused = response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|error| error.path.is_empty());
    let status = if refused { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    (status, GraphQLResponse::from(response)).into_response()
}

/// The schema in SDL, as `gqlgen.sh` writes it to `schema.graphql`.
pub fn schema_sdl() -> String {
    Schema::build(Query, Mutation, Subscription).finish().sdl()
}

/// The one place where service errors get their GraphQL form: a message plus `extensions` with `code`
/// (a GraphQL-style name), the Kyma-style `error_code`, `error_reason` and `error_component`, and `field`.
pub fn graphql_error(error: service::Error) -> async_graphql::Error {
    let classified = classify(error);
    let code = match classified.status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY | StatusCode::PAYLOAD_TOO_LARGE => "BAD_REQUEST",
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::CONFLICT => "CONFLICT",
        StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
        StatusCode::TOO_MANY_REQUESTS => "TOO_MANY_REQUESTS",
        _ => "INTERNAL",
    };
    async_graphql::Error::new(classified.message).extend_with(|_, extensions| {
        extensions.set("code", code);
        extensions.set("error_code", classified.status.as_u16());
        extensions.set("error_reason", classified.code);
        extensions.set("error_component", classified.component);
        if let Some(field) = &classified.field {
            extensions.set("field", field.as_str());
        }
        if !classified.errors.is_empty() {
            // Plain strings in a list of objects: serializing them cannot fail.
            extensions.set("errors", async_graphql::to_value(&classified.errors).unwrap_or_default());
        }
    })
}

type GraphQLResult<T> = async_graphql::Result<T>;

/// Refused unless the caller may do `action` (Kubernetes RBAC with `APP_AUTHZ_MODE=rbac`).
async fn authorize(context: &Context<'_>, action: Action) -> GraphQLResult<()> {
    let identity = context.data::<Identity>()?;
    identity.authorize(action).await.map_err(|refusal| {
        let (status, reason, message) = match refusal {
            ApiError::Forbidden(message) => (StatusCode::FORBIDDEN, "forbidden", message),
            ApiError::Unavailable(message) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", message),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error".to_owned()),
        };
        async_graphql::Error::new(message).extend_with(|_, extensions| {
            let code = match status {
                StatusCode::FORBIDDEN => "FORBIDDEN",
                StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            extensions.set("code", code);
            extensions.set("error_code", status.as_u16());
            extensions.set("error_reason", reason);
            extensions.set("error_component", "provisioner");
        })
    })
}

/// The service as the request's caller sees it: only its tenant's runtimes when it named one.
fn service(context: &Context<'_>) -> Service {
    let service = context.data_unchecked::<Service>();
    match context.data_opt::<Identity>() {
        Some(identity) => identity.service(service),
        None => service.clone(),
    }
}

/// The status of one operation, as Kyma's `OperationStatus`, with its record: when it ran, who asked for it,
/// and its stages.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct OperationStatus {
    #[graphql(skip)]
    operation_id: uuid::Uuid,
    id: String,
    operation: OperationType,
    state: OperationState,
    message: String,
    #[graphql(name = "runtimeID")]
    runtime_id: String,
    /// The step the operation is at (for example `Queued`).
    stage: String,
    last_error: Option<LastError>,
    /// What the plan of the operation's run changed, once its Job succeeded.
    plan_summary: Option<PlanSummary>,
    /// The operation only plans: nothing is applied.
    dry_run: bool,
    /// Claims that used the attempt budget (the first, and resumes after a holder that made no progress).
    attempts: i32,
    /// The authenticated caller that asked for it; null for operations recorded before callers were kept.
    requested_by: Option<String>,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    /// From the first start to the end (or to now while it runs); null until it started.
    duration_seconds: Option<f64>,
}

/// When an operation entered one of its stages.
#[derive(SimpleObject)]
pub struct StageEntry {
    stage: String,
    entered_at: DateTime<Utc>,
}

#[async_graphql::ComplexObject]
impl OperationStatus {
    /// Each stage the operation entered, in order, with the time it entered it.
    async fn stages(&self, context: &Context<'_>) -> GraphQLResult<Vec<StageEntry>> {
        let stages = service(context).operation_stages(self.operation_id).await.map_err(graphql_error)?;
        Ok(stages
            .into_iter()
            .map(|entry| StageEntry { stage: entry.stage.as_str().to_owned(), entered_at: entry.entered_at })
            .collect())
    }

    /// What the containers of the operation's run (`init` and `terraform-runner`) printed, the last `tailLines`
    /// of each: kept in the database once the run ended, from its pod while it runs.
    #[graphql(complexity = "LOGS_WEIGHT")]
    async fn logs(&self, context: &Context<'_>, tail_lines: Option<i32>) -> GraphQLResult<Vec<ContainerLog>> {
        authorize(context, Action::on(Subresource::Logs)).await?;
        // One budget for every log an HTTP request reads (an operation over a WebSocket has none: each field gets
        // its own).
        let own;
        let budget = match context.data_opt::<LogBudget>() {
            Some(budget) => budget,
            None => {
                own = service(context).log_budget();
                &own
            }
        };
        let logs = service(context).operation_logs(&self.id, tail_lines.map(i64::from), budget).await;
        let logs = logs.map_err(graphql_error)?;
        context.data::<Identity>()?.audit_operation_logs(ApiKind::Graphql, &self.id);
        Ok(logs)
    }
}

impl From<Operation> for OperationStatus {
    fn from(operation: Operation) -> Self {
        OperationStatus {
            operation_id: operation.id,
            attempts: operation.attempts,
            requested_by: operation.requested_by.clone(),
            created_at: operation.created_at,
            started_at: operation.started_at,
            finished_at: operation.finished_at,
            duration_seconds: service::duration_seconds(&operation),
            id: operation.id.to_string(),
            operation: operation.operation_type,
            state: operation.state,
            message: operation.message,
            runtime_id: operation.runtime_id.to_string(),
            stage: operation.stage.as_str().to_owned(),
            last_error: operation.last_error,
            plan_summary: operation.plan_summary,
            dry_run: operation.dry_run,
        }
    }
}

pub struct RuntimeStatus {
    status: service::RuntimeStatus,
}

#[Object]
impl RuntimeStatus {
    async fn last_operation_status(&self) -> OperationStatus {
        self.status.last_operation.clone().into()
    }

    /// Whether the cluster sleeps, and whether a hibernation would be accepted now.
    async fn hibernation_status(&self, context: &Context<'_>) -> GraphQLResult<HibernationStatus> {
        let status = service(context).hibernation_status(&self.status).await.map_err(graphql_error)?;
        Ok(HibernationStatus { hibernated: status.hibernated, hibernation_possible: status.hibernation_possible })
    }

    async fn runtime_configuration(&self) -> RuntimeConfig {
        RuntimeConfig {
            runtime_id: self.status.runtime.id.to_string(),
            cluster_config: self.status.runtime.cluster_config.clone(),
        }
    }
}

/// As Kyma's `HibernationStatus`.
#[derive(SimpleObject)]
pub struct HibernationStatus {
    /// Workers at zero (and a vanilla control plane stopped) since a hibernation succeeded.
    hibernated: bool,
    /// The cluster is provisioned, awake, and no operation is active.
    hibernation_possible: bool,
}

pub struct RuntimeConfig {
    runtime_id: String,
    cluster_config: ClusterConfig,
}

#[Object]
impl RuntimeConfig {
    async fn cluster_config(&self) -> &ClusterConfig {
        &self.cluster_config
    }

    /// Read from the cluster's outputs Secret on each request; null until the provisioning has succeeded.
    #[graphql(complexity = "KUBECONFIG_WEIGHT")]
    async fn kubeconfig(&self, context: &Context<'_>) -> GraphQLResult<Option<String>> {
        authorize(context, Action::on(Subresource::Kubeconfig)).await?;
        match service(context).kubeconfig(&self.runtime_id).await {
            Ok(kubeconfig) => {
                let identity = context.data::<Identity>()?;
                identity.audit_read(ApiKind::Graphql, AuditEvent::KubeconfigRead, &self.runtime_id, None);
                Ok(Some(kubeconfig))
            }
            Err(service::Error::Conflict { conflict: Conflict::NotReady, .. }) => Ok(None),
            Err(error) => Err(graphql_error(error)),
        }
    }
}

/// A runtime in the `runtimes` list.
pub struct RuntimeNode {
    status: service::RuntimeStatus,
}

#[Object(name = "Runtime")]
impl RuntimeNode {
    async fn id(&self) -> String {
        self.status.runtime.id.to_string()
    }

    async fn name(&self) -> &str {
        &self.status.runtime.name
    }

    async fn description(&self) -> Option<&str> {
        self.status.runtime.description.as_deref()
    }

    async fn labels(&self) -> &Labels {
        &self.status.runtime.labels
    }

    async fn created_at(&self) -> DateTime<Utc> {
        self.status.runtime.created_at
    }

    async fn status(&self) -> RuntimeStatus {
        RuntimeStatus { status: self.status.clone() }
    }

    /// Every operation of the runtime, newest first.
    #[graphql(complexity = "page_weight(first, child_complexity)")]
    async fn operations(
        &self,
        context: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> GraphQLResult<Connection<String, OperationStatus, EmptyFields, EmptyFields>> {
        operation_connection(context, &self.status.runtime.id.to_string(), first, after).await
    }
}

async fn operation_connection(
    context: &Context<'_>,
    runtime_id: &str,
    first: Option<i32>,
    after: Option<String>,
) -> GraphQLResult<Connection<String, OperationStatus, EmptyFields, EmptyFields>> {
    let page = service(context).runtime_operations(runtime_id, after.as_deref(), first).await.map_err(graphql_error)?;
    let mut connection = Connection::new(after.is_some(), page.has_next_page);
    connection.edges.extend(
        page.operations
            .into_iter()
            .map(|operation| Edge::new(operation.id.to_string(), OperationStatus::from(operation))),
    );
    Ok(connection)
}

/// A page costs what one of its items costs, times the items it may hold: aliases of large pages of expensive
/// fields add up instead of counting once.
fn page_weight(first: Option<i32>, child_complexity: usize) -> usize {
    let items = first.unwrap_or(service::DEFAULT_PAGE_SIZE).clamp(1, service::MAX_PAGE_SIZE);
    usize::try_from(items).unwrap_or(1).saturating_mul(child_complexity).saturating_add(1)
}

/// Reading an operation's logs may decompress an archive of up to `APP_RUN_LOG_MAX_BYTES`.
const LOGS_WEIGHT: usize = 100;
/// A kubeconfig is read from the cluster's outputs Secret on every request.
const KUBECONFIG_WEIGHT: usize = 20;

pub struct Query;

#[Object]
impl Query {
    async fn runtime_status(&self, context: &Context<'_>, id: String) -> GraphQLResult<RuntimeStatus> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        let status = service(context).runtime_status(&id).await.map_err(graphql_error)?;
        Ok(RuntimeStatus { status })
    }

    async fn runtime_operation_status(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationStatus> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        Ok(service(context).operation_status(&id).await.map_err(graphql_error)?.into())
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
    ) -> GraphQLResult<Connection<String, OperationStatus, EmptyFields, EmptyFields>> {
        authorize(context, Action::on_runtimes(Verb::Get)).await?;
        operation_connection(context, &runtime_id, first, after).await
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
        let page = service.runtimes(state, label.as_deref(), after.as_deref(), first).await.map_err(graphql_error)?;
        let mut connection = Connection::new(after.is_some(), page.has_next_page);
        for (runtime, last_operation) in page.runtimes {
            let Some(last_operation) = last_operation else {
                continue;
            };
            let cursor = runtime.id.to_string();
            connection
                .edges
                .push(Edge::new(cursor, RuntimeNode { status: service::RuntimeStatus { runtime, last_operation } }));
        }
        Ok(connection)
    }
}

pub struct Mutation;

#[Object]
impl Mutation {
    /// With `dryRun`, only validates, renders and plans: the runtime is recorded as a preview (its name stays
    /// free) and nothing is built.
    async fn provision_runtime(
        &self,
        context: &Context<'_>,
        config: ProvisionRequest,
        #[graphql(default_with = "Some(false)")] dry_run: Option<bool>,
    ) -> GraphQLResult<OperationStatus> {
        authorize(context, Action::on_runtimes(Verb::Create)).await?;
        let identity = context.data::<Identity>()?;
        let dry_run = dry_run.unwrap_or_default();
        let accepted = service(context)
            .provision_runtime(config, None, dry_run, &identity.username)
            .await
            .map_err(graphql_error)?;
        if !accepted.replayed {
            identity.audit(ApiKind::Graphql, &accepted.operation);
        }
        Ok(accepted.operation.into())
    }

    /// Changes a provisioned cluster (planned first; a plan that would replace the cluster is refused). The
    /// runtime's configuration changes only once the upgrade succeeded; with `dryRun` the operation only plans.
    async fn upgrade_cluster(
        &self,
        context: &Context<'_>,
        id: String,
        config: UpgradeClusterInput,
        #[graphql(default_with = "Some(false)")] dry_run: Option<bool>,
    ) -> GraphQLResult<OperationStatus> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let dry_run = dry_run.unwrap_or_default();
        let operation =
            service(context).upgrade_cluster(&id, config, dry_run, &identity.username).await.map_err(graphql_error)?;
        identity.audit(ApiKind::Graphql, &operation);
        Ok(operation.into())
    }

    /// Scales every worker pool to zero (and stops a vanilla control plane); the configuration is kept for the
    /// wake-up. A hibernated runtime refuses upgrades until it is woken up; it can be deprovisioned.
    async fn hibernate_runtime(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationStatus> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let operation = service(context).hibernate_runtime(&id, &identity.username).await.map_err(graphql_error)?;
        identity.audit(ApiKind::Graphql, &operation);
        Ok(operation.into())
    }

    /// Brings a hibernated cluster back at its configured sizes; a vanilla one ends once its API server answers.
    async fn wake_up_runtime(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationStatus> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let operation = service(context).wake_up_runtime(&id, &identity.username).await.map_err(graphql_error)?;
        identity.audit(ApiKind::Graphql, &operation);
        Ok(operation.into())
    }

    /// Cancels an operation: a queued one ends at once; a running one is stopped (its Terraform interrupted at a
    /// safe point) and ends `Failed` with reason `cancelled`. An error once it has ended.
    async fn cancel_operation(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationStatus> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let operation = service(context).cancel_operation(&id, &identity.username).await.map_err(graphql_error)?;
        identity.audit_cancel(ApiKind::Graphql, &operation);
        Ok(operation.into())
    }

    /// Returns the id of the deprovisioning operation.
    async fn deprovision_runtime(&self, context: &Context<'_>, id: String) -> GraphQLResult<String> {
        authorize(context, Action::on_runtimes(Verb::Delete)).await?;
        let identity = context.data::<Identity>()?;
        let operation = service(context).deprovision_runtime(&id, &identity.username).await.map_err(graphql_error)?;
        identity.audit(ApiKind::Graphql, &operation);
        Ok(operation.id.to_string())
    }
}

/// What happened to an operation: its status when its stage, state or message changed, or a line the runner
/// printed.
#[derive(SimpleObject)]
pub struct OperationEvent {
    /// Set when the operation's stage, state or message changed (the first event shows it as it is).
    status: Option<OperationStatus>,
    /// A line of the runner's log (only with `logs: true`).
    log_line: Option<String>,
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
        let watch = service.watch_operation(&id).await.map_err(graphql_error)?;
        let (events, receiver) = tokio::sync::mpsc::channel(64);
        // Ends (and frees its stream slot) when the operation ends or the subscriber goes.
        tokio::spawn(async move {
            let _slot = slot;
            let OperationWatch { first, changes } = watch;
            let mut log_lines = match (logs, &changes) {
                (true, Some(_)) => service.follow_operation_log(&id).await.ok(),
                _ => None,
            };
            let mut shown = shown_part(&first);
            if events.send(Ok(OperationEvent { status: Some(first.into()), log_line: None })).await.is_err() {
                return;
            }
            let Some(mut changes) = changes else { return };
            loop {
                let (event, last) = tokio::select! {
                    () = events.closed() => return,
                    line = async { log_lines.as_mut().expect("only polled with a log").next().await }, if log_lines.is_some() => match line {
                        Some(Ok(line)) => (OperationEvent { status: None, log_line: Some(line.trim_end().to_owned()) }, false),
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
                        (OperationEvent { status: Some(operation.into()), log_line: None }, last)
                    },
                };
                if events.send(Ok(event)).await.is_err() || last {
                    return;
                }
            }
        });
        Ok(futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|event| (event, receiver))
        }))
    }
}
