//! Domain types of the provisioner: what a runtime (a cluster) and an operation on it are. No I/O here.
//!
//! The request types carry the derives of both APIs (serde for REST, async-graphql for GraphQL, utoipa for the
//! OpenAPI document) so that one definition serves both adapters instead of two drifting copies.

use std::collections::BTreeMap;

use async_graphql::{Enum, InputObject, SimpleObject};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// An enum whose variants are stored and shown as fixed spellings: `as_str()` is what the database, the APIs and
/// the metrics show, `parse()` its inverse (`None` for an unknown value, which readers report as corrupt data).
macro_rules! spelled {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$variant_meta])* $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(value: &str) -> Option<Self> {
                match value {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use spelled;

pub mod api_access;
pub mod approval;
pub mod certificates;
mod cloud_failure;
pub mod cluster_access;
pub mod credential_fit;
pub mod deletion;
#[cfg(any(test, feature = "examples"))]
mod example;
pub mod failure_reasons;
mod ids;
pub mod kubeconfig_lifetime;
pub mod managed_by;
mod operation;
pub mod policy;
pub mod retry;
pub mod run;
pub mod run_log;
mod runtime_state;
pub mod state_bucket;
pub mod tenant;
mod trace_parent;
pub mod upgrade_chain;
pub mod worker_pools;

pub use cluster_access::{Administrator, KubernetesAccess, OidcProvider, RequiredClaim, SubjectKind};
#[cfg(any(test, feature = "examples"))]
pub use example::EXAMPLE_API_ALLOWED_CIDRS;
pub use ids::{OperationId, RuntimeId};
pub use operation::{LastError, Operation, OperationPage, StageEntry};
pub use runtime_state::{
    Condition, ConditionReason, ConditionStatus, ConditionType, RuntimeState, RuntimeSummary, certificates_expiring,
};
pub use trace_parent::TraceParent;
pub use worker_pools::{DEFAULT_POOL_NAME, NamedWorkerPool, Taint, TaintEffect};

/// Shared with terraform-runner, which reads them from `runner.json`; the service enables their API derives.
pub use runner_contract::manifest::RunAction;
pub use runner_contract::plan::PlanSummary;
pub use runner_contract::providers::ProviderVersion;
pub use runner_contract::{Cloud, Topology};

spelled! {
    /// Kyma spells these values in PascalCase; its clients expect exactly that.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
    #[graphql(rename_items = "PascalCase")]
    pub enum OperationType {
        Provision => "Provision",
        Deprovision => "Deprovision",
        /// A change of a running cluster (version, sizes, machine types), planned first.
        Upgrade => "Upgrade",
        /// Every worker pool scaled to zero (and a vanilla control plane stopped); the configuration is kept.
        Hibernate => "Hibernate",
        /// A hibernated cluster back at its configured sizes, its API server answering.
        WakeUp => "WakeUp",
        /// A vanilla control plane's certificates renewed by kubeadm, one node after the other; the configuration
        /// stays as it is.
        RenewCertificates => "RenewCertificates",
    }
}

impl OperationType {
    /// The noun for messages: "provisioning did not finish within 1h".
    pub fn noun(self) -> &'static str {
        match self {
            OperationType::Provision => "provisioning",
            OperationType::Deprovision => "deprovisioning",
            OperationType::Upgrade => "upgrading",
            OperationType::Hibernate => "hibernating",
            OperationType::WakeUp => "waking up",
            OperationType::RenewCertificates => "renewing the certificates",
        }
    }

    /// Whether the cluster is hibernated once a run of this type has succeeded; `None`: as it was before.
    pub fn hibernated_after(self) -> Option<bool> {
        match self {
            OperationType::Hibernate => Some(true),
            OperationType::WakeUp => Some(false),
            OperationType::Provision
            | OperationType::Deprovision
            | OperationType::Upgrade
            | OperationType::RenewCertificates => None,
        }
    }
}

spelled! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
    #[graphql(rename_items = "PascalCase")]
    pub enum OperationState {
        Pending => "Pending",
        InProgress => "InProgress",
        /// Its plan waits for a person to approve (or reject) it; nothing runs meanwhile.
        AwaitingApproval => "AwaitingApproval",
        Succeeded => "Succeeded",
        Failed => "Failed",
    }
}

