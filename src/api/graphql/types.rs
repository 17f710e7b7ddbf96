//! The GraphQL output types of its own shape (a runtime's status, configuration and operations), in the Kyma
//! Runtime Provisioner's names and spellings; an operation is the view both APIs share.

use async_graphql::connection::{Connection, Edge, EmptyFields};
use async_graphql::dataloader::DataLoader;
use std::sync::Arc;

use async_graphql::{Context, MergedObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use super::loaders::ArchivedLogs;
use super::{GraphQLResult, authorize, graphql_error, service};
use crate::api::audit::{ApiKind, AuditEvent};
use crate::api::authentication::Identity;
use crate::api::authorization::{Action, Subresource};
use crate::api::views::{HibernationView, OperationView};
use crate::domain::approval::ApprovalPolicy;
use crate::domain::certificates::ObservedCertificates;
use crate::domain::run_log::ContainerLog;
use crate::domain::run_log::LogBudget;
use crate::domain::{ClusterConfig, Condition, Labels, RuntimeId, RuntimeState};
use crate::service::Conflict;

/// The fields of an operation only GraphQL has.
#[async_graphql::ComplexObject]
impl OperationView {
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
        let archived = context.data::<DataLoader<ArchivedLogs>>()?.load_one(self.source.id).await?.unwrap_or_default();
        let logs = service(context).logs_of(&self.source, &archived, tail_lines.map(i64::from), budget).await;
        let logs = logs.map_err(graphql_error)?;
        context.data::<Identity>()?.audit_operation_logs(ApiKind::Graphql, &self.source.id.to_string());
        Ok(logs)
    }
}

/// The fields of a runtime itself, on both `Runtime` and `RuntimeStatus`.
pub struct RuntimeFields(Arc<service::RuntimeStatus>);

#[Object]
impl RuntimeFields {
    async fn id(&self) -> String {
        self.0.runtime.id.to_string()
    }

    async fn name(&self) -> &str {
        &self.0.runtime.name
    }

    async fn description(&self) -> Option<&str> {
        self.0.runtime.description.as_deref()
    }

    async fn labels(&self) -> &Labels {
        &self.0.runtime.labels
    }

    async fn created_at(&self) -> DateTime<Utc> {
        self.0.runtime.created_at
    }

    /// When it was deprovisioned; null while it lives.
    async fn deleted_at(&self) -> Option<DateTime<Utc>> {
        self.0.runtime.deleted_at
    }

    /// Recorded by a dry-run provisioning: planned, never built.
    async fn preview(&self) -> bool {
        self.0.runtime.preview
    }

    /// Deprovisionings are refused while this is on (`setDeletionProtection` turns it off).
    async fn deletion_protection(&self) -> bool {
        self.0.runtime.deletion_protection
    }

    /// Which plans of its runs wait for approval (`setApprovalPolicy` changes it).
    async fn approval_policy(&self) -> ApprovalPolicy {
        self.0.runtime.approval_policy
    }

    /// What the runtime is, derived from its last operation and whether it sleeps.
    async fn state(&self) -> RuntimeState {
        self.0.summary.state
    }

    /// Kubernetes-style observations: `Provisioned` (its cluster exists), `Progressing` (an operation is queued or
    /// running) and, once its cluster's certificates were read, `CertificatesExpiring` (one expires within 30 days).
    async fn conditions(&self) -> &[Condition] {
        &self.0.summary.conditions
    }

    /// Until when the kubeconfig last handed out signs in (a cluster that signs in with client certificates);
    /// null until one was, and for EKS and GKE, whose kubeconfigs use the cloud's token plugin.
    async fn kubeconfig_expires_at(&self) -> Option<DateTime<Utc>> {
        self.0.runtime.kubeconfig_expires_at
    }

    /// Until when each certificate of its cluster the provisioner can see is valid, as last read (a few runtimes
    /// a minute); null until they were read.
    async fn certificates(&self) -> Option<&ObservedCertificates> {
        self.0.runtime.certificates.as_ref()
    }

    /// The configuration an upgrade queued or running applies; null otherwise.
    async fn target_config(&self) -> Option<&ClusterConfig> {
        self.0.target_config()
    }
}

/// The fields Kyma's `RuntimeStatus` has.
pub struct KymaRuntimeStatus(Arc<service::RuntimeStatus>);

