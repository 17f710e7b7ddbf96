//! The two steps a deprovisioning passes first, decided without I/O: deletion protection (on a runtime until
//! someone turns it off) and, when the operator asks for it, a confirmation naming the runtime. And the way out
//! for a runtime nothing can destroy any more: a forced deprovisioning.

use std::collections::BTreeSet;
use std::fmt;

use async_graphql::SimpleObject;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{FailureReason, Operation, OperationState, OperationType, Runtime};

/// What a forced deprovisioning left: it marks the runtime deleted without a run, so nothing in the cloud was
/// destroyed, and this is what may remain there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase")]
#[graphql(name = "ForcedDeprovisioning")]
#[schema(as = ForcedDeprovisioning)]
pub struct Forced {
    /// The cloud resources the runtime's last apply recorded (`<address> <ARN, self link or id>`).
    pub remaining: Vec<String>,
    /// Whether an apply recorded them at all; when not, anything carrying the runtime's tag may remain.
    pub inventory_recorded: bool,
}

/// The operator's deletion rules (`APP_PROTECTED_ENVIRONMENTS`, `APP_REQUIRE_DELETE_CONFIRMATION`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeletionPolicy {
    /// Runtimes created in these environments are protected unless their request says otherwise.
    pub protected_environments: BTreeSet<String>,
    /// Every deprovisioning names the runtime (`confirm`); off by default, as Kyma's clients never send it.
    pub require_confirmation: bool,
}

/// Why a deprovisioning is refused before anything is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionRefusal {
    /// The runtime is protected: its protection has to be turned off first.
    Protected,
    /// The operator requires a confirmation and the request has none.
    ConfirmationMissing,
    /// The request's confirmation does not name the runtime.
    ConfirmationMismatch,
    /// A forced deprovisioning always names the runtime, whatever the operator requires.
    ForceNotConfirmed,
    /// Forcing is only for a runtime whose last deprovisioning failed because its credential is gone or refused.
    ForceNotNeeded,
}

impl DeletionPolicy {
    /// Whether a runtime created in `environment` is protected, when its request says nothing.
    pub fn protects(&self, environment: &str) -> bool {
        self.protected_environments.contains(environment)
    }

    /// Whether the request's `confirm` is what a deprovisioning needs: the runtime's name when one is sent (a
    /// wrong one is refused whether or not confirmations are required), and one at all when they are.
    pub fn check_confirmation(&self, runtime: &Runtime, confirm: Option<&str>) -> Result<(), DeletionRefusal> {
        match confirm {
            Some(name) if name == runtime.name => Ok(()),
            Some(_) => Err(DeletionRefusal::ConfirmationMismatch),
            None if self.require_confirmation => Err(DeletionRefusal::ConfirmationMissing),
            None => Ok(()),
        }
    }
}

/// Whether a deprovisioning of `runtime` may be queued now, as far as its protection goes.
pub fn check_protection(runtime: &Runtime) -> Result<(), DeletionRefusal> {
    if runtime.deletion_protection { Err(DeletionRefusal::Protected) } else { Ok(()) }
}

/// Whether `runtime` may be deprovisioned by force: its name confirmed, and its last operation a deprovisioning
/// that failed because the cloud or auth-service refused its credential, so no run can destroy it.
pub fn check_force(runtime: &Runtime, last: &Operation, confirm: Option<&str>) -> Result<(), DeletionRefusal> {
    if confirm != Some(runtime.name.as_str()) {
        return Err(DeletionRefusal::ForceNotConfirmed);
    }
    let refused_credential = last.last_error.as_ref().is_some_and(|error| error.reason.is_refused_credential());
    let failed_deprovisioning =
        last.operation_type == OperationType::Deprovision && last.state == OperationState::Failed;
    if failed_deprovisioning && refused_credential { Ok(()) } else { Err(DeletionRefusal::ForceNotNeeded) }
}

impl FailureReason {
    /// The credential is gone or refused: by auth-service (none, or not valid) or by the cloud.
    pub fn is_refused_credential(self) -> bool {
        matches!(
            self,
            FailureReason::CredentialNotFound
                | FailureReason::InvalidCredential
                | FailureReason::Unauthenticated
                | FailureReason::Unauthorized
        )
    }
}