spelled! {
    /// Why an operation failed, or why its current step is being retried.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum FailureReason {
        /// A Kubernetes request failed (or the API server could not be reached).
        KubernetesError => "kubernetes_error",
        CredentialNotFound => "credential_not_found",
        /// A value auth-service sent for the credential does not have its format; nothing was written.
        InvalidCredential => "invalid_credential",
        AuthServiceError => "auth_service_error",
        CredentialMismatch => "credential_mismatch",
        DatabaseError => "database_error",
        /// One try of a step took longer than its limit.
        StepTimeout => "step_timeout",
        /// The operation's deadline passed.
        Timeout => "timeout",
        /// A Job of another operation on the runtime is still running.
        JobStillRunning => "job_still_running",
        RenderFailed => "render_failed",
        JobFailed => "job_failed",
        /// The runner refused to apply a plan that destroys or replaces a protected resource; nothing changed.
        DestructivePlan => "destructive_plan",
        JobMissing => "job_missing",
        MissingOutputs => "missing_outputs",
        /// The outputs Secret does not hold the kubeconfig the run's own pod reported publishing.
        UntrustedOutputs => "untrusted_outputs",
        RuntimeMissing => "runtime_missing",
        /// Started too often without progress.
        AttemptsExhausted => "attempts_exhausted",
        /// A caller cancelled it (the message names who).
        Cancelled => "cancelled",
        /// The approved plan could not be applied: the state moved since it was planned; nothing changed.
        StalePlan => "stale_plan",
        /// A caller rejected the plan that waited for approval (the message names who); nothing changed.
        PlanRejected => "plan_rejected",
        /// Nobody approved the plan within `APP_PLAN_APPROVAL_TTL`; nothing changed.
        ApprovalExpired => "approval_expired",
        // The cloud's answers Terraform failed on (see `cloud_failure`).
        QuotaExceeded => "quota_exceeded",
        Unauthenticated => "unauthenticated",
        Unauthorized => "unauthorized",
        RateLimited => "rate_limited",
        DependencyViolation => "dependency_violation",
        InvalidConfiguration => "invalid_configuration",
        NotFound => "not_found",
        Conflict => "conflict",
        /// A deprovisioning destroyed the state, but resources carrying the runtime's tag remain in the cloud.
        Leftovers => "leftovers",
    }
}

spelled! {
    /// The part of the system an error comes from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Component {
        Provisioner => "provisioner",
        Kubernetes => "kubernetes",
        AuthService => "auth-service",
        Database => "database",
        Renderer => "renderer",
        TerraformRunner => "terraform-runner",
        /// The cloud provider's API, as Terraform reported its answer.
        Cloud => "cloud",
        /// The provisioned cluster's own API server (the service asks it for kubeconfigs with a lifetime).
        Cluster => "cluster",
    }
}

/// Both are shown as their spelling.
macro_rules! serialize_spelled {
    ($($name:ident),+) => {
        $(impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        })+
    };
}

serialize_spelled!(FailureReason, Component);

impl OperationState {
    pub fn is_active(self) -> bool {
        matches!(self, OperationState::Pending | OperationState::InProgress | OperationState::AwaitingApproval)
    }
}

