//! Why a run failed in the cloud, read from Terraform's diagnostics: the class of the cloud's answer, the resource
//! it was about and the provider's message. A run that failed so exits with [`EXIT_CLOUD_FAILURE`] and writes a
//! [`RunFailure`] as its termination message, so that the service can show a reason a user can act on; transient
//! classes the runner itself tries again first.

use serde::{Deserialize, Serialize};

/// The runner's exit code when Terraform failed on an answer of the cloud; the termination message is a
/// [`RunFailure`].
pub const EXIT_CLOUD_FAILURE: i32 = 5;

/// The runner's exit code when a deprovisioning destroyed its state but resources carrying the runtime's tag are
/// still there; the termination message is a [`Leftovers`].
pub const EXIT_LEFTOVERS: i32 = 6;

/// The tag (AWS) every resource of a runtime carries, with the runtime's id: what a deprovisioning looks for
/// afterwards.
pub const RUNTIME_ID_TAG: &str = "kubeopera.io/runtime-id";

/// [`RUNTIME_ID_TAG`] as a GCP label: GCP label keys take neither `.` nor `/`.
pub const RUNTIME_ID_LABEL: &str = "kubeopera-runtime-id";

/// The class of a cloud's error answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloudFailureClass {
    /// A limit of the account or project (VPCs, addresses, CPUs) is reached.
    QuotaExceeded,
    /// The cloud did not accept the credential (unknown, expired or malformed key).
    Unauthenticated,
    /// The credential is accepted but may not do this.
    Unauthorized,
    /// Throttled: too many requests.
    RateLimited,
    /// Something still depends on what was to be changed or removed (often for a moment only).
    DependencyViolation,
    /// The cloud refused a value of the configuration.
    InvalidConfiguration,
    /// Something the configuration refers to does not exist.
    NotFound,
    /// Something of the same name exists already, or is being changed by someone else.
    Conflict,
    /// None of the above.
    Unknown,
}

impl CloudFailureClass {
    pub const ALL: [CloudFailureClass; 9] = [
        CloudFailureClass::QuotaExceeded,
        CloudFailureClass::Unauthenticated,
        CloudFailureClass::Unauthorized,
        CloudFailureClass::RateLimited,
        CloudFailureClass::DependencyViolation,
        CloudFailureClass::InvalidConfiguration,
        CloudFailureClass::NotFound,
        CloudFailureClass::Conflict,
        CloudFailureClass::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CloudFailureClass::QuotaExceeded => "quota_exceeded",
            CloudFailureClass::Unauthenticated => "unauthenticated",
            CloudFailureClass::Unauthorized => "unauthorized",
            CloudFailureClass::RateLimited => "rate_limited",
            CloudFailureClass::DependencyViolation => "dependency_violation",
            CloudFailureClass::InvalidConfiguration => "invalid_configuration",
            CloudFailureClass::NotFound => "not_found",
            CloudFailureClass::Conflict => "conflict",
            CloudFailureClass::Unknown => "unknown",
        }
    }

    /// Gone by itself after a while: the runner plans and applies again, with backoff, within the Job's deadline.
    pub fn is_transient(self) -> bool {
        matches!(self, CloudFailureClass::RateLimited | CloudFailureClass::DependencyViolation)
    }

    /// Only a person can fix it (a quota, a permission, a value, something outside the state); a retry of the
    /// operation helps once they did.
    pub fn needs_a_person(self) -> bool {
        !self.is_transient() && self != CloudFailureClass::Unknown
    }

    /// The class of one error diagnostic's text (its summary and detail): by the error code AWS or Google names,
    /// else by the HTTP status of the answer.
    pub fn classify(text: &str) -> CloudFailureClass {
        let code = aws_error_code(text).or_else(|| google_reason(text));
        code.and_then(class_of_code).or_else(|| http_status(text).and_then(class_of_status)).unwrap_or(Self::Unknown)
    }
}

/// AWS error codes that mean throttling (the SDK's own list, and EC2's).
const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "RequestLimitExceeded",
    "EC2ThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "PriorRequestNotComplete",
    // Google: per-user and per-project request rates.
    "rateLimitExceeded",
    "userRateLimitExceeded",
    "RATE_LIMIT_EXCEEDED",
];

const UNAUTHENTICATED_CODES: &[&str] = &[
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "InvalidAccessKeyId",
    "ExpiredToken",
    "ExpiredTokenException",
    "MissingAuthenticationToken",
    "authError",
    "UNAUTHENTICATED",
];