impl fmt::Display for DeletionRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            DeletionRefusal::Protected => {
                "the runtime has deletion protection; turn it off first (PATCH {\"deletionProtection\": false}, or \
                 setDeletionProtection(id, enabled: false))"
            }
            DeletionRefusal::ConfirmationMissing => {
                "a deprovisioning must be confirmed: send confirm=<the runtime's name> (APP_REQUIRE_DELETE_CONFIRMATION)"
            }
            DeletionRefusal::ConfirmationMismatch => "confirm does not name the runtime: send the runtime's name",
            DeletionRefusal::ForceNotConfirmed => {
                "a forced deprovisioning leaves the cluster's resources in the cloud: send confirm=<the runtime's name>"
            }
            DeletionRefusal::ForceNotNeeded => {
                "force is only for a runtime whose last deprovisioning failed because its credential is gone or \
                 refused (credential_not_found, invalid_credential, unauthenticated, unauthorized); deprovision it \
                 without force"
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ProvisionRequest, Topology};

    fn runtime(name: &str) -> Runtime {
        let request = ProvisionRequest::example_named(Topology::Eks, name);
        Runtime::requested(request, false, chrono::Utc::now()).0
    }

    #[test]
    fn a_confirmation_names_the_runtime_and_is_needed_only_when_the_operator_requires_it() {
        let kyma = DeletionPolicy::default();
        let strict = DeletionPolicy { require_confirmation: true, ..DeletionPolicy::default() };
        let runtime = runtime("shop-prod");
        assert_eq!(kyma.check_confirmation(&runtime, None), Ok(()), "Kyma's deprovisionRuntime(id) keeps working");
        assert_eq!(strict.check_confirmation(&runtime, None), Err(DeletionRefusal::ConfirmationMissing));
        assert_eq!(strict.check_confirmation(&runtime, Some("shop-prod")), Ok(()));
        for policy in [&kyma, &strict] {
            assert_eq!(policy.check_confirmation(&runtime, Some("shop")), Err(DeletionRefusal::ConfirmationMismatch));
        }
    }

    #[test]
    fn only_a_confirmed_runtime_whose_deprovisioning_lost_its_credential_is_forced() {
        use crate::domain::{Cloud, Component, LastError, ProviderVersion};
        let runtime = runtime("shop-prod");
        let failed = |operation_type, reason| Operation {
            state: OperationState::Failed,
            last_error: Some(LastError::new(reason, Component::Cloud, "refused")),
            ..Operation::queued(runtime.id, operation_type, ProviderVersion::pinned(Cloud::Aws), chrono::Utc::now())
        };
        let revoked = failed(OperationType::Deprovision, FailureReason::Unauthorized);
        assert_eq!(check_force(&runtime, &revoked, Some("shop-prod")), Ok(()));
        assert_eq!(check_force(&runtime, &revoked, None), Err(DeletionRefusal::ForceNotConfirmed));
        assert_eq!(check_force(&runtime, &revoked, Some("shop")), Err(DeletionRefusal::ForceNotConfirmed));
        let gone = failed(OperationType::Deprovision, FailureReason::CredentialNotFound);
        assert_eq!(check_force(&runtime, &gone, Some("shop-prod")), Ok(()));
        for last in [
            failed(OperationType::Deprovision, FailureReason::JobFailed),
            failed(OperationType::Deprovision, FailureReason::CredentialMismatch),
            failed(OperationType::Upgrade, FailureReason::Unauthorized),
            Operation { state: OperationState::Succeeded, ..revoked.clone() },
        ] {
            assert_eq!(
                check_force(&runtime, &last, Some("shop-prod")),
                Err(DeletionRefusal::ForceNotNeeded),
                "{last:?}"
            );
        }
    }

    #[test]
    fn a_protected_runtime_is_refused_until_its_protection_is_off() {
        let mut runtime = runtime("shop-prod");
        assert_eq!(check_protection(&runtime), Ok(()));
        runtime.deletion_protection = true;
        assert_eq!(check_protection(&runtime), Err(DeletionRefusal::Protected));
        let policy = DeletionPolicy { protected_environments: ["prod".to_owned()].into(), ..DeletionPolicy::default() };
        assert!(policy.protects("prod") && !policy.protects("dev"));
    }
}
