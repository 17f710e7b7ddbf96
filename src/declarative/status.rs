//! A Runtime's status from what the service shows of its runtime: the same state and conditions as REST and
//! GraphQL, in Kubernetes' shapes, with the `Ready` condition `kubectl wait --for=condition=Ready` waits for.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::domain::{OperationState, RuntimeState};
use crate::service::RuntimeStatus;

use super::resource::{LastOperationRef, ResourceCondition, RuntimeResourceStatus, SecretRef, WaitingPlan};

/// The condition that says the provisioner cannot act on the spec as it is (false, with the reason); true once it
/// could.
pub const RECONCILED: &str = "Reconciled";
pub const READY: &str = "Ready";

/// Why the provisioner cannot act on a Runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// A PascalCase reason (`InvalidSpec`, `NameTaken`, ...).
    pub reason: String,
    pub message: String,
}

/// The status of a Runtime of `generation` whose runtime is `runtime`; `kubeconfig_secret` once it holds the
/// kubeconfig; `refusal` when the spec could not be acted on. A condition keeps its transition time while its
/// status stays (`before` is the status the object had).
pub fn resource_status(
    runtime: &RuntimeStatus,
    generation: Option<i64>,
    kubeconfig_secret: Option<&str>,
    refusal: Option<&Refusal>,
    before: Option<&RuntimeResourceStatus>,
    now: DateTime<Utc>,
) -> RuntimeResourceStatus {
    let operation = &runtime.last_operation.operation;
    let mut conditions: Vec<ResourceCondition> = runtime
        .summary
        .conditions
        .iter()
        .map(|condition| ResourceCondition {
            condition_type: condition.condition_type.as_str().to_owned(),
            status: condition.status.as_str().to_owned(),
            reason: condition.reason.as_str().to_owned(),
            message: condition.message.clone(),
            last_transition_time: rfc3339(condition.last_transition_time),
            observed_generation: generation,
        })
        .collect();
    let state = runtime.summary.state;
    let ready = state == RuntimeState::Ready && !runtime.runtime.preview;
    conditions.push(condition(before, READY, ready, state.as_str(), &ready_message(state), generation, now));
    let (reconciled, reason, message) = match refusal {
        Some(refusal) => (false, refusal.reason.as_str(), refusal.message.as_str()),
        None => (true, "Accepted", "the provisioner acts on this spec"),
    };
    conditions.push(condition(before, RECONCILED, reconciled, reason, message, generation, now));
    RuntimeResourceStatus {
        observed_generation: generation,
        runtime_id: Some(runtime.runtime.id),
        state: Some(state.as_str().to_owned()),
        conditions,
        last_operation: Some(LastOperationRef {
            id: operation.id,
            operation_type: operation.operation_type.as_str().to_owned(),
            state: operation.state.as_str().to_owned(),
            stage: Some(operation.stage.as_str().to_owned()),
        }),
        waiting_plan: (operation.state == OperationState::AwaitingApproval)
            .then(|| operation.saved_plan_sha256.clone())
            .flatten()
            .map(|sha256| WaitingPlan {
                operation_id: operation.id,
                sha256,
                risk: operation.plan_summary.as_ref().and_then(|plan| plan.risk),
            }),
        kubeconfig_secret_ref: kubeconfig_secret.map(|name| SecretRef { name: name.to_owned() }),
    }
}

/// The status of a Runtime the provisioner could not act on before it had a runtime.
pub fn refused_status(
    generation: Option<i64>,
    refusal: &Refusal,
    before: Option<&RuntimeResourceStatus>,
    now: DateTime<Utc>,
) -> RuntimeResourceStatus {
    let conditions = vec![
        condition(before, READY, false, &refusal.reason, &refusal.message, generation, now),
        condition(before, RECONCILED, false, &refusal.reason, &refusal.message, generation, now),
    ];
    RuntimeResourceStatus { observed_generation: generation, conditions, ..RuntimeResourceStatus::default() }
}

fn ready_message(state: RuntimeState) -> String {
    match state {
        RuntimeState::Ready => "the cluster exists and nothing changes it".to_owned(),
        other => format!("the runtime is {}", other.as_str()),
    }
}

fn condition(
    before: Option<&RuntimeResourceStatus>,
    condition_type: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> ResourceCondition {
    let status = if status { "True" } else { "False" };
    let unchanged_since = before
        .into_iter()
        .flat_map(|before| &before.conditions)
        .find(|earlier| earlier.condition_type == condition_type && earlier.status == status)
        .map(|earlier| earlier.last_transition_time.clone());
    ResourceCondition {
        condition_type: condition_type.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: unchanged_since.unwrap_or_else(|| rfc3339(now)),
        observed_generation: generation,
    }
}

fn rfc3339(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Secs, true)
}