const UNAUTHORIZED_CODES: &[&str] =
    &["UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "forbidden", "PERMISSION_DENIED"];

const INVALID_CODES: &[&str] = &[
    "InvalidParameter",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "InvalidParameterException",
    "InvalidRequestException",
    "ValidationError",
    "ValidationException",
    "MalformedPolicyDocument",
    "InvalidInput",
    "invalid",
    "badRequest",
    "INVALID_ARGUMENT",
];

const CONFLICT_CODES: &[&str] = &[
    "ResourceInUseException",
    "ConflictException",
    "IncorrectState",
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "EntityAlreadyExists",
    "alreadyExists",
    "conflict",
    "resourceInUseByAnotherResource",
    "ALREADY_EXISTS",
];

fn class_of_code(code: &str) -> Option<CloudFailureClass> {
    let class = if THROTTLING_CODES.contains(&code) {
        CloudFailureClass::RateLimited
    } else if code.ends_with("LimitExceeded")
        || code.ends_with("LimitExceededException")
        || code.contains("QuotaExceeded")
        || code.eq_ignore_ascii_case("quotaExceeded")
    {
        CloudFailureClass::QuotaExceeded
    } else if UNAUTHENTICATED_CODES.contains(&code) {
        CloudFailureClass::Unauthenticated
    } else if UNAUTHORIZED_CODES.contains(&code) {
        CloudFailureClass::Unauthorized
    } else if code == "DependencyViolation" {
        CloudFailureClass::DependencyViolation
    } else if INVALID_CODES.contains(&code) || code.starts_with("InvalidParameter") {
        CloudFailureClass::InvalidConfiguration
    } else if CONFLICT_CODES.contains(&code) || code.ends_with(".Duplicate") || code.ends_with("AlreadyExists") {
        CloudFailureClass::Conflict
    } else if code.ends_with("NotFound")
        || code.ends_with("NotFoundException")
        || code.starts_with("NoSuch")
        || code == "notFound"
        || code == "NOT_FOUND"
    {
        CloudFailureClass::NotFound
    } else {
        return None;
    };
    Some(class)
}

fn class_of_status(status: u16) -> Option<CloudFailureClass> {
    Some(match status {
        401 => CloudFailureClass::Unauthenticated,
        403 => CloudFailureClass::Unauthorized,
        404 => CloudFailureClass::NotFound,
        409 => CloudFailureClass::Conflict,
        429 => CloudFailureClass::RateLimited,
        _ => return None,
    })
}

/// The code of an AWS SDK error: `api error <Code>: ...` (query and XML services) or, for JSON services, the
/// word before the colon after `RequestID: <id>, `.
fn aws_error_code(text: &str) -> Option<&str> {
    if let Some((_, rest)) = text.split_once("api error ") {
        return code_before_colon(rest);
    }
    let (_, rest) = text.split_once("RequestID: ")?;
    let (_, rest) = rest.split_once(", ")?;
    code_before_colon(rest)
}

/// The reason Google's API client appends to an error: `googleapi: Error 403: <message>, <reason>`.
fn google_reason(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once("googleapi: Error ")?;
    let first_line = rest.lines().next()?;
    let reason = first_line.rsplit(", ").next()?.trim().trim_end_matches('.');
    is_code(reason).then_some(reason)
}

fn code_before_colon(text: &str) -> Option<&str> {
    let (code, _) = text.split_once(':')?;
    is_code(code).then_some(code)
}

fn is_code(word: &str) -> bool {
    !word.is_empty() && word.len() <= 80 && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
}

/// The HTTP status of the answer: AWS's `StatusCode: 403`, Google's `Error 403:`.
fn http_status(text: &str) -> Option<u16> {
    ["StatusCode: ", "googleapi: Error "].iter().find_map(|marker| {
        let (_, rest) = text.split_once(marker)?;
        rest.get(..3)?.parse().ok()
    })
}

/// A cloud failure as the run reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudFailure {
    pub class: CloudFailureClass,
    /// The address of the resource Terraform was changing, when the diagnostic names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// The termination message of a run that exits with [`EXIT_CLOUD_FAILURE`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFailure {
    /// What failed, redacted and bounded like any failure message.
    pub message: String,
    pub cloud: CloudFailure,
}

/// The most leftovers a termination message lists one by one (Kubernetes keeps 4 KiB of it).
pub const MAX_LISTED_LEFTOVERS: usize = 20;

