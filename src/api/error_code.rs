//! Every code a request can be answered with (REST `code`, GraphQL `extensions.error_reason`): its HTTP status,
//! what it means, whether the same request may simply be sent again, and what the caller should do. The
//! catalogue in `docs/api/errors.md` and the problem type pages are generated from here.

use axum::http::StatusCode;

use crate::service::Conflict;

/// A request's error code; a conflict's code is the conflict's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidInput,
    NothingToChange,
    NotFound,
    Conflict(Conflict),
    IdempotencyKeyReused,
    PreconditionFailed,
    OverBudget,
    PayloadTooLarge,
    UnsupportedMediaType,
    BatchNotSupported,
    MethodNotAllowed,
    Unauthenticated,
    Forbidden,
    TooManyStreams,
    Overloaded,
    Unavailable,
    Timeout,
    Internal,
}

/// Whether sending the same request again can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Not as it is: the request itself has to change.
    No,
    /// Once the runtime's or operation's state has changed (an operation ended, a provisioning succeeded).
    AfterStateChange,
    /// After the `Retry-After` the answer names.
    AfterRetryAfter,
}

impl Retry {
    pub fn as_str(self) -> &'static str {
        match self {
            Retry::No => "no",
            Retry::AfterStateChange => "after the state changes",
            Retry::AfterRetryAfter => "after Retry-After",
        }
    }
}

/// What one code means to a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub title: &'static str,
    pub meaning: &'static str,
    pub retry: Retry,
    pub action: &'static str,
}

const PLAIN: [ErrorCode; 17] = [
    ErrorCode::InvalidInput,
    ErrorCode::NothingToChange,
    ErrorCode::NotFound,
    ErrorCode::IdempotencyKeyReused,
    ErrorCode::PreconditionFailed,
    ErrorCode::OverBudget,
    ErrorCode::PayloadTooLarge,
    ErrorCode::UnsupportedMediaType,
    ErrorCode::BatchNotSupported,
    ErrorCode::MethodNotAllowed,
    ErrorCode::Unauthenticated,
    ErrorCode::Forbidden,
    ErrorCode::TooManyStreams,
    ErrorCode::Overloaded,
    ErrorCode::Unavailable,
    ErrorCode::Timeout,
    ErrorCode::Internal,
];

impl ErrorCode {
    /// Every code, conflicts after the others.
    pub fn all() -> impl Iterator<Item = ErrorCode> {
        PLAIN.into_iter().chain(Conflict::ALL.iter().map(|conflict| ErrorCode::Conflict(*conflict)))
    }

    pub fn parse(value: &str) -> Option<ErrorCode> {
        ErrorCode::all().find(|code| code.as_str() == value)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::NothingToChange => "nothing_to_change",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict(conflict) => conflict.as_str(),
            ErrorCode::IdempotencyKeyReused => "idempotency_key_reused",
            ErrorCode::PreconditionFailed => "precondition_failed",
            ErrorCode::OverBudget => "over_budget",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::BatchNotSupported => "batch_not_supported",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TooManyStreams => "too_many_streams",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Internal => "internal",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidInput | ErrorCode::NothingToChange | ErrorCode::BatchNotSupported => {
                StatusCode::BAD_REQUEST
            }
            ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::Conflict(_) => StatusCode::CONFLICT,
            ErrorCode::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            ErrorCode::OverBudget | ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::TooManyStreams | ErrorCode::Overloaded => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Unavailable | ErrorCode::Timeout => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The problem type: a page the service serves, relative to its own address.
    pub fn problem_type(self) -> String {
        format!("{PROBLEM_TYPES_PATH}/{}", self.as_str())
    }

    pub fn entry(self) -> Entry {
        entry_of(self)
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The OpenAPI document lists the codes as an enum.
impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(ErrorCode::all().map(ErrorCode::as_str)))
            .into()
    }
}

impl utoipa::ToSchema for ErrorCode {}

/// Where the problem type pages are served: `{PROBLEM_TYPES_PATH}/{code}`.
pub const PROBLEM_TYPES_PATH: &str = "/api/v1/problems";

