//! Only callers the platform knows get in: every API path but the probes needs a Kubernetes token (checked by
//! [`TokenReviewer`]). What it may do is decided by `APP_AUTHZ_MODE`: `allow-list` lets the users in
//! `APP_AUTH_ALLOWED_USERS` do everything, `rbac` asks Kubernetes RBAC for each action (see [`Authorizer`]). The
//! caller's [`Identity`] goes into the request's extensions, for the checks and the audit line of each change.

pub mod token_review;

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument as _;

use crate::api::audit::{ApiKind, AuditEntry, AuditEvent, AuditTrail};
use crate::api::authorization::{Action, Authorizer, User};
use crate::api::error::ApiError;
use crate::domain::tenant::Tenant;
use crate::domain::{Operation, RuntimeId};
use crate::service::HandedOut;
use crate::service::{Invalid, InvalidReason, Service};
use token_review::{Review, TokenReviewer};

/// The authenticated caller, with what it may do and the trail its changes are written to.
#[derive(Clone)]
pub struct Identity {
    pub username: String,
    /// The tenant the request named (the `Tenant` header, or the `Tenant` of a `connection_init` payload).
    pub tenant: Option<Tenant>,
    grants: Grants,
    audit: AuditTrail,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Identity").field("username", &self.username).finish_non_exhaustive()
    }
}

/// What an identity may do.
#[derive(Clone)]
enum Grants {
    /// Everything: authentication is off, or the user is on the allow-list.
    All,
    /// What Kubernetes RBAC allows this user.
    Rbac { authorizer: Arc<Authorizer>, user: User },
}

impl Identity {
    /// `service` as this caller sees it: only its tenant's runtimes when the request named one.
    pub fn service(&self, service: &Service) -> Service {
        service.for_tenant(self.tenant.clone())
    }

    /// Who every caller is when `APP_AUTH_ENABLED=false` (Kubernetes' name for unauthenticated users).
    const ANONYMOUS: &str = "system:anonymous";

    /// The audit trail: one entry per accepted change, naming who asked for it.
    pub fn audit(&self, api: ApiKind, operation: &Operation) {
        let event =
            if operation.forced.is_some() { AuditEvent::DeprovisioningForced } else { AuditEvent::OperationAccepted };
        self.audit.record(&AuditEntry::new(&self.username, api, event, operation));
    }

    /// The audit entry of a cancel.
    pub fn audit_cancel(&self, api: ApiKind, operation: &Operation) {
        self.audit.record(&AuditEntry::new(&self.username, api, AuditEvent::CancelRequested, operation));
    }

    /// The audit entry of a read of a kubeconfig or of logs, naming what the request named.
    pub fn audit_read(&self, api: ApiKind, event: AuditEvent, runtime_id: &str, operation_id: Option<&str>) {
        let runtime_id = uuid::Uuid::parse_str(runtime_id).ok();
        let operation_id = operation_id.and_then(|id| uuid::Uuid::parse_str(id).ok());
        self.audit.record(&AuditEntry::about(&self.username, api, event, runtime_id, operation_id));
    }

    /// The audit entry of a kubeconfig read or rotated, with until when the one handed out signs in.
    pub fn audit_kubeconfig(&self, api: ApiKind, event: AuditEvent, runtime_id: RuntimeId, handed_out: &HandedOut) {
        let entry = AuditEntry::about(&self.username, api, event, Some(runtime_id.0), None);
        self.audit.record(&AuditEntry { kubeconfig_expires_at: handed_out.expires_at, ..entry });
    }

    /// The audit entry of a change of a runtime's deletion protection.
    pub fn audit_deletion_protection(&self, api: ApiKind, runtime_id: RuntimeId, enabled: bool) {
        let event = if enabled { AuditEvent::DeletionProtectionOn } else { AuditEvent::DeletionProtectionOff };
        self.audit.record(&AuditEntry::about(&self.username, api, event, Some(runtime_id.0), None));
    }

    /// The audit entry of an approval or rejection of an operation's plan.
    pub fn audit_approval(&self, api: ApiKind, event: AuditEvent, operation: &Operation) {
        self.audit.record(&AuditEntry::new(&self.username, api, event, operation));
    }

    /// The audit entry of a change of a runtime's approval policy.
    pub fn audit_approval_policy(&self, api: ApiKind, runtime_id: RuntimeId) {
        let event = AuditEvent::ApprovalPolicyChanged;
        self.audit.record(&AuditEntry::about(&self.username, api, event, Some(runtime_id.0), None));
    }

