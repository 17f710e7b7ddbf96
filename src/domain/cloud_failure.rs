//! The failures of a run on an answer of the cloud: the reason each class of answer shows as, and what each
//! means to a caller.

use runner_contract::failure::CloudFailureClass;

use super::failure_reasons::{ReasonEntry, Retried};
use super::{Component, FailureReason, LastError};

impl FailureReason {
    /// The reason a run that failed on this class of cloud answer shows; an answer of no known class is a
    /// failed Job like any other.
    pub fn of_cloud(class: CloudFailureClass) -> FailureReason {
        match class {
            CloudFailureClass::QuotaExceeded => FailureReason::QuotaExceeded,
            CloudFailureClass::Unauthenticated => FailureReason::Unauthenticated,
            CloudFailureClass::Unauthorized => FailureReason::Unauthorized,
            CloudFailureClass::RateLimited => FailureReason::RateLimited,
            CloudFailureClass::DependencyViolation => FailureReason::DependencyViolation,
            CloudFailureClass::InvalidConfiguration => FailureReason::InvalidConfiguration,
            CloudFailureClass::NotFound => FailureReason::NotFound,
            CloudFailureClass::Conflict => FailureReason::Conflict,
            CloudFailureClass::Unknown => FailureReason::JobFailed,
        }
    }

    /// Whether the reason is the cloud's answer.
    pub fn is_cloud(self) -> bool {
        CloudFailureClass::ALL
            .into_iter()
            .any(|class| class != CloudFailureClass::Unknown && Self::of_cloud(class) == self)
    }

    /// The catalogue's entry of a cloud reason (see [`FailureReason::entry`]).
    pub(super) fn cloud_entry(self) -> ReasonEntry {
        let (meaning, retried, action) = match self {
            FailureReason::QuotaExceeded => (
                "A limit of the cloud account or project is reached (VPCs, addresses, CPUs); the message names the \
                 resource and the limit.",
                Retried::Never,
                "Raise the quota with the cloud provider or free capacity, then retry the operation.",
            ),
            FailureReason::Unauthenticated => (
                "The cloud did not accept the credential (unknown, expired or malformed key).",
                Retried::Never,
                "Renew the credential in auth-service, then retry the operation.",
            ),
            FailureReason::Unauthorized => (
                "The cloud accepted the credential but refused the request: a permission is missing.",
                Retried::Never,
                "Grant the permission the message names to the credential's identity, then retry the operation.",
            ),
            FailureReason::RateLimited => (
                "The cloud throttled the requests, longer than the runner's retries lasted.",
                Retried::ByTheRunner,
                "Retry the operation later; tell the operator if it keeps happening.",
            ),
            FailureReason::DependencyViolation => (
                "Something still depends on what was to be changed or removed, longer than the runner's retries \
                 lasted.",
                Retried::ByTheRunner,
                "Remove what depends on the resource the message names (often something created outside the \
                 cluster's configuration), then retry the operation.",
            ),
            FailureReason::InvalidConfiguration => (
                "The cloud refused a value of the configuration (a version, a size, a CIDR).",
                Retried::Never,
                "After a failed upgrade, send the upgrade again with the value the message names changed (PATCH \
                 the runtime): a retry would send the same value. A failed provisioning left no cluster to change \
                 (a PATCH answers 409 `not_ready`, a retry runs the same configuration): deprovision the runtime, \
                 then provision it anew with the value changed (a deprovisioned runtime frees its name).",
            ),
            FailureReason::NotFound => (
                "Something the configuration refers to does not exist in the cloud (a network, an image, a role).",
                Retried::Never,
                "Create it, then retry the operation; or change the reference as for `invalid_configuration` (a \
                 retry runs the same configuration).",
            ),
            FailureReason::Conflict => (
                "Something of the same name already exists in the cloud outside the cluster's state, or someone \
                 else is changing the resource.",
                Retried::Never,
                "Remove or rename what is in the way (or wait for the other change), then retry the operation.",
            ),
            // `entry` passes only the reasons above; the test below reads every reason's entry.
            other => unreachable!("{other} is not a reason of the cloud's"),
        };
        ReasonEntry { meaning, retried, action }
    }
}

impl LastError {
    /// The error of a run that failed for `reason`: the cloud's when the cloud answered so, else the runner's.
    pub fn of_failed_run(reason: FailureReason, message: impl Into<String>) -> Self {
        let component = if reason.is_cloud() { Component::Cloud } else { Component::TerraformRunner };
        LastError::new(reason, component, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_known_class_has_a_reason_of_its_own_from_the_cloud() {
        let known: Vec<_> =
            CloudFailureClass::ALL.into_iter().filter(|class| *class != CloudFailureClass::Unknown).collect();
        let reasons: std::collections::HashSet<_> = known.iter().map(|class| FailureReason::of_cloud(*class)).collect();
        assert_eq!(reasons.len(), known.len());
        for class in known {
            let reason = FailureReason::of_cloud(class);
            assert_eq!(reason.as_str(), class.as_str(), "the reason is spelled as the runner's class");
            assert_eq!(LastError::of_failed_run(reason, "m").component, Component::Cloud);
        }
        assert_eq!(FailureReason::of_cloud(CloudFailureClass::Unknown), FailureReason::JobFailed);
        assert_eq!(LastError::of_failed_run(FailureReason::JobFailed, "m").component, Component::TerraformRunner);
    }

    #[test]
    fn every_reason_has_an_entry_in_the_catalogue() {
        for reason in FailureReason::ALL {
            assert!(!reason.entry().meaning.is_empty(), "{reason}");
        }
    }
}
