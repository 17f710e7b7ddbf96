//! Provisioning: a request validated, its credential checked in auth-service, and the runtime with its first
//! operation recorded, replayed for a repeated `Idempotency-Key`.

use sha2::{Digest, Sha256};
use tracing::instrument;

use super::validation::{Invalid, InvalidReason};
use super::{Conflict, Error, Result, Service};
use crate::credentials;
use crate::domain::credential_fit::CredentialMismatch;
use crate::domain::tenant::Tenant;
use crate::domain::{ClusterConfig, Operation, ProvisionRequest, Runtime};
use crate::store;

/// The answer to an accepted provisioning request.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvisionAccepted {
    pub operation: Operation,
    /// True when an `Idempotency-Key` matched an earlier request and nothing new was recorded.
    pub replayed: bool,
}

/// A digest of the validated request, to tell a retry from a different request under the same key (a dry run
/// and a real provisioning of the same request are different requests).
fn request_fingerprint(request: &ProvisionRequest, dry_run: bool, tenant: Option<&Tenant>) -> String {
    // A request's digest without a dry run or a tenant is what it was before those existed, so recorded keys keep
    // matching; the same key sent for another tenant is another request.
    let canonical = match (dry_run, tenant) {
        (false, None) => serde_json::to_vec(request),
        (true, None) => serde_json::to_vec(&(request, dry_run)),
        (_, Some(tenant)) => serde_json::to_vec(&(request, dry_run, tenant.as_str())),
    };
    let canonical = canonical.unwrap_or_default();
    Sha256::digest(canonical).iter().map(|byte| format!("{byte:02x}")).collect()
}

impl Service {
    /// Validates and records a new runtime with a queued provisioning operation. With an idempotency key, a
    /// repeated identical request returns the operation recorded the first time instead of a new one. A dry run
    /// records a preview runtime (its name stays free) whose operation only plans.
    #[instrument(skip_all, fields(runtime_name = %request.runtime_input.name))]
    pub async fn provision_runtime(
        &self,
        request: ProvisionRequest,
        idempotency_key: Option<&str>,
        dry_run: bool,
        requested_by: &str,
    ) -> Result<ProvisionAccepted> {
        self.policy.validate(&request)?;
        let fingerprint = request_fingerprint(&request, dry_run, self.tenant.as_ref());
        let (keyed, earlier) = self.keyed(requested_by, idempotency_key, fingerprint).await?;
        if let Some(operation) = earlier {
            return Ok(ProvisionAccepted { operation, replayed: true });
        }

        // Fail fast: nothing is recorded for a credential that does not exist (in the tenant) or does not fit.
        self.check_credential(&request.cluster_config, self.tenant.as_ref()).await?;

        let protected = (request.runtime_input.deletion_protection)
            .unwrap_or_else(|| self.deletion.protects(&request.cluster_config.environment));
        // Recorded with the runtime, so that its later runs render the same ranges whatever the operator's become.
        let api_allowed_cidrs = self.policy.api_allowed_cidrs_for(&request.cluster_config);
        let (mut runtime, mut operation) = Runtime::requested(request, dry_run, store::now());
        runtime.tenant = self.tenant.clone();
        runtime.managed_by = self.resource.clone();
        runtime.deletion_protection = protected;
        runtime.cluster_config.api_allowed_cidrs = api_allowed_cidrs;
        runtime.cluster_config = runtime.cluster_config.with_canonical_pools();
        operation.requested_by = Some(requested_by.to_owned());
        operation.trace_parent = super::trace_of_request();
        let record = keyed.as_ref().map(|keyed| keyed.record(&operation));
        match self.store.insert_runtime(&runtime, &operation, record.as_ref()).await {
            Ok(()) => {
                tracing::info!(runtime_id = %runtime.id, operation_id = %operation.id, dry_run, "provisioning queued");
                self.wake.notify_one();
                Ok(ProvisionAccepted { operation, replayed: false })
            }
            Err(store::Error::NameTaken) => Err(Error::Conflict {
                conflict: Conflict::NameTaken,
                message: format!("a runtime named {:?} already exists", runtime.name),
            }),
            // A concurrent request with the same key won the race: answer as it did.
            Err(store::Error::IdempotencyKeyTaken) => {
                let keyed = keyed.expect("only a keyed provisioning records a key");
                let operation = self.earlier_answer(&keyed).await?.ok_or(Error::IdempotencyKeyReused)?;
                Ok(ProvisionAccepted { operation, replayed: true })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Resolves the configuration's credential within `tenant` and checks that it fits. An id of another tenant
    /// answers exactly as an unknown one (auth-service answers 404 for both), so that it reveals nothing.
    pub(super) async fn check_credential(&self, config: &ClusterConfig, tenant: Option<&Tenant>) -> Result<()> {
        let field = "clusterConfig.credentialId";
        match self.credentials.credential(&config.credential_id, tenant).await {
            Ok(resolved) => match config.credential_mismatch(&resolved.credential, &resolved.project_ids) {
                None => Ok(()),
                Some(mismatch) => Err(credential_mismatch(&mismatch).into()),
            },
            Err(error) if error.is_not_found() => {
                Err(Invalid::new(InvalidReason::NotFound, field, error.to_string()).into())
            }
            Err(error) if error.is_invalid_credential() => {
                Err(Invalid::new(InvalidReason::UnsupportedValue, field, error.to_string()).into())
            }
            Err(error) => Err(credentials_unavailable(&error)),
        }
    }
}

/// The request's field a mismatch is about: the credential, or the project it is asked to build in.
fn credential_mismatch(mismatch: &CredentialMismatch) -> Invalid {
    let field = match mismatch {
        CredentialMismatch::Cloud(_) => "clusterConfig.credentialId",
        CredentialMismatch::Project { .. } => "clusterConfig.gcp.projectId",
    };
    Invalid::new(InvalidReason::Conflict, field, mismatch.to_string())
}

/// The credential's source (auth-service, or the Kubernetes API for a Secret) could not check it: nothing is
/// recorded, and the caller may try again.
fn credentials_unavailable(error: &credentials::Error) -> Error {
    tracing::warn!(%error, "could not resolve the credential at request time");
    let what = match error {
        credentials::Error::Unavailable { .. } => "no answer, or a server error".to_owned(),
        other => other.public_message(),
    };
    Error::Unavailable {
        component: error.component(),
        message: format!("{what}; the credential could not be checked and nothing was recorded, try again shortly"),
    }
}
