//! A run's objects (the credentials Secret, the config ConfigMap, the runner's identity, the Job): created
//! idempotently under their deterministic names, owned by the Job, deleted and read back.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use kube::{Resource, ResourceExt};
use runner_contract::credential::CloudCredential;
use runner_contract::inventory;
use runner_contract::manifest::KUBECONFIG_KEY;
use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use super::identity::identity_name;
use super::{DELETION_TIMEOUT, Error, Executor, ModulesSettings, Result, RunObject, belongs_to, job};
use super::{RunRef, managed_by_us, metadata};
use crate::domain::RunAction;
use crate::domain::run::RunNames;

/// Background propagation: a Job's pods go with it (with their grace period) instead of being orphaned.
pub(super) fn background_deletion() -> DeleteParams {
    DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() }
}

impl Executor {
    /// Whether this run's credentials Secret already exists for this operation (so it need not be resolved again).
    pub async fn credentials_exist(&self, names: &RunNames, operation_id: Uuid) -> Result<bool> {
        match self.api::<Secret>().get_opt(&names.credentials_secret).await? {
            Some(secret) => Ok(belongs_to(secret.meta(), operation_id)),
            None => Ok(false),
        }
    }

    /// The values to redact from what a run prints, read back from its credentials Secret (a resumed run did not
    /// resolve the credential itself): its secrets only, not the region or the role it names. Files that no
    /// longer read back as a credential are all redacted, rather than none.
    pub async fn credential_values(&self, names: &RunNames) -> Result<Vec<String>> {
        let secret = self.api::<Secret>().get_opt(&names.credentials_secret).await?;
        let files: BTreeMap<String, SecretString> = secret
            .and_then(|secret| secret.data)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, bytes)| (name, SecretString::from(String::from_utf8_lossy(&bytes.0).into_owned())))
            .collect();
        Ok(match CloudCredential::from_secret_files(&files) {
            Ok(credential) => credential.secret_values(),
            Err(_) => files.values().map(|value| value.expose_secret().to_owned()).collect(),
        })
    }

    pub async fn ensure_credentials(&self, run: RunRef<'_>, files: &BTreeMap<String, SecretString>) -> Result<()> {
        let data = files
            .iter()
            .map(|(name, value)| (name.clone(), ByteString(value.expose_secret().as_bytes().to_vec())))
            .collect();
        let secret = Secret {
            metadata: metadata(&run.names.credentials_secret, &run.labels()),
            data: Some(data),
            type_: Some("Opaque".to_owned()),
            ..Secret::default()
        };
        self.ensure(secret, run.operation_id).await.map(drop)
    }

    pub async fn ensure_config(&self, run: RunRef<'_>, files: BTreeMap<String, String>) -> Result<()> {
        let metadata = metadata(&run.names.config_map, &run.labels());
        let config_map = ConfigMap { metadata, data: Some(files), ..ConfigMap::default() };
        self.ensure(config_map, run.operation_id).await.map(drop)
    }

    /// Creates the run's Job (or reuses it), its pod's own identity first (see `identity.rs`), and hands its
    /// ConfigMap, credentials Secret and identity to it as owner, so the garbage collector removes them with the
    /// Job. The owner's uid exists only once the Job does, so they are created ownerless and handed over after;
    /// a worker that stops in between does it when the step runs again. The outputs Secret is the runtime's, not
    /// the run's: no Job owns it.
    pub async fn ensure_job(
        &self,
        modules: &ModulesSettings,
        action: RunAction,
        run: RunRef<'_>,
        active_deadline: Duration,
    ) -> Result<()> {
        self.ensure_runner_identity(action, run).await?;
        let traceparent = crate::telemetry::current_traceparent();
        let job = job::build(&self.settings, modules, action, run.names, &run.labels(), active_deadline, traceparent);
        let job = self.ensure(job, run.operation_id).await?;
        let owner = OwnerReference {
            api_version: "batch/v1".to_owned(),
            kind: "Job".to_owned(),
            name: job.name_any(),
            uid: job.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        };
        self.set_owner::<ConfigMap>(&run.names.config_map, &owner).await?;
        self.set_owner::<Secret>(&run.names.credentials_secret, &owner).await?;
        let identity = identity_name(run.names);
        self.set_owner::<ServiceAccount>(identity, &owner).await?;
        self.set_owner::<Role>(identity, &owner).await?;
        self.set_owner::<RoleBinding>(identity, &owner).await
    }

    /// Creates `object`; when it already exists, reuses it if it belongs to this operation, and replaces it if
    /// an earlier operation of ours left it behind.
    pub(super) async fn ensure<K: RunObject>(&self, object: K, operation_id: Uuid) -> Result<K> {
        let api = self.api::<K>();
        let name = object.name_any();
        let kind = K::KIND;
        match api.create(&PostParams::default(), &object).await {
            Ok(created) => return Ok(created),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
        let existing = api.get(&name).await?;
        if belongs_to(existing.meta(), operation_id) {
            tracing::debug!(%kind, %name, "reusing the object an earlier attempt created");
            return Ok(existing);
        }
        if !managed_by_us(existing.meta()) {
            return Err(Error::NotOurs { kind, name });
        }
        tracing::info!(%kind, %name, "replacing an object left by an earlier operation");
        self.delete_and_wait::<K>(&name).await?;
        Ok(api.create(&PostParams::default(), &object).await?)
    }

    async fn delete_and_wait<K: RunObject>(&self, name: &str) -> Result<()> {
        let api = self.api::<K>();
        match api.delete(name, &background_deletion()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(error) => return Err(error.into()),
        }
        let deadline = tokio::time::Instant::now() + DELETION_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            if api.get_opt(name).await?.is_none() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(Error::StillDeleting { kind: K::KIND, name: name.to_owned() })
    }

    async fn set_owner<K: RunObject>(&self, name: &str, owner: &OwnerReference) -> Result<()> {
        let api = self.api::<K>();
        let Some(mut object) = api.get_opt(name).await? else { return Ok(()) };
        let owners = object.meta_mut().owner_references.get_or_insert_with(Vec::new);
        if owners.iter().any(|existing| existing.uid == owner.uid) {
            return Ok(());
        }
        owners.push(owner.clone());
        // `update`, not `patch`: the seed's Role grants update on Secrets and ConfigMaps, not patch.
        api.replace(name, &PostParams::default(), &object).await?;
        Ok(())
    }

    pub(super) async fn remove_owner<K: RunObject>(&self, name: &str, owner_uid: &str) -> Result<()> {
        let api = self.api::<K>();
        let Some(mut object) = api.get_opt(name).await? else { return Ok(()) };
        let Some(owners) = object.meta_mut().owner_references.as_mut() else { return Ok(()) };
        let before = owners.len();
        owners.retain(|owner| owner.uid != owner_uid);
        if owners.len() == before {
            return Ok(());
        }
        api.replace(name, &PostParams::default(), &object).await?;
        Ok(())
    }

    /// The kubeconfig terraform-runner published; `None` while nothing is published: no outputs Secret, or the
    /// empty one the worker creates before the runtime's first apply.
    pub async fn kubeconfig(&self, names: &RunNames) -> Result<Option<String>> {
        let Some(secret) = self.api::<Secret>().get_opt(&names.outputs_secret).await? else { return Ok(None) };
        let kubeconfig = secret.data.and_then(|mut data| data.remove(KUBECONFIG_KEY));
        Ok(kubeconfig.map(|kubeconfig| String::from_utf8_lossy(&kubeconfig.0).into_owned()))
    }

    /// The cloud resources the last apply recorded beside its kubeconfig; `None` when there is no outputs Secret,
    /// no inventory in it (an apply of an older runner), or one that does not pass the check.
    pub async fn recorded_resources(&self, names: &RunNames) -> Result<Option<Vec<String>>> {
        let Some(secret) = self.api::<Secret>().get_opt(&names.outputs_secret).await? else { return Ok(None) };
        let Some(recorded) = secret.data.and_then(|mut data| data.remove(inventory::RESOURCES_KEY)) else {
            return Ok(None);
        };
        match inventory::parse(&recorded.0) {
            Ok(resources) => Ok(Some(resources)),
            Err(error) => {
                tracing::warn!(secret = %names.outputs_secret, error, "the outputs Secret's inventory is not used");
                Ok(None)
            }
        }
    }

    pub async fn delete_secret(&self, name: &str) -> Result<()> {
        match self.api::<Secret>().delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(error) => {
                let error = Error::from(error);
                if error.is_not_found() { Ok(()) } else { Err(error) }
            }
        }
    }
}
