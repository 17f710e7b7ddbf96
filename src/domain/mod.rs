//! Domain types of the provisioner: what a runtime (a cluster) and an operation on it are. No I/O here.
//!
//! The request types carry the derives of both APIs (serde for REST, async-graphql for GraphQL, utoipa for the
//! OpenAPI document) so that one definition serves both adapters instead of two drifting copies.

use std::collections::BTreeMap;

use async_graphql::{Enum, InputObject, SimpleObject};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

pub mod run;

use run::Stage;

/// Shared with terraform-runner, which reads them from `runner.json`; the service enables their API derives.
pub use runner_contract::{Cloud, Topology};

/// Kyma spells these values in PascalCase; its clients expect exactly that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[graphql(rename_items = "PascalCase")]
pub enum OperationType {
    Provision,
    Deprovision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[graphql(rename_items = "PascalCase")]
pub enum OperationState {
    Pending,
    InProgress,
    Succeeded,
    Failed,
}

impl OperationState {
    pub fn is_active(self) -> bool {
        matches!(self, OperationState::Pending | OperationState::InProgress)
    }
}

/// Labels of a runtime, as Kubernetes-style key/value pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
pub struct Labels(pub BTreeMap<String, String>);

async_graphql::scalar!(Labels, "Labels", "Key/value labels of a runtime (a JSON object of strings).");

/// What the caller asks for: the runtime's identity and the cluster to build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(name = "ProvisionRuntimeInput")]
pub struct ProvisionRequest {
    pub runtime_input: RuntimeInput,
    pub cluster_config: ClusterConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeInput {
    /// A DNS-1123 label; unique among runtimes that are not deleted.
    pub name: String,
    pub description: Option<String>,
    pub labels: Option<Labels>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "ClusterConfigInput")]
pub struct ClusterConfig {
    pub topology: Topology,
    /// The auth-service credential to build with; only this reference is ever stored.
    pub credential_id: String,
    pub region: String,
    /// `MAJOR.MINOR`, for example `1.34`.
    pub kubernetes_version: String,
    /// Names the Terraform state bucket together with the runtime name.
    pub environment: String,
    pub control_plane: Option<ControlPlane>,
    pub worker_pool: WorkerPool,
    pub network: Option<Network>,
    pub aws: Option<AwsConfig>,
    pub gcp: Option<GcpConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "ControlPlaneInput")]
pub struct ControlPlane {
    /// 1, 3 or 5 control-plane nodes (vanilla_kubeadm only).
    pub count: i32,
    pub machine_type: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "WorkerPoolInput")]
pub struct WorkerPool {
    pub machine_type: String,
    pub min_size: i32,
    pub max_size: i32,
    pub disk_size_gb: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "NetworkInput")]
pub struct Network {
    pub vpc_cidr: String,
    pub pod_cidr: String,
    pub service_cidr: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "AwsConfigInput")]
pub struct AwsConfig {
    pub zones: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "GcpConfigInput")]
pub struct GcpConfig {
    pub project_id: String,
    pub zones: Vec<String>,
}

/// A cluster this service built or is building.
#[derive(Debug, Clone, PartialEq)]
pub struct Runtime {
    pub id: Uuid,
    pub name: String,
    pub description: Option<String>,
    pub labels: Labels,
    pub cluster_config: ClusterConfig,
    pub last_operation_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl Runtime {
    /// A new runtime for a request, with its first operation: the queued provisioning.
    pub fn requested(request: ProvisionRequest, now: DateTime<Utc>) -> (Runtime, Operation) {
        let id = Uuid::now_v7();
        let operation = Operation::queued(id, OperationType::Provision, now);
        let runtime = Runtime {
            id,
            name: request.runtime_input.name,
            description: request.runtime_input.description,
            labels: request.runtime_input.labels.unwrap_or_default(),
            cluster_config: request.cluster_config,
            last_operation_id: Some(operation.id),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        };
        (runtime, operation)
    }
}

/// Why an operation failed, and which part of the system said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase")]
#[graphql(name = "LastError")]
pub struct LastError {
    pub err_message: String,
    pub reason: String,
    pub component: String,
}

/// One asynchronous operation (provision or deprovision) on a runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub id: Uuid,
    pub runtime_id: Uuid,
    pub operation_type: OperationType,
    pub state: OperationState,
    pub stage: String,
    pub message: String,
    pub last_error: Option<LastError>,
    /// Claims that used the attempt budget: the first, and resumes after a holder that made no progress.
    pub attempts: i32,
    /// Every claim by a worker, including resumes after a graceful release or while only waiting for the Job.
    pub claims: i32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Operation {
    /// A new operation, recorded before any side effect happens.
    pub fn queued(runtime_id: Uuid, operation_type: OperationType, now: DateTime<Utc>) -> Self {
        let verb = match operation_type {
            OperationType::Provision => "provisioning",
            OperationType::Deprovision => "deprovisioning",
        };
        Operation {
            id: Uuid::now_v7(),
            runtime_id,
            operation_type,
            state: OperationState::Pending,
            stage: Stage::Queued.as_str().to_owned(),
            message: format!("Operation queued: waiting for a worker to start {verb}"),
            last_error: None,
            attempts: 0,
            claims: 0,
            created_at: now,
            started_at: None,
            updated_at: now,
            finished_at: None,
        }
    }
}

/// A page of runtimes, ordered by id (ids are UUIDv7, so this is creation order).
#[derive(Debug, Clone)]
pub struct RuntimePage {
    pub runtimes: Vec<(Runtime, Option<Operation>)>,
    pub has_next_page: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pending_and_in_progress_are_active() {
        assert!(OperationState::Pending.is_active());
        assert!(OperationState::InProgress.is_active());
        assert!(!OperationState::Succeeded.is_active());
        assert!(!OperationState::Failed.is_active());
    }

    #[test]
    fn a_queued_operation_is_pending_with_no_error() {
        let runtime_id = Uuid::now_v7();
        let operation = Operation::queued(runtime_id, OperationType::Deprovision, Utc::now());
        assert_eq!(operation.state, OperationState::Pending);
        assert_eq!(operation.stage, Stage::Queued.as_str());
        assert_eq!(operation.runtime_id, runtime_id);
        assert!(operation.message.contains("deprovisioning"));
        assert!(operation.last_error.is_none());
    }
}
