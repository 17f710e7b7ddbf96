//! Only the platform's own services get in: every API path but `/healthz` needs a Kubernetes ServiceAccount
//! token (checked by [`TokenReviewer`]) whose user is in `APP_AUTH_ALLOWED_USERS`. The caller's [`Identity`]
//! goes into the request's extensions, for the audit line of each change.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::audit::{ApiKind, AuditEntry, AuditEvent, AuditTrail};
use super::error::ApiError;
use crate::domain::Operation;
use crate::token_review::{Review, TokenReviewer};

/// The authenticated caller, with the trail its changes are written to.
#[derive(Debug, Clone)]
pub struct Identity {
    pub username: String,
    audit: AuditTrail,
}

impl Identity {
    /// Who every caller is when `APP_AUTH_ENABLED=false` (Kubernetes' name for unauthenticated users).
    const ANONYMOUS: &str = "system:anonymous";

    /// The audit trail: one entry per accepted change, naming who asked for it.
    pub fn audit(&self, api: ApiKind, operation: &Operation) {
        self.audit.record(&AuditEntry::new(&self.username, api, AuditEvent::OperationAccepted, operation));
    }

    /// The audit entry of a cancel.
    pub fn audit_cancel(&self, api: ApiKind, operation: &Operation) {
        self.audit.record(&AuditEntry::new(&self.username, api, AuditEvent::CancelRequested, operation));
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
        allowed_users: Arc<HashSet<String>>,
    },
}

/// Lets callers in, each with the application's audit trail.
#[derive(Clone)]
pub struct Authentication {
    pub mode: Mode,
    pub audit: AuditTrail,
}

/// The middleware: refuses the request, or passes it on with the caller's [`Identity`].
pub async fn authenticate(State(authentication): State<Authentication>, mut request: Request, next: Next) -> Response {
    match authentication.identify(request.headers()).await {
        Ok(identity) => {
            request.extensions_mut().insert(identity);
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}

impl Authentication {
    fn identity(&self, username: String) -> Identity {
        Identity { username, audit: self.audit.clone() }
    }

    async fn identify(&self, headers: &HeaderMap) -> Result<Identity, ApiError> {
        self.identify_token(bearer_token(headers)).await
    }

    /// The caller of a GraphQL subscription, from the `Authorization` of its `connection_init` payload (a
    /// browser cannot set headers on a WebSocket).
    /// The refusal is its message, which the client gets as the connection's error.
    pub async fn identify_connection(&self, payload: &serde_json::Value) -> Result<Identity, String> {
        let authorization = ["Authorization", "authorization"].iter().find_map(|key| payload.get(*key)?.as_str());
        self.identify_token(authorization.and_then(bearer_value)).await.map_err(|error| match error {
            ApiError::Unauthenticated(message) | ApiError::Forbidden(message) | ApiError::Unavailable(message) => {
                message
            }
            _ => "authentication failed".to_owned(),
        })
    }

    async fn identify_token(&self, token: Option<&str>) -> Result<Identity, ApiError> {
        let (reviewer, allowed_users) = match &self.mode {
            Mode::Disabled => return Ok(self.identity(Identity::ANONYMOUS.to_owned())),
            Mode::NoCluster => {
                return Err(ApiError::Unavailable(
                    "authentication needs a Kubernetes cluster to review tokens, and none is configured".to_owned(),
                ));
            }
            Mode::Enabled { reviewer, allowed_users } => (reviewer, allowed_users),
        };
        let token = token.ok_or_else(|| {
            ApiError::Unauthenticated("send a ServiceAccount token as Authorization: Bearer <token>".to_owned())
        })?;
        match reviewer.review(token).await {
            Ok(Review::Authenticated { username }) if allowed_users.contains(&username) => Ok(self.identity(username)),
            Ok(Review::Authenticated { username }) => {
                tracing::warn!(user = %username, "caller not in APP_AUTH_ALLOWED_USERS");
                Err(ApiError::Forbidden(format!("{username} may not use the cluster provisioner")))
            }
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