/// The termination message of a run that exits with [`EXIT_LEFTOVERS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Leftovers {
    /// What remains, in words, naming each resource (bounded like any failure message).
    pub message: String,
    /// Each remaining resource (an ARN).
    pub resources: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use CloudFailureClass::*;

    /// Diagnostics as the AWS provider (SDK v2) and the Google provider print them.
    const CASES: &[(&str, CloudFailureClass)] = &[
        (
            "creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 400, RequestID: \
             5f3c, api error VpcLimitExceeded: The maximum number of VPCs has been reached.",
            QuotaExceeded,
        ),
        (
            "creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 403, RequestID: \
             1a2b, api error UnauthorizedOperation: You are not authorized to perform this operation.",
            Unauthorized,
        ),
        (
            "retrieving account details: validating provider credentials: retrieving caller identity from STS: \
             operation error STS: GetCallerIdentity, https response error StatusCode: 403, RequestID: 9c, api \
             error InvalidClientTokenId: The security token included in the request is invalid.",
            Unauthenticated,
        ),
        (
            "creating EC2 Subnet: operation error EC2: CreateSubnet, exceeded maximum number of attempts, 25, \
             https response error StatusCode: 503, RequestID: 77, api error RequestLimitExceeded: Request limit \
             exceeded.",
            RateLimited,
        ),
        (
            "deleting EC2 Subnet (subnet-1): operation error EC2: DeleteSubnet, https response error StatusCode: \
             400, RequestID: 3, api error DependencyViolation: The subnet 'subnet-1' has dependencies and cannot \
             be deleted.",
            DependencyViolation,
        ),
        (
            "creating EKS Node Group (e2e:workers): operation error EKS: CreateNodegroup, https response error \
             StatusCode: 409, RequestID: I8gZ, ResourceInUseException: NodeGroup already exists with name workers",
            Conflict,
        ),
        (
            "creating EKS Cluster (c): operation error EKS: CreateCluster, https response error StatusCode: 400, \
             RequestID: 2, InvalidParameterException: unsupported Kubernetes version 1.99",
            InvalidConfiguration,
        ),
        (
            "reading EC2 Subnet (subnet-9): operation error EC2: DescribeSubnets, https response error \
             StatusCode: 400, RequestID: 8, api error InvalidSubnetID.NotFound: The subnet ID 'subnet-9' does \
             not exist",
            NotFound,
        ),
        (
            "creating IAM Role (r): operation error IAM: CreateRole, https response error StatusCode: 409, \
             RequestID: 4, EntityAlreadyExists: Role with name r already exists.",
            Conflict,
        ),
        (
            "Error creating Network: googleapi: Error 403: Quota 'NETWORKS' exceeded.  Limit: 5.0 globally., \
             quotaExceeded",
            QuotaExceeded,
        ),
        (
            "Error creating Cluster: googleapi: Error 403: Required 'container.clusters.create' permission for \
             'projects/p'., forbidden",
            Unauthorized,
        ),
        (
            "Error waiting for creating GKE cluster: googleapi: Error 429: Too many requests, rateLimitExceeded",
            RateLimited,
        ),
        ("Error creating Subnetwork: googleapi: Error 409: The resource already exists, alreadyExists", Conflict),
        ("googleapi: Error 400: Invalid value for field 'resource.ipCidrRange', invalid", InvalidConfiguration),
        ("googleapi: Error 401: Request had invalid authentication credentials.", Unauthenticated),
        ("Unsupported argument: An argument named \"foo\" is not expected here.", Unknown),
    ];

    #[test]
    fn each_cloud_answer_gets_its_class() {
        for (text, class) in CASES {
            assert_eq!(CloudFailureClass::classify(text), *class, "{text}");
        }
    }

    #[test]
    fn transient_classes_are_retried_and_the_others_wait_for_a_person() {
        let transient: Vec<_> = CloudFailureClass::ALL.into_iter().filter(|class| class.is_transient()).collect();
        assert_eq!(transient, [RateLimited, DependencyViolation]);
        assert!(!Unknown.needs_a_person() && !Unknown.is_transient());
        assert!(QuotaExceeded.needs_a_person() && Unauthorized.needs_a_person() && Conflict.needs_a_person());
    }

    #[test]
    fn a_failure_is_spelled_as_the_service_reads_it() {
        let failure = RunFailure {
            message: "quota".to_owned(),
            cloud: CloudFailure { class: QuotaExceeded, address: Some("module.vpc.aws_vpc.this".to_owned()) },
        };
        let json = serde_json::to_value(&failure).unwrap();
        assert_eq!(
            json,
            serde_json::json!({ "message": "quota", "cloud": { "class": "quota_exceeded", "address": "module.vpc.aws_vpc.this" } })
        );
        for class in CloudFailureClass::ALL {
            assert_eq!(serde_json::to_value(class).unwrap(), class.as_str());
        }
    }
}
