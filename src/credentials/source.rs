//! Where credentials come from (`APP_CREDENTIALS_SOURCE`): auth-service, the platform's (the default, the seed's
//! contract), or the tenants' own Kubernetes Secrets. Both answer the same [`Resolved`] and the same errors.

use super::{AuthClient, Resolved, Result, SecretCredentials};
use crate::domain::tenant::Tenant;

/// The configured source, as the settings read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    AuthService,
    /// The tenants' Secrets; those of requests without a tenant in `platform_namespace`, if set.
    Secrets {
        platform_namespace: Option<String>,
    },
}

/// The process's source of credentials; cheap to clone.
#[derive(Clone)]
pub enum Credentials {
    AuthService(AuthClient),
    Secrets(SecretCredentials),
}

impl Credentials {
    /// Resolves the credential `id` within `tenant`: another tenant's answers as an unknown one.
    pub async fn credential(&self, id: &str, tenant: Option<&Tenant>) -> Result<Resolved> {
        match self {
            Credentials::AuthService(client) => client.credential(id, tenant).await,
            Credentials::Secrets(secrets) => secrets.credential(id, tenant).await,
        }
    }
}
