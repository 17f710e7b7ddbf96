//! What a runtime is, as a controller reads it: one state and Kubernetes-style conditions, derived from the
//! runtime's record and its last operation (as Kyma's infrastructure-manager reports its Runtime), so no client
//! has to combine the last operation's type, its state and the hibernation flag itself.

use async_graphql::{Enum, SimpleObject};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::certificates::{EXPIRING_WITHIN, ObservedCertificates};
use super::{Operation, OperationState, OperationType, Runtime};

spelled! {
    /// The runtime's state.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Enum, ToSchema)]
    #[graphql(rename_items = "PascalCase")]
    pub enum RuntimeState {
        /// Its provisioning is queued or running (for a preview: its plan).
        Provisioning => "Provisioning",
        /// Its cluster exists and nothing changes it (for a preview: its plan is done; it never has a cluster).
        Ready => "Ready",
        /// An upgrade or a wake-up is queued or running.
        Updating => "Updating",
        /// A hibernation is queued or running.
        Hibernating => "Hibernating",
        /// Its workers are scaled to zero since a hibernation succeeded.
        Hibernated => "Hibernated",
        /// Its last operation failed (see that operation's `lastError`), or it was never provisioned.
        Failed => "Failed",
        /// Its deprovisioning is queued or running.
        Deprovisioning => "Deprovisioning",
        /// It was deprovisioned.
        Deleted => "Deleted",
    }
}

spelled! {
    /// What a condition is about.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Enum, ToSchema)]
    #[graphql(rename_items = "PascalCase")]
    pub enum ConditionType {
        /// Whether the runtime's cluster exists.
        Provisioned => "Provisioned",
        /// Whether an operation of the runtime is queued or running.
        Progressing => "Progressing",
        /// Whether one of its cluster's certificates expires within 30 days (shown once they were read).
        CertificatesExpiring => "CertificatesExpiring",
    }
}

spelled! {
    /// A condition's status, spelled as Kubernetes spells it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Enum, ToSchema)]
    #[graphql(rename_items = "PascalCase")]
    pub enum ConditionStatus {
        True => "True",
        False => "False",
    }
}

spelled! {
    /// Why a condition has its status.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Enum, ToSchema)]
    #[graphql(rename_items = "PascalCase")]
    pub enum ConditionReason {
        /// `Provisioned`: its provisioning succeeded.
        ProvisioningSucceeded => "ProvisioningSucceeded",
        /// `Provisioned`: its first provisioning is queued or running.
        Provisioning => "Provisioning",
        /// `Provisioned`: its provisioning failed, so it never had a cluster.
        ProvisioningFailed => "ProvisioningFailed",
        /// `Provisioned`: it was deprovisioned.
        Deprovisioned => "Deprovisioned",
        /// `Provisioned`: a preview (a dry-run provisioning) only plans.
        Preview => "Preview",
        /// `Progressing`: a provisioning is queued or running.
        Provision => "Provision",
        /// `Progressing`: a deprovisioning is queued or running.
        Deprovision => "Deprovision",
        /// `Progressing`: an upgrade is queued or running.
        Upgrade => "Upgrade",
        /// `Progressing`: a hibernation is queued or running.
        Hibernate => "Hibernate",
        /// `Progressing`: a wake-up is queued or running.
        WakeUp => "WakeUp",
        /// `Progressing`: a certificate renewal is queued or running.
        RenewCertificates => "RenewCertificates",
        /// `Progressing`: the last operation succeeded.
        Succeeded => "Succeeded",
        /// `Progressing`: the last operation failed.
        Failed => "Failed",
        /// `CertificatesExpiring`: one expires within 30 days, or has expired.
        CertificateExpiresSoon => "CertificateExpiresSoon",
        /// `CertificatesExpiring`: every one it could read is valid for more than 30 days.
        CertificatesValid => "CertificatesValid",
    }
}