fn entry_of(code: ErrorCode) -> Entry {
    let (title, meaning, retry, action) = match code {
        ErrorCode::InvalidInput => (
            "Invalid input",
            "A field, header, path segment or query parameter is missing or has a value the service does not \
             accept; `errors` lists every such field.",
            Retry::No,
            "Correct the fields `errors` names.",
        ),
        ErrorCode::NothingToChange => (
            "Nothing to change",
            "An upgrade whose every field already has the requested value.",
            Retry::No,
            "Nothing to do: the runtime already has this configuration.",
        ),
        ErrorCode::NotFound => (
            "Not found",
            "No runtime, operation or path with this id or name (for a tenant's caller: none of its tenant).",
            Retry::No,
            "Check the id; a runtime deleted long ago may have been removed for good.",
        ),
        ErrorCode::IdempotencyKeyReused => (
            "Idempotency-Key reused",
            "The caller already used this Idempotency-Key for a different request.",
            Retry::No,
            "Use a new key for a new request; send a retry with exactly the first request's body.",
        ),
        ErrorCode::PreconditionFailed => (
            "Precondition failed",
            "If-Match names another version of the runtime than the current one: it changed since it was read.",
            Retry::No,
            "Read the runtime again (its new ETag) and decide whether the change still applies.",
        ),
        ErrorCode::OverBudget => (
            "Over budget",
            "The request would read more logs than one request may (APP_MAX_LOG_BYTES_PER_REQUEST).",
            Retry::No,
            "Ask for fewer lines (`tail`) or read them in pages.",
        ),
        ErrorCode::PayloadTooLarge => (
            "Payload too large",
            "The body is larger than the service accepts (APP_MAX_REQUEST_BODY_BYTES).",
            Retry::No,
            "Send a smaller body.",
        ),
        ErrorCode::UnsupportedMediaType => (
            "Unsupported media type",
            "The body is not sent as JSON (or, for PATCH, as a JSON merge patch).",
            Retry::No,
            "Send `Content-Type: application/json`.",
        ),
        ErrorCode::BatchNotSupported => (
            "Batch not supported",
            "A GraphQL batch (a JSON array of operations) would bypass the per-request limits.",
            Retry::No,
            "Send one GraphQL operation per request.",
        ),
        ErrorCode::MethodNotAllowed => (
            "Method not allowed",
            "The path exists, but not with this method.",
            Retry::No,
            "See the OpenAPI document for the path's methods.",
        ),
        ErrorCode::Unauthenticated
        | ErrorCode::Forbidden
        | ErrorCode::TooManyStreams
        | ErrorCode::Overloaded
        | ErrorCode::Unavailable
        | ErrorCode::Timeout
        | ErrorCode::Internal => return caller_or_capacity_entry(code),
        ErrorCode::Conflict(conflict) => return conflict_entry(conflict),
    };
    Entry { title, meaning, retry, action }
}

/// The codes of who may call and of what the service can take at the moment.
fn caller_or_capacity_entry(code: ErrorCode) -> Entry {
    let (title, meaning, retry, action) = match code {
        ErrorCode::Unauthenticated => (
            "Unauthenticated",
            "No valid bearer token: missing, expired, for another audience, or not a ServiceAccount token.",
            Retry::No,
            "Send a fresh ServiceAccount token for the service's audience as `Authorization: Bearer <token>`.",
        ),
        ErrorCode::Forbidden => (
            "Forbidden",
            "A valid identity that is not allowed this request (APP_AUTH_ALLOWED_USERS, or the RBAC check).",
            Retry::No,
            "Ask the operator to grant the caller the verb on the resource the message names.",
        ),
        ErrorCode::TooManyStreams => (
            "Too many streams",
            "The caller, or everyone together, holds as many open streams (logs, events, subscriptions) as allowed.",
            Retry::AfterRetryAfter,
            "Close a stream you no longer read, or try again after `Retry-After`.",
        ),
        ErrorCode::Overloaded => (
            "Overloaded",
            "More requests at once than the service takes (APP_MAX_CONCURRENT_REQUESTS); nothing was done.",
            Retry::AfterRetryAfter,
            "Send the same request again after `Retry-After`.",
        ),
        ErrorCode::Unavailable => (
            "Unavailable",
            "A dependency (`component`: database, auth-service, kubernetes) did not answer; nothing was recorded.",
            Retry::AfterRetryAfter,
            "Send the same request again after `Retry-After` (with its Idempotency-Key, a change is never doubled).",
        ),
        ErrorCode::Timeout => (
            "Timeout",
            "The request took longer than APP_REQUEST_TIMEOUT; a change may or may not have been recorded.",
            Retry::AfterRetryAfter,
            "Send the same request again with the same Idempotency-Key: it is answered with what the first one did.",
        ),
        ErrorCode::Internal => (
            "Internal error",
            "The service failed unexpectedly; the details are in its log under the request id (`instance`).",
            Retry::AfterRetryAfter,
            "Try again; if it persists, report the `instance` to the operator.",
        ),
        other => return entry_of(other),
    };
    Entry { title, meaning, retry, action }
}