#[Object]
impl KymaRuntimeStatus {
    async fn last_operation_status(&self) -> OperationView {
        self.0.last_operation.clone().into()
    }

    /// Whether the cluster sleeps, and whether a hibernation would be accepted now.
    async fn hibernation_status(&self) -> HibernationView {
        self.0.hibernation.into()
    }

    async fn runtime_configuration(&self) -> RuntimeConfig {
        RuntimeConfig {
            runtime_id: RuntimeId(self.0.runtime.id),
            cluster_config: self.0.runtime.cluster_config.clone(),
        }
    }
}

/// A runtime's status in Kyma's shape, with the runtime's own fields.
#[derive(MergedObject)]
pub struct RuntimeStatus(RuntimeFields, KymaRuntimeStatus);

impl RuntimeStatus {
    pub(super) fn new(status: Arc<service::RuntimeStatus>) -> Self {
        RuntimeStatus(RuntimeFields(status.clone()), KymaRuntimeStatus(status))
    }
}

pub struct RuntimeConfig {
    runtime_id: RuntimeId,
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
        match service(context).kubeconfig(self.runtime_id).await {
            Ok(handed_out) => {
                let identity = context.data::<Identity>()?;
                identity.audit_kubeconfig(ApiKind::Graphql, AuditEvent::KubeconfigRead, self.runtime_id, &handed_out);
                Ok(Some(handed_out.kubeconfig))
            }
            Err(service::Error::Conflict { conflict: Conflict::NotReady, .. }) => Ok(None),
            Err(error) => Err(graphql_error(error)),
        }
    }
}

/// A kubeconfig just minted, and until when it signs in.
#[derive(SimpleObject)]
pub struct RotatedKubeconfig {
    pub kubeconfig: String,
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A runtime, as `runtime` and the `runtimes` list show it.
#[derive(MergedObject)]
#[graphql(name = "Runtime")]
pub struct RuntimeNode(RuntimeFields, RuntimeLinks);

impl RuntimeNode {
    pub(super) fn new(status: service::RuntimeStatus) -> Self {
        let status = Arc::new(status);
        RuntimeNode(RuntimeFields(status.clone()), RuntimeLinks(status))
    }
}

/// What a `Runtime` leads to: its status and its operations.
pub struct RuntimeLinks(Arc<service::RuntimeStatus>);

#[Object]
impl RuntimeLinks {
    async fn status(&self) -> RuntimeStatus {
        RuntimeStatus::new(self.0.clone())
    }

    /// Every operation of the runtime, newest first.
    #[graphql(complexity = "page_weight(first, child_complexity)")]
    async fn operations(
        &self,
        context: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> GraphQLResult<Connection<String, OperationView, EmptyFields, EmptyFields>> {
        operation_connection(context, RuntimeId(self.0.runtime.id), first, after).await
    }
}

pub(super) async fn operation_connection(
    context: &Context<'_>,
    runtime_id: RuntimeId,
    first: Option<i32>,
    after: Option<String>,
) -> GraphQLResult<Connection<String, OperationView, EmptyFields, EmptyFields>> {
    let page = service(context).runtime_operations(runtime_id, after.as_deref(), first).await.map_err(graphql_error)?;
    let mut connection = Connection::new(after.is_some(), page.has_next_page);
    connection.edges.extend(
        page.items.into_iter().map(|operation| Edge::new(operation.operation.id.to_string(), operation.into())),
    );
    Ok(connection)
}

/// A page costs what one of its items costs, times the items it may hold: aliases of large pages of expensive
/// fields add up instead of counting once.
pub(super) fn page_weight(first: Option<i32>, child_complexity: usize) -> usize {
    let items = first.unwrap_or(service::DEFAULT_PAGE_SIZE).clamp(1, service::MAX_PAGE_SIZE);
    usize::try_from(items).unwrap_or(1).saturating_mul(child_complexity).saturating_add(1)
}

/// Reading an operation's logs may decompress an archive of up to `APP_RUN_LOG_MAX_BYTES`.
pub(super) const LOGS_WEIGHT: usize = 100;
/// A kubeconfig is read from the cluster's outputs Secret on every request.
pub(super) const KUBECONFIG_WEIGHT: usize = 20;
