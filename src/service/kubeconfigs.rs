//! The kubeconfig a caller gets for a runtime. What an apply published for a cluster that signs in with a client
//! certificate (vanilla's kubeadm admin) never leaves the provisioner: callers get a certificate the cluster issues
//! for `APP_KUBECONFIG_LIFETIME`, kept and handed to every reader until 60 % of its life has passed, then replaced;
//! a rotation replaces it at once. A kubeconfig whose user runs a cloud's token plugin (EKS, GKE) holds no secret
//! and is handed out as published.

use chrono::{DateTime, Utc};
use runner_contract::report::kubeconfig_digest;

use super::{Conflict, Error, Result, Service, executor_error};
use crate::domain::kubeconfig_lifetime::due_for_rotation;
use crate::domain::run::RunNames;
use crate::domain::{Component, OperationType, RuntimeId};
use crate::executor::KeptKubeconfig;
use crate::runtime_access::{self, mint_kubeconfig};
use crate::store;

/// A kubeconfig handed out, and until when it signs in (`None`: it holds no credential of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandedOut {
    pub kubeconfig: String,
    pub expires_at: Option<DateTime<Utc>>,
}

impl Service {
    /// The kubeconfig of a live runtime whose provisioning succeeded (also while it is being upgraded); 409
    /// before then and once it is deprovisioned.
    pub async fn kubeconfig(&self, runtime_id: RuntimeId) -> Result<HandedOut> {
        self.hand_out_kubeconfig(runtime_id, false).await
    }

    /// A new kubeconfig for the runtime at once (the one before stays valid until it expires: a certificate
    /// cannot be taken back); 409 for a runtime whose kubeconfig holds no credential of its own.
    pub async fn rotate_kubeconfig(&self, runtime_id: RuntimeId) -> Result<HandedOut> {
        let handed_out = self.hand_out_kubeconfig(runtime_id, true).await?;
        if handed_out.expires_at.is_none() {
            return Err(Error::Conflict {
                conflict: Conflict::NothingToRotate,
                message: format!(
                    "runtime {runtime_id}'s kubeconfig holds no credential: its user gets short-lived tokens from the \
                     cloud's plugin on every use"
                ),
            });
        }
        Ok(handed_out)
    }

    async fn hand_out_kubeconfig(&self, runtime_id: RuntimeId, rotate: bool) -> Result<HandedOut> {
        let published = self.published_kubeconfig(runtime_id).await?;
        if !runtime_access::holds_client_certificate(&published) {
            return Ok(HandedOut { kubeconfig: published, expires_at: None });
        }
        let executor = self.executor()?;
        let kept = executor.minted_kubeconfig(runtime_id.0).await.map_err(executor_error)?;
        if let Some(kept) =
            kept.filter(|kept| !rotate && !due_for_rotation(kept.issued_at, kept.expires_at, store::now()))
        {
            return Ok(HandedOut { kubeconfig: kept.kubeconfig, expires_at: Some(kept.expires_at) });
        }
        let minted = mint_kubeconfig(&published, self.kubeconfig_lifetime).await.map_err(|error| {
            tracing::warn!(%runtime_id, %error, "minting a kubeconfig failed");
            Error::Unavailable {
                component: Component::Cluster,
                message: format!("the cluster did not issue a kubeconfig ({error}); try again shortly"),
            }
        })?;
        let kept = KeptKubeconfig {
            kubeconfig: minted.kubeconfig,
            issued_at: minted.issued_at,
            expires_at: minted.expires_at,
        };
        executor.keep_minted_kubeconfig(runtime_id.0, &kept).await.map_err(executor_error)?;
        self.store.record_kubeconfig_expiry(runtime_id.0, kept.expires_at).await?;
        tracing::info!(%runtime_id, expires_at = %kept.expires_at, rotated = rotate, "a kubeconfig was minted");
        Ok(HandedOut { kubeconfig: kept.kubeconfig, expires_at: Some(kept.expires_at) })
    }

    /// What the runtime's last checked apply published; 409 while there is no cluster.
    pub(super) async fn published_kubeconfig(&self, runtime_id: RuntimeId) -> Result<String> {
        let status = self.latest(runtime_id).await?;
        let operation = &status.last_operation;
        let live = status.runtime.deleted_at.is_none() && !status.runtime.preview;
        let deprovisioning = operation.operation_type == OperationType::Deprovision && operation.state.is_active();
        if !live || deprovisioning || status.provisioned_at.is_none() {
            return Err(Error::Conflict {
                conflict: Conflict::NotReady,
                message: format!(
                    "no kubeconfig: runtime {} has no provisioned cluster (its last operation is {} {})",
                    status.runtime.id, operation.operation_type, operation.state
                ),
            });
        }
        let names = RunNames::new(OperationType::Provision, status.runtime.id);
        match self.executor()?.kubeconfig(&names).await {
            Ok(Some(kubeconfig)) => self.checked(status.runtime.id, &names.outputs_secret, kubeconfig).await,
            Ok(None) => Err(Error::Conflict {
                conflict: Conflict::NotReady,
                message: format!("Secret {} with the kubeconfig does not exist", names.outputs_secret),
            }),
            Err(error) => Err(executor_error(error)),
        }
    }

    /// `kubeconfig` when it is exactly what the runtime's last checked apply published: a run's own identity
    /// writes only its runtime's outputs Secret, but the previous release's shared one still writes any, and what
    /// a run publishes comes from the cluster it builds, so other content is refused, never served.
    async fn checked(&self, runtime_id: uuid::Uuid, secret: &str, kubeconfig: String) -> Result<String> {
        let checked = self.store.checked_kubeconfig_digest(runtime_id).await?;
        if checked.as_deref() == Some(kubeconfig_digest(kubeconfig.as_bytes()).as_str()) {
            return Ok(kubeconfig);
        }
        tracing::warn!(%runtime_id, secret, "an outputs Secret does not hold the kubeconfig its runtime's last apply published; it is not served");
        Err(Error::Conflict {
            conflict: Conflict::UntrustedOutputs,
            message: format!(
                "Secret {secret} does not hold the kubeconfig the runtime's last apply published; it is not served \
                 (an update of the runtime publishes it again)"
            ),
        })
    }
}