fn conflict_entry(conflict: Conflict) -> Entry {
    let (title, meaning, retry, action) = match conflict {
        Conflict::OperationInProgress => (
            "Operation in progress",
            "Another operation runs on the runtime: only one at a time.",
            Retry::AfterStateChange,
            "Wait for the operation the message names to end (its events or its ETag), then send the change again.",
        ),
        Conflict::NameTaken => (
            "Name taken",
            "A runtime with this name exists (deleted runtimes and previews do not hold their names).",
            Retry::No,
            "Choose another name, or use the existing runtime.",
        ),
        Conflict::NotReady => (
            "Not ready",
            "The provisioning has not succeeded (yet), so there is no kubeconfig.",
            Retry::AfterStateChange,
            "Wait until the runtime's state is Ready.",
        ),
        Conflict::AlreadyDeprovisioned => (
            "Already deprovisioned",
            "The runtime is deprovisioned: nothing can change it any more.",
            Retry::No,
            "Provision a new runtime.",
        ),
        Conflict::NoRunnerPod => (
            "No runner pod",
            "The operation's runner pod does not exist (yet), so there are no live logs.",
            Retry::AfterStateChange,
            "Wait until the operation's stage is past the Job's creation, or read its kept logs once it ended.",
        ),
        Conflict::JobStillRunning => (
            "Job still running",
            "A Job of an earlier operation on the runtime is still running: only one Terraform per runtime.",
            Retry::AfterStateChange,
            "Wait for the earlier Job to end (a cancelled one stops within its grace period).",
        ),
        Conflict::Preview => (
            "Preview",
            "The runtime is the preview of a dry-run provisioning: there is no cluster to change.",
            Retry::No,
            "Provision without dryRun to get a cluster.",
        ),
        Conflict::Hibernated => (
            "Hibernated",
            "The runtime is hibernated: only a wake-up or a deprovisioning may change it.",
            Retry::AfterStateChange,
            "Wake the runtime up first.",
        ),
        Conflict::NotHibernated => (
            "Not hibernated",
            "A wake-up of a runtime that is not hibernated.",
            Retry::No,
            "Nothing to do: the runtime is awake.",
        ),
        Conflict::AlreadyEnded => (
            "Already ended",
            "A cancel of an operation that ended otherwise than cancelled.",
            Retry::No,
            "Nothing to cancel: read the operation's outcome.",
        ),
        Conflict::NotRetryable => (
            "Not retryable",
            "A retry of an operation that has not failed, is not its runtime's last operation, or failed for a \
             reason a new run cannot fix (the catalogue of reasons says which).",
            Retry::No,
            "Read the message: retry the runtime's last operation, or send a new request that removes the cause.",
        ),
        Conflict::DeletionProtected => (
            "Deletion protected",
            "The runtime has deletion protection: it cannot be deprovisioned while that is on.",
            Retry::AfterStateChange,
            "Turn the protection off (PATCH `{\"deletionProtection\": false}` or `setDeletionProtection`), then \
             deprovision it.",
        ),
        Conflict::ForceNotAllowed => (
            "Force not allowed",
            "A forced deprovisioning of a runtime whose last operation is not a deprovisioning that failed because \
             its credential is gone or refused: a run can still destroy it.",
            Retry::AfterStateChange,
            "Deprovision it without `force`; force only once that deprovisioning fails on its credential.",
        ),
        Conflict::ManagedByResource | Conflict::ManagedByTheCloud => return managed_conflict_entry(conflict),
        Conflict::NotAwaitingApproval | Conflict::PlanMismatch | Conflict::ApprovalExpired => {
            return approval_conflict_entry(conflict);
        }
        Conflict::UntrustedOutputs | Conflict::NothingToRotate => return kubeconfig_conflict_entry(conflict),
    };
    Entry { title, meaning, retry, action }
}

