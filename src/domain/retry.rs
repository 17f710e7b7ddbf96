//! Which failed operation a caller may retry: the rule both APIs answer with, decided without I/O.

use std::fmt;

use uuid::Uuid;

use super::{FailureReason, Operation, OperationState};

/// Whether a new run of the same operation can succeed where one failed with a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retryable {
    /// The cause may be gone: a transient error, a deadline, a cancel, a Job deleted by someone else.
    Yes,
    /// Only once the credential passes the check a provisioning makes (it was missing, malformed, or of another
    /// cloud): a retry against the same credential fails the same way.
    OnceTheCredentialPasses,
    /// A new run fails the same way; the text says why and what to do instead.
    No(&'static str),
}

impl Retryable {
    /// As the catalogue of reasons shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Retryable::Yes => "yes",
            Retryable::OnceTheCredentialPasses => "once the credential is fixed",
            Retryable::No(_) => "no",
        }
    }
}

impl FailureReason {
    /// Whether `retryOperation` accepts an operation that failed for this reason.
    pub fn retryable(self) -> Retryable {
        match self {
            FailureReason::CredentialNotFound
            | FailureReason::InvalidCredential
            | FailureReason::CredentialMismatch => Retryable::OnceTheCredentialPasses,
            FailureReason::DestructivePlan => Retryable::No(
                "its plan destroys or replaces a protected resource and a new plan of the same request does the same; \
                 change the request so it keeps the resource",
            ),
            FailureReason::RenderFailed => Retryable::No(
                "the same configuration renders the same way; change the request, or tell the operator if the \
                 message names a fault of the provisioner",
            ),
            // Something other than the runner wrote the outputs: someone has to look before anything runs again.
            FailureReason::UntrustedOutputs => Retryable::No(
                "something other than the runner changed the outputs Secret; the operator has to find out what \
                 first",
            ),
            FailureReason::RuntimeMissing => Retryable::No("the runtime's record is gone"),
            FailureReason::KubernetesError
            | FailureReason::AuthServiceError
            | FailureReason::DatabaseError
            | FailureReason::StepTimeout
            | FailureReason::Timeout
            | FailureReason::JobStillRunning
            | FailureReason::JobFailed
            | FailureReason::JobMissing
            | FailureReason::MissingOutputs
            | FailureReason::AttemptsExhausted
            | FailureReason::Cancelled
            // A new run plans again; a plan that must wait waits again.
            | FailureReason::StalePlan
            | FailureReason::PlanRejected
            | FailureReason::ApprovalExpired
            // A cloud's refusal is fixed outside (a quota raised, a permission granted), then retried.
            | FailureReason::QuotaExceeded
            | FailureReason::Unauthenticated
            | FailureReason::Unauthorized
            | FailureReason::RateLimited
            | FailureReason::DependencyViolation
            | FailureReason::InvalidConfiguration
            | FailureReason::NotFound
            | FailureReason::Conflict
            // A deprovisioning again looks again, once they are removed.
            | FailureReason::Leftovers => Retryable::Yes,
        }
    }
}

/// Why an operation cannot be retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryRefusal {
    /// Only a failed operation is retried.
    NotFailed { operation: Uuid, state: OperationState },
    /// Another operation on the runtime came after it: retrying an older one would undo or repeat it.
    NotLast { operation: Uuid, last: Uuid },
    /// Its failure is one a new run cannot fix.
    Unfixable { operation: Uuid, reason: FailureReason, why: &'static str },
}

impl fmt::Display for RetryRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryRefusal::NotFailed { operation, state } => {
                write!(formatter, "operation {operation} is {state}; only a failed operation can be retried")
            }
            RetryRefusal::NotLast { operation, last } => write!(
                formatter,
                "operation {operation} is not the runtime's last operation: {last} came after it; retry that one if \
                 it failed"
            ),
            RetryRefusal::Unfixable { operation, reason, why } => {
                write!(formatter, "operation {operation} failed with reason {reason}, which a retry cannot fix: {why}")
            }
        }
    }
}

/// Why `failed` cannot be retried now that `last` is its runtime's last operation, or `None` when it can (its
/// credential still to be checked when [`FailureReason::retryable`] says so).
pub fn retry_refusal(failed: &Operation, last: &Operation) -> Option<RetryRefusal> {
    if failed.state != OperationState::Failed {
        return Some(RetryRefusal::NotFailed { operation: failed.id, state: failed.state });
    }
    if last.id != failed.id {
        return Some(RetryRefusal::NotLast { operation: failed.id, last: last.id });
    }
    let reason = failed.last_error.as_ref()?.reason;
    match reason.retryable() {
        Retryable::No(why) => Some(RetryRefusal::Unfixable { operation: failed.id, reason, why }),
        Retryable::Yes | Retryable::OnceTheCredentialPasses => None,
    }
}

/// The answer to a repeated retry: the retry of `failed` that is `last`, while it runs or once it succeeded (a
/// failed retry is retried in its own right).
pub fn retried_already(failed: &Operation, last: &Operation) -> bool {
    last.retry_of == Some(failed.id) && last.state != OperationState::Failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Component, LastError, OperationType, ProviderVersion, Topology};

    fn failed(reason: FailureReason) -> Operation {
        let provider = ProviderVersion::pinned(Topology::Eks.cloud());
        Operation {
            state: OperationState::Failed,
            last_error: Some(LastError {
                err_message: "it failed".to_owned(),
                reason,
                component: Component::TerraformRunner,
            }),
            ..Operation::queued(Uuid::now_v7(), OperationType::Upgrade, provider, chrono::Utc::now())
        }
    }

    #[test]
    fn the_last_failed_operation_is_retried_unless_its_reason_cannot_be_fixed_by_a_new_run() {
        let job_failed = failed(FailureReason::JobFailed);
        assert_eq!(retry_refusal(&job_failed, &job_failed), None);
        let credential = failed(FailureReason::InvalidCredential);
        assert_eq!(retry_refusal(&credential, &credential), None, "the service checks the credential");
        let destructive = failed(FailureReason::DestructivePlan);
        assert!(matches!(
            retry_refusal(&destructive, &destructive),
            Some(RetryRefusal::Unfixable { reason: FailureReason::DestructivePlan, .. })
        ));
    }

    #[test]
    fn only_a_failed_operation_that_nothing_followed_is_retried() {
        let earlier = failed(FailureReason::JobFailed);
        let later = failed(FailureReason::JobFailed);
        assert_eq!(
            retry_refusal(&earlier, &later),
            Some(RetryRefusal::NotLast { operation: earlier.id, last: later.id })
        );
        let succeeded = Operation { state: OperationState::Succeeded, ..failed(FailureReason::JobFailed) };
        assert_eq!(
            retry_refusal(&succeeded, &succeeded),
            Some(RetryRefusal::NotFailed { operation: succeeded.id, state: OperationState::Succeeded })
        );
    }

    #[test]
    fn a_repeated_retry_finds_the_retry_unless_that_failed_too() {
        let original = failed(FailureReason::Timeout);
        let running = Operation {
            retry_of: Some(original.id),
            state: OperationState::InProgress,
            ..failed(FailureReason::Timeout)
        };
        assert!(retried_already(&original, &running));
        let failed_again = Operation { retry_of: Some(original.id), ..failed(FailureReason::Timeout) };
        assert!(!retried_already(&original, &failed_again));
        assert!(!retried_already(&original, &original));
    }
}
