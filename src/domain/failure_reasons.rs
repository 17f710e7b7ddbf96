//! What each `lastError.reason` means to a caller: whether the worker tries again by itself, and what to do.
//! `docs/api/errors.md` is generated from here.

use super::FailureReason;

/// Whether the worker tries the step again by itself (the operation shows `retrying` meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retried {
    /// Always, until the operation's deadline.
    ByTheWorker,
    /// When the cause is transient (no answer, a server error); a refusal fails the operation at once.
    WhenTransient,
    /// By the runner within its run (`RUNNER_TRANSIENT_RETRIES`, with backoff); this reason shows once they are
    /// spent.
    ByTheRunner,
    /// Never: the operation fails.
    Never,
}

impl Retried {
    pub fn as_str(self) -> &'static str {
        match self {
            Retried::ByTheWorker => "yes, until the deadline",
            Retried::WhenTransient => "when transient",
            Retried::ByTheRunner => "yes, by the runner within its run",
            Retried::Never => "no: the operation fails",
        }
    }
}

/// What one failure reason means to a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReasonEntry {
    pub meaning: &'static str,
    pub retried: Retried,
    pub action: &'static str,
}

impl FailureReason {
    pub fn entry(self) -> ReasonEntry {
        let (meaning, retried, action) = match self {
            FailureReason::KubernetesError => (
                "A request to the Kubernetes cluster the Jobs run in failed, or its API server did not answer.",
                Retried::WhenTransient,
                "Tell the operator if it lasts: the message names the request.",
            ),
            FailureReason::AuthServiceError => (
                "auth-service did not answer, answered with an error, or sent an invalid response.",
                Retried::WhenTransient,
                "Tell the operator if it lasts; retry the operation once auth-service answers.",
            ),
            FailureReason::DatabaseError => (
                "The provisioner's database did not answer.",
                Retried::ByTheWorker,
                "Nothing: the step runs again once the database answers.",
            ),
            FailureReason::StepTimeout => (
                "One try of a step took longer than its limit.",
                Retried::ByTheWorker,
                "Nothing: the step runs again until the operation's deadline.",
            ),
            FailureReason::Timeout => (
                "The operation's deadline passed before it ended; its Job was stopped.",
                Retried::Never,
                "Read its logs; retry the operation (Terraform continues from the state it left).",
            ),
            FailureReason::JobStillRunning => (
                "A Job of another operation on the runtime is still running: only one Terraform per runtime.",
                Retried::ByTheWorker,
                "Nothing: the step waits until the earlier Job ends.",
            ),
            FailureReason::RenderFailed => (
                "The Terraform configuration could not be rendered from the runtime's configuration.",
                Retried::Never,
                "Tell the operator: the message names what did not render.",
            ),
            FailureReason::JobFailed => (
                "Terraform failed in the Job, not on a cloud answer of a known class (those have reasons of their \
                 own below).",
                Retried::Never,
                "Read the operation's logs, fix the cause in the cloud account, and retry the operation.",
            ),
            FailureReason::DestructivePlan => (
                "The plan destroys or replaces a protected resource, so it was not applied; nothing changed.",
                Retried::Never,
                "Review the plan (a dry run shows it) and change the request so it keeps the resource.",
            ),
            FailureReason::JobMissing => (
                "The operation's Job disappeared before it finished (deleted by someone else).",
                Retried::Never,
                "Retry the operation; tell the operator who deletes Jobs.",
            ),
            FailureReason::MissingOutputs => (
                "The Job succeeded but published no kubeconfig.",
                Retried::Never,
                "Tell the operator: the runner's logs say why.",
            ),
            FailureReason::UntrustedOutputs => (
                "The outputs Secret does not hold the kubeconfig the run's own pod reported publishing.",
                Retried::Never,
                "Tell the operator: something other than the runner changed the outputs Secret.",
            ),
            FailureReason::RuntimeMissing => {
                ("The runtime record disappeared while its operation ran.", Retried::Never, "Tell the operator.")
            }
            FailureReason::AttemptsExhausted => (
                "The operation was started too often without progress (the service restarted during it each time).",
                Retried::Never,
                "Tell the operator; retry the operation once the service is stable.",
            ),
            FailureReason::Leftovers => (
                "The deprovisioning destroyed the state and deleted what it could of what no state knew, but \
                 resources carrying the runtime's tag remain in the cloud (of a kind the runner does not delete, or \
                 still in use after its retries); the message names each.",
                Retried::Never,
                "Delete what the message names (or what keeps it in use), then retry the deprovisioning; the state \
                 bucket stays until nothing is left.",
            ),
            FailureReason::Cancelled => (
                "A caller cancelled the operation (the message names who); its outcome is Cancelled.",
                Retried::Never,
                "Retry the operation if it is still wanted.",
            ),
            FailureReason::CredentialNotFound
            | FailureReason::InvalidCredential
            | FailureReason::CredentialMismatch => {
                return self.credential_entry();
            }
            FailureReason::StalePlan | FailureReason::PlanRejected | FailureReason::ApprovalExpired => {
                return self.approval_entry();
            }
            // The rest are the cloud's answers; `cloud_entry` names each.
            cloud => return cloud.cloud_entry(),
        };
        ReasonEntry { meaning, retried, action }
    }

    /// The reasons of a credential that does not pass.
    fn credential_entry(self) -> ReasonEntry {
        let (meaning, retried, action) = match self {
            FailureReason::CredentialNotFound => (
                "auth-service has no credential with the runtime's `credentialId`.",
                Retried::Never,
                "Create the credential in auth-service, then retry the operation.",
            ),
            FailureReason::InvalidCredential => (
                "A value auth-service sent for the credential does not have its format; nothing was written.",
                Retried::Never,
                "Fix the credential in auth-service, then retry the operation.",
            ),
            _ => (
                "The credential is not of the kind the topology needs (an AWS key for GKE, another account, ...), \
                 or a GCP credential's `projectId` is not the request's and its `projectIds` do not list it.",
                Retried::Never,
                "Point the runtime at a credential of the topology's cloud, or list the runtime's project in the \
                 credential's `projectIds` in auth-service.",
            ),
        };
        ReasonEntry { meaning, retried, action }
    }

    /// The reasons of plans held back for approval.
    fn approval_entry(self) -> ReasonEntry {
        let (meaning, retried, action) = match self {
            FailureReason::StalePlan => (
                "The approved plan could not be applied: the state changed since it was planned, or the saved plan \
                 is gone; nothing changed.",
                Retried::Never,
                "Retry the operation: it plans again, and the new plan waits for approval.",
            ),
            FailureReason::PlanRejected => (
                "A caller rejected the plan that waited for approval (the message names who); nothing changed.",
                Retried::Never,
                "Change the request if the plan was wrong, or retry the operation for a new plan.",
            ),
            _ => (
                "Nobody approved the plan within the approval time (`APP_PLAN_APPROVAL_TTL`); nothing changed.",
                Retried::Never,
                "Retry the operation: it plans again, and the new plan waits for approval.",
            ),
        };
        ReasonEntry { meaning, retried, action }
    }
}
