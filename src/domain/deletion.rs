//! The two steps a deprovisioning passes first, decided without I/O: deletion protection (on a runtime until
//! someone turns it off) and, when the operator asks for it, a confirmation naming the runtime.

use std::collections::BTreeSet;
use std::fmt;

use super::Runtime;

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
    fn a_protected_runtime_is_refused_until_its_protection_is_off() {
        let mut runtime = runtime("shop-prod");
        assert_eq!(check_protection(&runtime), Ok(()));
        runtime.deletion_protection = true;
        assert_eq!(check_protection(&runtime), Err(DeletionRefusal::Protected));
        let policy = DeletionPolicy { protected_environments: ["prod".to_owned()].into(), ..DeletionPolicy::default() };
        assert!(policy.protects("prod") && !policy.protects("dev"));
    }
}