/// The refusals of a change that someone else makes: a `Runtime` resource, or the cloud.
fn managed_conflict_entry(conflict: Conflict) -> Entry {
    let (title, meaning, retry, action) = match conflict {
        Conflict::ManagedByResource => (
            "Managed by a resource",
            "A `Runtime` resource manages the runtime (the message names it as namespace/name): only a change of \
             that object changes the runtime; the APIs still read it and approve its plans.",
            Retry::No,
            "Change the `Runtime` object instead (`kubectl edit runtime/<name> -n <namespace>`, or its file in Git).",
        ),
        _ => (
            "Managed by the cloud",
            "The runtime's control plane is EKS's or GKE's: the cloud renews its certificates, and nothing here can \
             renew them.",
            Retry::No,
            "Nothing to do for EKS; on GKE, a CA near its end needs a credential rotation \
             (`gcloud container clusters update --start-credential-rotation`).",
        ),
    };
    Entry { title, meaning, retry, action }
}

/// The refusals of a kubeconfig read or rotation.
fn kubeconfig_conflict_entry(conflict: Conflict) -> Entry {
    let (title, meaning, retry, action) = match conflict {
        Conflict::UntrustedOutputs => (
            "Untrusted outputs",
            "The outputs Secret does not hold the kubeconfig the runtime's last checked apply published.",
            Retry::No,
            "Tell the operator: something other than the provisioner changed the outputs Secret.",
        ),
        _ => (
            "Nothing to rotate",
            "A rotation of a kubeconfig that holds no credential: its user gets short-lived tokens from the cloud's \
             plugin (EKS, GKE) on every use.",
            Retry::No,
            "Nothing to do: read the kubeconfig as it is.",
        ),
    };
    Entry { title, meaning, retry, action }
}

/// The refusals of an approval or a rejection of a plan.
fn approval_conflict_entry(conflict: Conflict) -> Entry {
    let (title, meaning, retry, action) = match conflict {
        Conflict::NotAwaitingApproval => (
            "Not awaiting approval",
            "An approval or rejection of an operation whose plan does not wait for approval (its state says why).",
            Retry::No,
            "Read the operation: only one in state AwaitingApproval can be approved or rejected.",
        ),
        Conflict::PlanMismatch => (
            "Plan mismatch",
            "The approval names another plan than the one the operation waits with.",
            Retry::No,
            "Read the operation and approve the `planSha256` it shows, after reviewing that plan.",
        ),
        _ => (
            "Approval expired",
            "The plan waited longer than `APP_PLAN_APPROVAL_TTL`; the operation failed with reason \
             `approval_expired` and nothing changed.",
            Retry::No,
            "Retry the operation for a new plan, and approve that one in time.",
        ),
    };
    Entry { title, meaning, retry, action }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_spelling_that_parses_back() {
        let spellings: std::collections::HashSet<_> = ErrorCode::all().map(ErrorCode::as_str).collect();
        assert_eq!(spellings.len(), ErrorCode::all().count(), "two codes share a spelling");
        for code in ErrorCode::all() {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
    }

    #[test]
    fn codes_a_caller_retries_after_a_delay_are_the_ones_answered_with_retry_after() {
        for code in ErrorCode::all() {
            let answered_with_retry_after =
                [StatusCode::TOO_MANY_REQUESTS, StatusCode::SERVICE_UNAVAILABLE, StatusCode::INTERNAL_SERVER_ERROR]
                    .contains(&code.status());
            assert_eq!(code.entry().retry == Retry::AfterRetryAfter, answered_with_retry_after, "{code:?}");
        }
    }
}
