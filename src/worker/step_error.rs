//! How a step ends: the outcome the run goes on with, or an error that is retried or fails the run.

use crate::credentials;
use crate::domain::{Component, FailureReason, LastError};
use crate::{executor, store};

/// A failed step: transient ones are retried until the operation's deadline, permanent ones fail the run.
/// `error` is what the operation's status shows; `detail` (which may name internal addresses) goes to the log only.
#[derive(Debug)]
pub(super) struct StepError {
    pub(super) transient: bool,
    pub(super) error: LastError,
    pub(super) detail: String,
}

impl StepError {
    pub(super) fn permanent(reason: FailureReason, component: Component, message: impl Into<String>) -> Self {
        let error = LastError::new(reason, component, message);
        StepError { transient: false, detail: error.err_message.clone(), error }
    }
}

impl From<executor::Error> for StepError {
    fn from(error: executor::Error) -> Self {
        StepError {
            transient: error.is_transient(),
            error: LastError::new(FailureReason::KubernetesError, Component::Kubernetes, error.public_message()),
            detail: error.to_string(),
        }
    }
}

impl From<credentials::Error> for StepError {
    fn from(error: credentials::Error) -> Self {
        let component = error.component();
        let reason = match component {
            _ if error.is_not_found() => FailureReason::CredentialNotFound,
            _ if error.is_invalid_credential() => FailureReason::InvalidCredential,
            Component::Kubernetes => FailureReason::KubernetesError,
            _ => FailureReason::AuthServiceError,
        };
        StepError {
            transient: error.is_transient(),
            error: LastError::new(reason, component, error.public_message()),
            detail: error.to_string(),
        }
    }
}

impl From<store::Error> for StepError {
    fn from(error: store::Error) -> Self {
        StepError {
            transient: true,
            error: LastError::new(FailureReason::DatabaseError, Component::Database, "the database is unavailable"),
            detail: error.to_string(),
        }
    }
}

/// What a successful step says about the run.
#[derive(Debug, PartialEq)]
pub(super) enum StepOutcome {
    Next,
    /// The run failed (the Job failed, the outputs are missing): clean up, then end Failed.
    Fail(LastError),
    /// The run saved its plan for approval: clean up, then wait.
    HoldForApproval,
}