    /// The audit entry of a read of an operation's logs.
    pub fn audit_operation_logs(&self, api: ApiKind, operation_id: &str) {
        let operation_id = uuid::Uuid::parse_str(operation_id).ok();
        self.audit.record(&AuditEntry::about(&self.username, api, AuditEvent::LogsRead, None, operation_id));
    }

    /// Refused (403) unless this caller may do `action`.
    pub async fn authorize(&self, action: Action) -> Result<(), ApiError> {
        let Grants::Rbac { authorizer, user } = &self.grants else { return Ok(()) };
        match authorizer.allows(user, action, self.tenant.as_ref()).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ApiError::Forbidden(format!("{} may not {}", self.username, action.describe()))),
            Err(error) => {
                tracing::error!(%error, "SubjectAccessReview failed");
                Err(ApiError::Unavailable(
                    "cannot check what the caller may do: the Kubernetes SubjectAccessReview failed".to_owned(),
                ))
            }
        }
    }
}

/// How callers are authenticated, decided once at start-up.
#[derive(Clone)]
pub enum Mode {
    /// `APP_AUTH_ENABLED=false`: everyone gets in as `system:anonymous`.
    Disabled,
    /// Enabled, but there is no cluster to review tokens with: everything is refused, never opened.
    NoCluster,
    Enabled {
        reviewer: Arc<TokenReviewer>,
        access: Access,
    },
}

/// How an authenticated caller's actions are decided (`APP_AUTHZ_MODE`).
#[derive(Clone)]
pub enum Access {
    /// These users may do everything; others nothing.
    AllowList(Arc<HashSet<String>>),
    /// Kubernetes RBAC decides each action.
    Rbac(Arc<Authorizer>),
}

/// Lets callers in, each with the application's audit trail.
#[derive(Clone)]
pub struct Authentication {
    pub mode: Mode,
    pub audit: AuditTrail,
    /// `APP_TENANT_REQUIRED`: every request that reads or changes runtimes must name a tenant.
    pub tenant_required: bool,
}

/// The middleware after [`authenticate`]: refuses a REST request its caller may not make (see
/// [`crate::api::authorization::rest_action`]), or that names no tenant where one is required.
pub async fn authorize_route(
    State(authentication): State<Authentication>,
    matched: Option<axum::extract::MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let action = matched.and_then(|route| crate::api::authorization::rest_action(request.method(), route.as_str()));
    if let (Some(action), Some(identity)) = (action, request.extensions().get::<Identity>()) {
        let allowed = match authentication.require_tenant(identity) {
            Ok(()) => identity.authorize(action).await,
            Err(refusal) => Err(refusal),
        };
        if let Err(refusal) = allowed {
            return refusal.into_response();
        }
    }
    next.run(request).await
}

/// The middleware: refuses the request, or passes it on with the caller's [`Identity`], in the request's exported
/// span. Traces start here, once the caller is known (issue #52 item 5): a refused request exports no span and
/// never joins the trace its `traceparent` names.
pub async fn authenticate(State(authentication): State<Authentication>, mut request: Request, next: Next) -> Response {
    match authentication.identify(request.headers()).await {
        Ok(identity) => {
            request.extensions_mut().insert(identity);
            let traced = crate::api::middleware::traced_request(&request);
            let mut response = next.run(request).instrument(traced.clone()).await;
            response.extensions_mut().insert(crate::api::middleware::TracedRequest(traced));
            response
        }
        Err(error) => error.into_response(),
    }
}

/// Kyma's header naming the tenant a request acts for.
const TENANT_HEADER: &str = "Tenant";

/// The tenant a request names in its `Tenant` header; a malformed one is refused, naming the header.
pub fn tenant_header(headers: &HeaderMap) -> Result<Option<Tenant>, ApiError> {
    let Some(value) = headers.get(TENANT_HEADER) else { return Ok(None) };
    let refused =
        |message: String| ApiError::Service(Invalid::new(InvalidReason::Format, TENANT_HEADER, message).into());
    let value = value.to_str().map_err(|_| refused("must be plain ASCII".to_owned()))?;
    Tenant::parse(value).map(Some).map_err(refused)
}

/// The tenant of a WebSocket: the upgrade request's when it named one (a `connection_init` payload naming
/// another is refused), else the payload's.
fn connection_tenant_of(connection: Option<&Tenant>, named: Option<Tenant>) -> Result<Option<Tenant>, String> {
    match (connection, named) {
        (Some(connection), Some(named)) if named != *connection => Err(format!(
            "the connection_init payload names {TENANT_HEADER} {named}, but the connection is for {connection}"
        )),
        (Some(connection), _) => Ok(Some(connection.clone())),
        (None, named) => Ok(named),
    }
}