/// Labels of a runtime, as Kubernetes-style key/value pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, JsonSchema)]
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
    /// Refuse deprovisionings until it is turned off; left out, on for the environments the operator protects
    /// (`APP_PROTECTED_ENVIRONMENTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_protection: Option<bool>,
    /// Which plans apply without a person's approval; left out, `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<approval::ApprovalPolicy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "ClusterConfigInput", complex)]
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
    /// The one worker pool of Kyma's shape, the pool named `default`; give this or `workerPools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[graphql(skip_output)]
    pub worker_pool: Option<WorkerPool>,
    /// Several named worker pools (1 to 10); give this or `workerPool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[graphql(skip_output)]
    pub worker_pools: Option<Vec<NamedWorkerPool>>,
    pub network: Option<Network>,
    /// IPv4 ranges (CIDRs, at most 20) that may reach the cluster's Kubernetes API from outside its network;
    /// left out, the operator's list (`APP_API_ALLOWED_CIDRS`), and without one the request is refused. The ranges
    /// terraform-runner and host-cluster-controller connect from must be among them. A runtime shows the list it
    /// was built with; an upgrade may replace it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_allowed_cidrs: Option<Vec<String>>,
    pub aws: Option<AwsConfig>,
    pub gcp: Option<GcpConfig>,
    /// Sign-in through the organisation's identity providers and the cluster's administrators; left out, only
    /// the kubeconfig the provisioner hands out gets in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesAccess>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "ControlPlaneInput")]
pub struct ControlPlane {
    /// 1, 3 or 5 control-plane nodes (vanilla_kubeadm only).
    pub count: i32,
    pub machine_type: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "WorkerPoolInput")]
pub struct WorkerPool {
    pub machine_type: String,
    pub min_size: i32,
    pub max_size: i32,
    /// Disk of each worker node in GB; optional, as Kyma's `volumeSizeGB`: 50 when left out.
    #[serde(default = "default_disk_size_gb")]
    #[graphql(default_with = "DEFAULT_DISK_SIZE_GB")]
    #[schema(default = default_disk_size_gb)]
    pub disk_size_gb: i32,
}

/// A worker node's disk when the request names none, in GB.
pub const DEFAULT_DISK_SIZE_GB: i32 = 50;

fn default_disk_size_gb() -> i32 {
    DEFAULT_DISK_SIZE_GB
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "NetworkInput")]
pub struct Network {
    pub vpc_cidr: String,
    pub pod_cidr: String,
    pub service_cidr: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "AwsConfigInput")]
pub struct AwsConfig {
    pub zones: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "GcpConfigInput")]
pub struct GcpConfig {
    pub project_id: String,
    pub zones: Vec<String>,
}

/// What an upgrade changes; every field left out stays as it is (JSON merge semantics for REST's PATCH). Only
/// these can change on a running cluster: the rest of its configuration is fixed when it is provisioned. `null`
/// is refused (in a merge patch it would remove the field): leave a field out to keep it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, InputObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpgradeClusterInput {
    /// `MAJOR.MINOR`: only upwards; several minors ahead are applied one at a time, in one operation.
    #[schema(nullable = false)]
    pub kubernetes_version: Option<String>,
    /// Changes the pool named `default` (the single `workerPool`).
    #[schema(nullable = false)]
    pub worker_pool: Option<WorkerPoolUpgrade>,
    /// Replaces every pool: a pool left out is removed, a new name added, the others changed in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub worker_pools: Option<Vec<NamedWorkerPool>>,
    /// vanilla_kubeadm only.
    #[schema(nullable = false)]
    pub control_plane: Option<ControlPlaneUpgrade>,
    /// Replaces the IPv4 ranges that may reach the cluster's Kubernetes API (1 to 20); keep the ranges
    /// terraform-runner and host-cluster-controller connect from among them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub api_allowed_cidrs: Option<Vec<String>>,
    /// Replaces the identity providers and administrators whole (`{}` removes them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub kubernetes: Option<KubernetesAccess>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, InputObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(name = "WorkerPoolUpgradeInput")]
pub struct WorkerPoolUpgrade {
    #[schema(nullable = false)]
    pub machine_type: Option<String>,
    #[schema(nullable = false)]
    pub min_size: Option<i32>,
    #[schema(nullable = false)]
    pub max_size: Option<i32>,
    #[schema(nullable = false)]
    pub disk_size_gb: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, InputObject, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(name = "ControlPlaneUpgradeInput")]
