//! The kubeconfig with a lifetime the service last minted for a runtime, kept in a Secret of its own namespace
//! (`kubeconfig-<runtime id>`) with when it was issued and when it expires, so that every reader (and every
//! replica) hands out the same one until it is due for rotation.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{ObjectMeta, PostParams};
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL, RUNTIME_LABEL};
use runner_contract::manifest::KUBECONFIG_KEY;
use uuid::Uuid;

use super::{Error, Executor, Result, managed_by_us};

const ISSUED_AT: &str = "provisioner.kubeopera.io/issued-at";
const EXPIRES_AT: &str = "provisioner.kubeopera.io/expires-at";

/// A minted kubeconfig as it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptKubeconfig {
    pub kubeconfig: String,
    pub issued_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

use crate::domain::kubeconfig_lifetime::kept_secret_name as secret_name;

impl Executor {
    /// The kubeconfig last minted for the runtime; `None` when there is none, or the Secret does not read back as
    /// one of ours (then a new one is minted over it).
    pub async fn minted_kubeconfig(&self, runtime_id: Uuid) -> Result<Option<KeptKubeconfig>> {
        let Some(secret) = self.api::<Secret>().get_opt(&secret_name(runtime_id)).await? else { return Ok(None) };
        if !managed_by_us(&secret.metadata) {
            return Err(Error::NotOurs { kind: "Secret", name: secret_name(runtime_id) });
        }
        let time = |key: &str| {
            let value = secret.annotations().get(key)?;
            DateTime::parse_from_rfc3339(value).ok().map(|time| time.with_timezone(&Utc))
        };
        let kubeconfig = secret.data.as_ref().and_then(|data| data.get(KUBECONFIG_KEY));
        Ok(match (kubeconfig, time(ISSUED_AT), time(EXPIRES_AT)) {
            (Some(kubeconfig), Some(issued_at), Some(expires_at)) => Some(KeptKubeconfig {
                kubeconfig: String::from_utf8_lossy(&kubeconfig.0).into_owned(),
                issued_at,
                expires_at,
            }),
            _ => None,
        })
    }

    /// Keeps `kept` as the runtime's kubeconfig, replacing the one before.
    pub async fn keep_minted_kubeconfig(&self, runtime_id: Uuid, kept: &KeptKubeconfig) -> Result<()> {
        let name = secret_name(runtime_id);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([
                    (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
                    (RUNTIME_LABEL.to_owned(), runtime_id.to_string()),
                ])),
                annotations: Some(BTreeMap::from([
                    (ISSUED_AT.to_owned(), kept.issued_at.to_rfc3339()),
                    (EXPIRES_AT.to_owned(), kept.expires_at.to_rfc3339()),
                ])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(KUBECONFIG_KEY.to_owned(), ByteString(kept.kubeconfig.clone().into_bytes()))])),
            ..Secret::default()
        };
        let api = self.api::<Secret>();
        match api.get_opt(&name).await? {
            Some(existing) if !managed_by_us(&existing.metadata) => Err(Error::NotOurs { kind: "Secret", name }),
            Some(existing) => {
                let replacement = Secret {
                    metadata: ObjectMeta { resource_version: existing.resource_version(), ..secret.metadata },
                    ..secret
                };
                api.replace(&name, &PostParams::default(), &replacement).await?;
                Ok(())
            }
            None => {
                api.create(&PostParams::default(), &secret).await?;
                Ok(())
            }
        }
    }
}