/// One observation of the runtime, as Kubernetes objects report them.
#[derive(Debug, Clone, PartialEq, Serialize, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    #[graphql(name = "type")]
    pub condition_type: ConditionType,
    pub status: ConditionStatus,
    pub reason: ConditionReason,
    pub message: String,
    /// When the status last changed.
    pub last_transition_time: DateTime<Utc>,
}

/// A runtime's state and conditions.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeSummary {
    pub state: RuntimeState,
    pub conditions: Vec<Condition>,
}

impl RuntimeSummary {
    /// `provisioned_at`: when its provisioning (not a dry run) succeeded, if it did.
    pub fn of(runtime: &Runtime, last_operation: &Operation, provisioned_at: Option<DateTime<Utc>>) -> Self {
        RuntimeSummary {
            state: state(runtime, last_operation, provisioned_at.is_some()),
            conditions: vec![provisioned(runtime, last_operation, provisioned_at), progressing(last_operation)],
        }
    }
}

fn state(runtime: &Runtime, last_operation: &Operation, provisioned: bool) -> RuntimeState {
    if runtime.deleted_at.is_some() {
        return RuntimeState::Deleted;
    }
    // A dry run (an upgrade's, on a live runtime) only plans: the runtime is what it was.
    if last_operation.dry_run && !runtime.preview {
        return settled(runtime, provisioned);
    }
    match last_operation.state {
        OperationState::Pending | OperationState::InProgress | OperationState::AwaitingApproval => match last_operation
            .operation_type
        {
            OperationType::Provision => RuntimeState::Provisioning,
            OperationType::Upgrade | OperationType::WakeUp | OperationType::RenewCertificates => RuntimeState::Updating,
            OperationType::Hibernate => RuntimeState::Hibernating,
            OperationType::Deprovision => RuntimeState::Deprovisioning,
        },
        OperationState::Failed => RuntimeState::Failed,
        OperationState::Succeeded if runtime.preview => RuntimeState::Ready,
        OperationState::Succeeded => settled(runtime, provisioned),
    }
}

/// The state of a live runtime when nothing changes it.
fn settled(runtime: &Runtime, provisioned: bool) -> RuntimeState {
    match (provisioned, runtime.hibernated) {
        (false, _) => RuntimeState::Failed,
        (true, true) => RuntimeState::Hibernated,
        (true, false) => RuntimeState::Ready,
    }
}

fn provisioned(runtime: &Runtime, last_operation: &Operation, provisioned_at: Option<DateTime<Utc>>) -> Condition {
    let condition = |status, reason, message: &str, since| Condition {
        condition_type: ConditionType::Provisioned,
        status,
        reason,
        message: message.to_owned(),
        last_transition_time: since,
    };
    let never_provisioned = |reason, message| condition(ConditionStatus::False, reason, message, runtime.created_at);
    match (runtime.deleted_at, provisioned_at) {
        (Some(deleted_at), Some(_)) => condition(
            ConditionStatus::False,
            ConditionReason::Deprovisioned,
            "the cluster was deprovisioned",
            deleted_at,
        ),
        (Some(_), None) => never_provisioned(ConditionReason::Deprovisioned, "deprovisioned; it never had a cluster"),
        _ if runtime.preview => never_provisioned(ConditionReason::Preview, "a preview only plans"),
        (None, Some(at)) => {
            condition(ConditionStatus::True, ConditionReason::ProvisioningSucceeded, "the cluster exists", at)
        }
        (None, None)
            if last_operation.state.is_active() && last_operation.operation_type == OperationType::Provision =>
        {
            never_provisioned(ConditionReason::Provisioning, "the cluster is being provisioned")
        }
        (None, None) => never_provisioned(ConditionReason::ProvisioningFailed, "the provisioning failed"),
    }
}