pub struct ControlPlaneUpgrade {
    #[schema(nullable = false)]
    pub machine_type: Option<String>,
}

impl ClusterConfig {
    /// This configuration with the upgrade's fields replaced; a control-plane change of a topology without
    /// control-plane nodes is left for validation to refuse.
    pub fn upgraded(&self, upgrade: &UpgradeClusterInput) -> ClusterConfig {
        let mut config = self.clone();
        if let Some(version) = &upgrade.kubernetes_version {
            config.kubernetes_version = version.clone();
        }
        if let Some(pools) = &upgrade.worker_pools {
            config.worker_pools = Some(pools.clone());
            config.worker_pool = None;
        }
        if let Some(workers) = &upgrade.worker_pool {
            config.upgrade_default_pool(workers);
        }
        if let (Some(change), Some(control_plane)) = (&upgrade.control_plane, &mut config.control_plane)
            && let Some(machine_type) = &change.machine_type
        {
            control_plane.machine_type = machine_type.clone();
        }
        if let Some(cidrs) = &upgrade.api_allowed_cidrs {
            config.api_allowed_cidrs = Some(cidrs.clone());
        }
        if let Some(access) = &upgrade.kubernetes {
            config.kubernetes = Some(access.replacing(self.kubernetes.as_ref()));
        }
        config
    }
}

/// The GraphQL view of the pools: both shapes, whichever the request gave.
#[async_graphql::ComplexObject]
impl ClusterConfig {
    /// The pool named `default`, else the first: the single pool Kyma's clients know.
    async fn worker_pool(&self) -> async_graphql::Result<WorkerPool> {
        // Validation never lets a configuration without a pool in.
        self.main_pool().ok_or_else(|| "the runtime records no worker pool".into())
    }

    /// Every worker pool; a runtime requested with `workerPool` has one, named `default`.
    async fn worker_pools(&self) -> Vec<NamedWorkerPool> {
        self.pools()
    }
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
    /// Recorded by a dry-run provisioning: planned, never built; its name stays free for a real one.
    pub preview: bool,
    /// Its workers are scaled to zero (and a vanilla control plane is stopped) since a hibernation succeeded.
    pub hibernated: bool,
    /// Where its Terraform state lives, named once when it was created (see [`state_bucket`]).
    pub state_bucket: String,
    /// The tenant it was created for, if the request named one.
    pub tenant: Option<tenant::Tenant>,
    /// A deprovisioning is refused until this is turned off.
    pub deletion_protection: bool,
    /// Which plans of its runs wait for approval.
    pub approval_policy: approval::ApprovalPolicy,
    /// The `Runtime` resource that manages it, the only writer of its changes; `None`: the APIs change it.
    pub managed_by: Option<managed_by::ResourceRef>,
    /// When the kubeconfig last handed out for it expires (see [`kubeconfig_lifetime`]); `None` until one was
    /// minted, and for a cluster whose kubeconfig holds no credential.
    pub kubeconfig_expires_at: Option<DateTime<Utc>>,
    /// What the last read of its cluster's certificates saw (see [`certificates`]); `None` until one was read.
    pub certificates: Option<certificates::ObservedCertificates>,
}

