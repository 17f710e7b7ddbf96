//! What a use case answers when it cannot do what was asked: one error type for both APIs.

use super::streams;
use super::validation::{Invalid, Rejected};
use crate::domain::run_log::LogBudget;
use crate::domain::{Component, Operation, spelled};
use crate::executor::{self};
use crate::store::{self};

spelled! {
    /// Why a request conflicts with the state of a runtime; `as_str()` is the code both APIs show.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Conflict {
        /// Only one asynchronous operation per runtime at a time.
        OperationInProgress => "operation_in_progress",
        NameTaken => "name_taken",
        /// The provisioning has not succeeded (yet), so there is no kubeconfig.
        NotReady => "not_ready",
        AlreadyDeprovisioned => "already_deprovisioned",
        /// No runner pod exists yet, so there are no logs.
        NoRunnerPod => "no_runner_pod",
        /// A Job of an earlier operation on the runtime is still running: only one Terraform per runtime at a time.
        JobStillRunning => "job_still_running",
        /// The runtime is the preview of a dry-run provisioning: there is no cluster to change.
        Preview => "preview",
        /// The runtime is hibernated: only a wake-up or a deprovisioning may change it.
        Hibernated => "hibernated",
        /// A wake-up of a runtime that is not hibernated.
        NotHibernated => "not_hibernated",
        /// A cancel of an operation that has already ended.
        AlreadyEnded => "already_ended",
        /// A certificate renewal of a runtime whose control plane the cloud manages (EKS, GKE).
        ManagedByTheCloud => "managed_by_the_cloud",
        /// The outputs Secret does not hold the kubeconfig the runtime's last checked apply published.
        UntrustedOutputs => "untrusted_outputs",
        /// A retry of an operation that has not failed, is not the runtime's last, or failed for a reason a new
        /// run cannot fix.
        NotRetryable => "not_retryable",
        /// A deprovisioning of a runtime whose deletion protection is on.
        DeletionProtected => "deletion_protected",
        /// A forced deprovisioning of a runtime whose last deprovisioning did not fail on its credential.
        ForceNotAllowed => "force_not_allowed",
        /// An approval or rejection of an operation that does not wait for approval.
        NotAwaitingApproval => "not_awaiting_approval",
        /// An approval that names another plan than the one that waits.
        PlanMismatch => "plan_mismatch",
        /// An approval after the plan's approval time ran out.
        ApprovalExpired => "approval_expired",
        /// A change through the APIs of a runtime a `Runtime` resource manages: only the resource changes it.
        ManagedByResource => "managed_by_resource",
        /// A rotation of a kubeconfig that holds no credential of its own (a cloud's token plugin).
        NothingToRotate => "nothing_to_rotate",
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid {}: {}", .0.first.field, .0.first.message)]
    Invalid(Rejected),
    /// An upgrade whose every field already has the requested value.
    #[error("nothing to change: runtime {runtime_id} already has this configuration")]
    NothingToChange { runtime_id: String },
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("{message}")]
    Conflict { conflict: Conflict, message: String },
    #[error("the Idempotency-Key was already used for a different request")]
    IdempotencyKeyReused,
    /// A request that reads more logs than one request may (`APP_MAX_LOG_BYTES_PER_REQUEST`).
    #[error("{message}")]
    OverBudget { message: String },
    /// A new stream over the caps (`APP_MAX_STREAMS_PER_CALLER`, `APP_MAX_STREAMS`).
    #[error("{message}")]
    TooManyStreams { message: String },
    /// A dependency did not answer; `message` says what the caller can do (never an internal address).
    #[error("{component} is unavailable: {message}")]
    Unavailable { component: Component, message: String },
    #[error(transparent)]
    Store(store::Error),
}

impl From<store::Error> for Error {
    fn from(error: store::Error) -> Self {
        if error.is_unavailable() {
            // One line when the database goes and one when it is back, not one per request; the detail (host, OS
            // error) is in the first.
            crate::telemetry::Dependency::Database.failed(&error);
            return Error::Unavailable {
                component: Component::Database,
                message: "it did not answer in time; nothing was changed, try again shortly".to_owned(),
            };
        }
        Error::Store(error)
    }
}

impl From<Invalid> for Error {
    fn from(invalid: Invalid) -> Self {
        Error::Invalid(invalid.into())
    }
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::Invalid(rejected)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(super) fn executor_error(error: executor::Error) -> Error {
    crate::telemetry::Dependency::Kubernetes.failed(&error);
    Error::Unavailable {
        component: Component::Kubernetes,
        message: format!("{}; try again shortly", error.public_message()),
    }
}

pub(super) fn operation_in_progress(operation: &Operation) -> Error {
    Error::Conflict {
        conflict: Conflict::OperationInProgress,
        message: format!(
            "runtime {} already has an active {:?} operation {} ({:?}); only one operation per runtime runs at a time",
            operation.runtime_id, operation.operation_type, operation.id, operation.state
        ),
    }
}

pub(super) fn too_many(what: &str, caller: &str, full: streams::Full) -> Error {
    let message = match full {
        streams::Full::Caller(limit) => {
            format!("{caller} already holds {limit} open {what} (APP_MAX_STREAMS_PER_CALLER); close one first")
        }
        streams::Full::Total(limit) => format!("the service holds {limit} open {what} (APP_MAX_STREAMS); retry later"),
    };
    Error::TooManyStreams { message }
}

pub(super) fn over_budget(budget: &LogBudget) -> Error {
    Error::OverBudget {
        message: format!(
            "the logs asked for are longer than the {} bytes one request may read; ask for fewer (or a tail)",
            budget.total()
        ),
    }
}