fn progressing(last_operation: &Operation) -> Condition {
    let (status, reason, message, since) = match last_operation.state {
        OperationState::Pending | OperationState::InProgress => (
            ConditionStatus::True,
            running_reason(last_operation.operation_type),
            last_operation.message.clone(),
            last_operation.created_at,
        ),
        ended => {
            let reason =
                if ended == OperationState::Failed { ConditionReason::Failed } else { ConditionReason::Succeeded };
            let message = match &last_operation.last_error {
                Some(error) if ended == OperationState::Failed => error.err_message.clone(),
                _ => last_operation.message.clone(),
            };
            (ConditionStatus::False, reason, message, last_operation.finished_at.unwrap_or(last_operation.updated_at))
        }
    };
    Condition { condition_type: ConditionType::Progressing, status, reason, message, last_transition_time: since }
}

/// `CertificatesExpiring` of a live runtime whose certificates were read: true from 30 days before the first
/// runs out (its transition time); while false, its transition time is when they were last read.
pub fn certificates_expiring(runtime: &Runtime, now: DateTime<Utc>) -> Option<Condition> {
    let observed: &ObservedCertificates = runtime.certificates.as_ref()?;
    if runtime.deleted_at.is_some() || runtime.preview {
        return None;
    }
    let condition = |status, reason, message: String, since| Condition {
        condition_type: ConditionType::CertificatesExpiring,
        status,
        reason,
        message,
        last_transition_time: since,
    };
    Some(match (observed.expiring(now), observed.expiries.first()) {
        (Some(expiring), _) => condition(
            ConditionStatus::True,
            ConditionReason::CertificateExpiresSoon,
            format!(
                "the {} certificate expires at {}: renew the cluster's certificates",
                expiring.certificate,
                expiring.not_after.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            expiring.not_after - EXPIRING_WITHIN,
        ),
        (None, Some(soonest)) => condition(
            ConditionStatus::False,
            ConditionReason::CertificatesValid,
            format!(
                "the first to expire, {}, is valid until {}",
                soonest.certificate,
                soonest.not_after.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            observed.read_at,
        ),
        (None, None) => return None,
    })
}

fn running_reason(operation_type: OperationType) -> ConditionReason {
    match operation_type {
        OperationType::Provision => ConditionReason::Provision,
        OperationType::Deprovision => ConditionReason::Deprovision,
        OperationType::Upgrade => ConditionReason::Upgrade,
        OperationType::Hibernate => ConditionReason::Hibernate,
        OperationType::WakeUp => ConditionReason::WakeUp,
        OperationType::RenewCertificates => ConditionReason::RenewCertificates,
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;
    use crate::domain::{Component, FailureReason, LastError, ProviderVersion, Topology};

    /// A live EKS runtime created at `created`, and its `operation_type` queued a minute later.
    fn runtime_with(operation_type: OperationType) -> (Runtime, Operation) {
        let runtime = Runtime::example(Topology::Eks);
        let queued = runtime.created_at + Duration::minutes(1);
        let provider = ProviderVersion::pinned(Topology::Eks.cloud());
        let operation = Operation::queued(runtime.id, operation_type, provider, queued);
        (runtime, operation)
    }

    fn ended(mut operation: Operation, state: OperationState) -> Operation {
        operation.state = state;
        operation.finished_at = Some(operation.created_at + Duration::minutes(5));
        if state == OperationState::Failed {
            operation.last_error =
                Some(LastError::new(FailureReason::JobFailed, Component::TerraformRunner, "apply failed"));
        }
        operation
    }

    fn condition(summary: &RuntimeSummary, condition_type: ConditionType) -> &Condition {
        summary.conditions.iter().find(|condition| condition.condition_type == condition_type).expect("the condition")
    }

    #[test]
    fn a_queued_provisioning_is_provisioning_and_not_yet_provisioned() {
        let (runtime, operation) = runtime_with(OperationType::Provision);
        let summary = RuntimeSummary::of(&runtime, &operation, None);
        assert_eq!(summary.state, RuntimeState::Provisioning);
        let provisioned = condition(&summary, ConditionType::Provisioned);
        assert_eq!((provisioned.status, provisioned.reason), (ConditionStatus::False, ConditionReason::Provisioning));
        assert_eq!(provisioned.last_transition_time, runtime.created_at);
        let progressing = condition(&summary, ConditionType::Progressing);
        assert_eq!((progressing.status, progressing.reason), (ConditionStatus::True, ConditionReason::Provision));
        assert_eq!(progressing.last_transition_time, operation.created_at);
    }

    #[test]
    fn a_succeeded_provisioning_is_ready_since_it_ended() {
        let (runtime, operation) = runtime_with(OperationType::Provision);
        let operation = ended(operation, OperationState::Succeeded);
        let summary = RuntimeSummary::of(&runtime, &operation, operation.finished_at);
        assert_eq!(summary.state, RuntimeState::Ready);
        let provisioned = condition(&summary, ConditionType::Provisioned);
        assert_eq!(provisioned.status, ConditionStatus::True);
        assert_eq!(Some(provisioned.last_transition_time), operation.finished_at);
        let progressing = condition(&summary, ConditionType::Progressing);
        assert_eq!((progressing.status, progressing.reason), (ConditionStatus::False, ConditionReason::Succeeded));
        assert_eq!(Some(progressing.last_transition_time), operation.finished_at);
    }

    #[test]
    fn every_running_change_names_its_state_and_keeps_the_cluster_provisioned() {
        let provisioned_at = Some(Runtime::example(Topology::Eks).created_at);
        for (operation_type, expected, reason) in [
            (OperationType::Upgrade, RuntimeState::Updating, ConditionReason::Upgrade),
            (OperationType::WakeUp, RuntimeState::Updating, ConditionReason::WakeUp),
            (OperationType::Hibernate, RuntimeState::Hibernating, ConditionReason::Hibernate),
            (OperationType::Deprovision, RuntimeState::Deprovisioning, ConditionReason::Deprovision),
        ] {
            let (runtime, mut operation) = runtime_with(operation_type);
            operation.state = OperationState::InProgress;
            let summary = RuntimeSummary::of(&runtime, &operation, provisioned_at);
            assert_eq!(summary.state, expected, "{operation_type}");
            assert_eq!(condition(&summary, ConditionType::Provisioned).status, ConditionStatus::True);
            assert_eq!(condition(&summary, ConditionType::Progressing).reason, reason);
        }
    }

    #[test]
    fn a_succeeded_hibernation_is_hibernated() {
        let (mut runtime, operation) = runtime_with(OperationType::Hibernate);
        runtime.hibernated = true;
        let operation = ended(operation, OperationState::Succeeded);
        let summary = RuntimeSummary::of(&runtime, &operation, Some(runtime.created_at));
        assert_eq!(summary.state, RuntimeState::Hibernated);
    }

    #[test]
    fn a_failed_upgrade_is_failed_with_its_error_and_the_cluster_still_provisioned() {
        let (runtime, operation) = runtime_with(OperationType::Upgrade);
        let operation = ended(operation, OperationState::Failed);
        let summary = RuntimeSummary::of(&runtime, &operation, Some(runtime.created_at));
        assert_eq!(summary.state, RuntimeState::Failed);
        assert_eq!(condition(&summary, ConditionType::Provisioned).status, ConditionStatus::True);
        let progressing = condition(&summary, ConditionType::Progressing);
        assert_eq!((progressing.reason, progressing.message.as_str()), (ConditionReason::Failed, "apply failed"));
    }

    #[test]
    fn a_failed_provisioning_never_provisioned_the_runtime() {
        let (runtime, operation) = runtime_with(OperationType::Provision);
        let operation = ended(operation, OperationState::Failed);
        let summary = RuntimeSummary::of(&runtime, &operation, None);
        assert_eq!(summary.state, RuntimeState::Failed);
        let provisioned = condition(&summary, ConditionType::Provisioned);
        assert_eq!(provisioned.reason, ConditionReason::ProvisioningFailed);
        assert_eq!(provisioned.last_transition_time, runtime.created_at);
    }

    #[test]
    fn a_deprovisioned_runtime_is_deleted_since_its_deprovisioning() {
        let (mut runtime, operation) = runtime_with(OperationType::Deprovision);
        let operation = ended(operation, OperationState::Succeeded);
        runtime.deleted_at = operation.finished_at;
        let summary = RuntimeSummary::of(&runtime, &operation, Some(runtime.created_at));
        assert_eq!(summary.state, RuntimeState::Deleted);
        let provisioned = condition(&summary, ConditionType::Provisioned);
        assert_eq!((provisioned.status, provisioned.reason), (ConditionStatus::False, ConditionReason::Deprovisioned));
        assert_eq!(Some(provisioned.last_transition_time), runtime.deleted_at);
    }

    #[test]
    fn an_upgrades_dry_run_leaves_the_state_as_it_was() {
        let (mut runtime, mut operation) = runtime_with(OperationType::Upgrade);
        operation.dry_run = true;
        operation.state = OperationState::InProgress;
        assert_eq!(RuntimeSummary::of(&runtime, &operation, Some(runtime.created_at)).state, RuntimeState::Ready);
        runtime.hibernated = true;
        let summary = RuntimeSummary::of(&runtime, &operation, Some(runtime.created_at));
        assert_eq!(summary.state, RuntimeState::Hibernated);
        assert_eq!(condition(&summary, ConditionType::Progressing).status, ConditionStatus::True);
    }

    #[test]
    fn a_preview_follows_its_plan_and_is_never_provisioned() {
        let (mut runtime, mut operation) = runtime_with(OperationType::Provision);
        runtime.preview = true;
        operation.dry_run = true;
        assert_eq!(RuntimeSummary::of(&runtime, &operation, None).state, RuntimeState::Provisioning);
        let planned = ended(operation.clone(), OperationState::Succeeded);
        let summary = RuntimeSummary::of(&runtime, &planned, None);
        assert_eq!(summary.state, RuntimeState::Ready);
        let provisioned = condition(&summary, ConditionType::Provisioned);
        assert_eq!((provisioned.status, provisioned.reason), (ConditionStatus::False, ConditionReason::Preview));
        let failed = ended(operation, OperationState::Failed);
        assert_eq!(RuntimeSummary::of(&runtime, &failed, None).state, RuntimeState::Failed);
    }

    #[test]
    fn certificates_expiring_is_shown_once_read_for_a_live_runtime_only() {
        use crate::domain::certificates::{CertificateExpiry, ObservedCertificates, WatchedCertificate};
        let (mut runtime, _) = runtime_with(OperationType::Provision);
        let now = runtime.created_at + Duration::days(1);
        assert_eq!(certificates_expiring(&runtime, now), None, "not read yet");
        let serving_end = now + Duration::days(40);
        let expiry = CertificateExpiry { certificate: WatchedCertificate::ApiServerServing, not_after: serving_end };
        runtime.certificates = Some(ObservedCertificates::new(now, vec![expiry]));

        let valid = certificates_expiring(&runtime, now).expect("the condition");
        assert_eq!((valid.status, valid.reason), (ConditionStatus::False, ConditionReason::CertificatesValid));
        assert_eq!(valid.last_transition_time, now, "as last read");
        let expiring = certificates_expiring(&runtime, now + Duration::days(11)).expect("the condition");
        assert_eq!(
            (expiring.status, expiring.reason),
            (ConditionStatus::True, ConditionReason::CertificateExpiresSoon)
        );
        assert_eq!(expiring.last_transition_time, serving_end - Duration::days(30));
        assert!(expiring.message.contains("ApiServerServing"), "{}", expiring.message);

        runtime.deleted_at = Some(now);
        assert_eq!(certificates_expiring(&runtime, now), None, "a deprovisioned runtime has no certificates to renew");
    }
}