impl Runtime {
    /// A new runtime for a request, with its first operation: the queued provisioning (only its plan, and the
    /// runtime a preview, for a dry run).
    pub fn requested(request: ProvisionRequest, dry_run: bool, now: DateTime<Utc>) -> (Runtime, Operation) {
        let id = Uuid::now_v7();
        let provider = ProviderVersion::pinned(request.cluster_config.topology.cloud());
        let operation = Operation { dry_run, ..Operation::queued(id, OperationType::Provision, provider, now) };
        let state_bucket =
            state_bucket::state_bucket_name(&request.cluster_config.environment, &request.runtime_input.name, id);
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
            preview: dry_run,
            hibernated: false,
            state_bucket,
            tenant: None,
            deletion_protection: request.runtime_input.deletion_protection.unwrap_or(false),
            approval_policy: request.runtime_input.approval_policy.unwrap_or_default(),
            managed_by: None,
            kubeconfig_expires_at: None,
            certificates: None,
        };
        (runtime, operation)
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
    fn spelled_enums_round_trip_and_refuse_unknown_values() {
        for reason in FailureReason::ALL {
            assert_eq!(FailureReason::parse(reason.as_str()), Some(*reason));
        }
        for component in Component::ALL {
            assert_eq!(Component::parse(component.as_str()), Some(*component));
        }
        for state in OperationState::ALL {
            assert_eq!(OperationState::parse(state.as_str()), Some(*state));
        }
        assert_eq!(OperationType::parse("Provision"), Some(OperationType::Provision));
        assert_eq!(OperationType::parse("Upgrade"), Some(OperationType::Upgrade));
        assert_eq!(OperationType::parse("upgrade"), None);
        assert_eq!(OperationType::parse("WakeUp"), Some(OperationType::WakeUp));
        assert_eq!(Component::AuthService.as_str(), "auth-service");
        assert_eq!(serde_json::to_string(&FailureReason::JobStillRunning).unwrap(), "\"job_still_running\"");
    }

    #[test]
    fn only_pending_and_in_progress_are_active() {
        assert!(OperationState::Pending.is_active());
        assert!(OperationState::InProgress.is_active());
        assert!(!OperationState::Succeeded.is_active());
        assert!(!OperationState::Failed.is_active());
    }

    #[test]
    fn only_a_hibernation_and_a_wake_up_change_whether_a_cluster_sleeps() {
        assert_eq!(OperationType::Hibernate.hibernated_after(), Some(true));
        assert_eq!(OperationType::WakeUp.hibernated_after(), Some(false));
        for other in [OperationType::Provision, OperationType::Upgrade, OperationType::Deprovision] {
            assert_eq!(other.hibernated_after(), None);
        }
    }

    #[test]
    fn an_upgrade_replaces_only_the_fields_it_names() {
        let current = ProvisionRequest::example(Topology::VanillaKubeadm).cluster_config;
        assert_eq!(current.upgraded(&UpgradeClusterInput::default()), current);
        let upgrade = UpgradeClusterInput {
            kubernetes_version: Some("1.35".to_owned()),
            worker_pool: Some(WorkerPoolUpgrade { max_size: Some(9), ..WorkerPoolUpgrade::default() }),
            worker_pools: None,
            control_plane: Some(ControlPlaneUpgrade { machine_type: Some("m6i.xlarge".to_owned()) }),
            api_allowed_cidrs: Some(vec!["198.51.100.0/24".to_owned()]),
            kubernetes: None,
        };
        let upgraded = current.upgraded(&upgrade);
        assert_eq!(upgraded.kubernetes_version, "1.35");
        let (pool, was) = (upgraded.worker_pool.as_ref().unwrap(), current.worker_pool.as_ref().unwrap());
        assert_eq!((pool.max_size, pool.min_size, &pool.machine_type), (9, was.min_size, &was.machine_type));
        assert_eq!(upgraded.control_plane.as_ref().unwrap().machine_type, "m6i.xlarge");
        assert_eq!(upgraded.control_plane.as_ref().unwrap().count, current.control_plane.as_ref().unwrap().count);
        assert_eq!(
            (upgraded.region.as_str(), upgraded.network.as_ref()),
            (current.region.as_str(), current.network.as_ref())
        );
        assert_eq!(upgraded.api_allowed_cidrs, Some(vec!["198.51.100.0/24".to_owned()]));
        let kept = current.upgraded(&UpgradeClusterInput {
            kubernetes_version: Some("1.35".to_owned()),
            ..UpgradeClusterInput::default()
        });
        assert_eq!(kept.api_allowed_cidrs, current.api_allowed_cidrs);
    }
}