impl Authentication {
    fn identity(&self, username: String, grants: Grants) -> Identity {
        Identity { username, tenant: None, grants, audit: self.audit.clone() }
    }

    async fn identify(&self, headers: &HeaderMap) -> Result<Identity, ApiError> {
        let mut identity = self.identify_token(bearer_token(headers)).await?;
        identity.tenant = tenant_header(headers)?;
        Ok(identity)
    }

    /// Refused (400, naming the header) when a tenant is required and `identity` names none.
    fn require_tenant(&self, identity: &Identity) -> Result<(), ApiError> {
        if self.tenant_required && identity.tenant.is_none() {
            let message = "is required: this provisioner serves tenants (APP_TENANT_REQUIRED)";
            return Err(ApiError::Service(Invalid::new(InvalidReason::Required, TENANT_HEADER, message).into()));
        }
        Ok(())
    }

    /// The caller of a GraphQL subscription, from the `Authorization` of its `connection_init` payload (a
    /// browser cannot set headers on a WebSocket). Its tenant is the one the upgrade request's `Tenant` header
    /// named (`connection_tenant`, which a gateway in front sets) when it named one: a payload may repeat it but
    /// not name another. The refusal is its message, which the client gets as the connection's error.
    pub async fn identify_connection(
        &self,
        payload: &serde_json::Value,
        connection_tenant: Option<&Tenant>,
    ) -> Result<Identity, String> {
        let authorization = ["Authorization", "authorization"].iter().find_map(|key| payload.get(*key)?.as_str());
        let mut identity =
            self.identify_token(authorization.and_then(bearer_value)).await.map_err(|error| match error {
                ApiError::Unauthenticated(message) | ApiError::Forbidden(message) | ApiError::Unavailable(message) => {
                    message
                }
                _ => "authentication failed".to_owned(),
            })?;
        let named = [TENANT_HEADER, "tenant"].iter().find_map(|key| payload.get(*key)?.as_str());
        let named = named
            .map(|tenant| Tenant::parse(tenant).map_err(|message| format!("invalid {TENANT_HEADER}: {message}")))
            .transpose()?;
        identity.tenant = connection_tenant_of(connection_tenant, named)?;
        self.require_tenant(&identity).map_err(|_| format!("{TENANT_HEADER} is required (APP_TENANT_REQUIRED)"))?;
        Ok(identity)
    }

    async fn identify_token(&self, token: Option<&str>) -> Result<Identity, ApiError> {
        let (reviewer, access) = match &self.mode {
            Mode::Disabled => return Ok(self.identity(Identity::ANONYMOUS.to_owned(), Grants::All)),
            Mode::NoCluster => {
                return Err(ApiError::Unavailable(
                    "authentication needs a Kubernetes cluster to review tokens, and none is configured".to_owned(),
                ));
            }
            Mode::Enabled { reviewer, access } => (reviewer, access),
        };
        let token = token.ok_or_else(|| {
            ApiError::Unauthenticated("send a ServiceAccount token as Authorization: Bearer <token>".to_owned())
        })?;
        match reviewer.review(token).await {
            Ok(Review::Authenticated { username, groups }) => match access {
                Access::Rbac(authorizer) => {
                    let user = User { name: username.clone(), groups };
                    Ok(self.identity(username, Grants::Rbac { authorizer: authorizer.clone(), user }))
                }
                Access::AllowList(allowed_users) if allowed_users.contains(&username) => {
                    Ok(self.identity(username, Grants::All))
                }
                Access::AllowList(_) => {
                    tracing::warn!(user = %username, "caller not in APP_AUTH_ALLOWED_USERS");
                    Err(ApiError::Forbidden(format!("{username} may not use the cluster provisioner")))
                }
            },
            Ok(Review::Rejected { reason }) => {
                // Kubernetes' reason goes to the log only: it may describe what a valid token looks like.
                tracing::info!(reason, "bearer token rejected");
                Err(ApiError::Unauthenticated(
                    "the bearer token is invalid, expired or not for this service".to_owned(),
                ))
            }
            Err(error) => {
                tracing::error!(%error, "TokenReview failed");
                Err(ApiError::Unavailable(
                    "cannot check the bearer token: the Kubernetes TokenReview failed".to_owned(),
                ))
            }
        }
    }
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    bearer_value(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// The token of a `Bearer <token>` value.
fn bearer_value(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}
