//! The `Runtime` custom resource (`runtimes.provisioner.kubeopera.io`, `v1alpha1`): a runtime declared as a
//! Kubernetes object, so that `kubectl apply`, Argo CD and Flux can drive it. Its spec is the runtime's
//! configuration as the REST API takes it (the cluster's part flattened, the name is the object's), plus
//! `hibernated` and `adopt`; its status is what the provisioner observed, in Kubernetes' shapes.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::approval::ApprovalPolicy;
use crate::domain::{ClusterConfig, Labels};
use runner_contract::plan::PlanRisk;

/// The field manager of everything the provisioner writes of a Runtime and beside it.
pub const FIELD_MANAGER: &str = "cluster-provisioner";

/// What a Runtime asks for.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "provisioner.kubeopera.io",
    version = "v1alpha1",
    kind = "Runtime",
    root = "RuntimeResource",
    namespaced,
    status = "RuntimeResourceStatus",
    shortname = "rt",
    category = "kubeopera",
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Topology","type":"string","jsonPath":".spec.topology"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.kubernetesVersion"}"#,
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.region"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The runtime's own labels (the object's `metadata.labels` are Kubernetes').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    /// Refuse deprovisionings (the object keeps its finalizer) until it is turned off; left out, on for the
    /// environments the operator protects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_protection: Option<bool>,
    /// Which plans apply without a person's approval; left out, `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    /// The cluster, as REST's `clusterConfig` and GraphQL's `ClusterConfigInput`.
    #[serde(flatten)]
    pub cluster: ClusterConfig,
    /// Workers scaled to zero while true; woken up when set back to false.
    #[serde(default)]
    pub hibernated: bool,
    /// The id of a runtime created through the API that this object takes over; from then on only the object
    /// changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<Uuid>,
}

/// What the provisioner observed of a Runtime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeResourceStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<Uuid>,
    /// The runtime's state, as REST and GraphQL show it (`Provisioning`, `Ready`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Kubernetes' `metav1.Condition`s: `Ready`, `Provisioned`, `Progressing` as the REST runtime shows them, and
    /// `Reconciled` (false, with the reason, when the provisioner cannot act on the spec).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ResourceCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperationRef>,
    /// The plan that waits for a person's approval (`provisionerctl approve`), when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_plan: Option<WaitingPlan>,
    /// The Secret in the object's namespace that holds the cluster's kubeconfig (key `kubeconfig`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret_ref: Option<SecretRef>,
}

/// Kubernetes' `metav1.Condition` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceCondition {
    #[serde(rename = "type")]
    pub condition_type: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    /// RFC 3339.
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The runtime's last operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperationRef {
    pub id: Uuid,
    #[serde(rename = "type")]
    pub operation_type: String,
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

/// A plan held back by the approval policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingPlan {
    pub operation_id: Uuid,
    /// The digest an approval names.
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<PlanRisk>,
}

/// A Secret in the object's own namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SecretRef {
    pub name: String,
}
