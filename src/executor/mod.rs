//! The Kubernetes side of a run: the credentials Secret, the config ConfigMap, the runner's own identity and the
//! terraform Job, created idempotently under deterministic names (AlreadyExists means: read it, check it is ours by
//! its labels, reuse it), followed through a watch, and read back for status, logs and the kubeconfig.

mod identity;
mod job;
mod job_failure;
mod jobs;
mod logs;
mod minted_kubeconfigs;
mod objects;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL, OPERATION_LABEL, RUNTIME_LABEL};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::domain::run::RunNames;

pub use job::{JobSettings, ModulesSettings, RUNNER_CONTAINER, RunnerResources};
pub use jobs::JobStop;
pub use logs::FinalLogs;
pub use minted_kubeconfigs::KeptKubeconfig;
pub use runner_contract::job::RUNNER_GRACE_PERIOD;

const DELETION_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{kind} {name} exists but was not created by {MANAGED_BY}")]
    NotOurs { kind: &'static str, name: String },
    #[error("{kind} {name} was still being deleted after {DELETION_TIMEOUT:?}")]
    StillDeleting { kind: &'static str, name: String },
    /// The operation (its id) has no runner pod.
    #[error("no runner pod exists for operation {0}")]
    NoPod(Uuid),
    #[error("the Job cache has not listed the Jobs yet")]
    CacheNotSynced,
}

impl Error {
    /// Whether trying again later may succeed: API server outages, conflicts, throttling, broken watches.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Kube(kube::Error::Api(status)) => status.code >= 500 || status.code == 409 || status.code == 429,
            Error::Kube(_) | Error::StillDeleting { .. } | Error::CacheNotSynced => true,
            Error::NotOurs { .. } | Error::NoPod(_) => false,
        }
    }

    /// What operation statuses may show: the API server's own refusal, or that it could not be reached, never
    /// its address or the operating system's error text (those go to the log).
    pub fn public_message(&self) -> String {
        match self {
            Error::Kube(kube::Error::Api(status)) => {
                format!("the Kubernetes API server refused the request ({}): {}", status.code, status.message)
            }
            Error::Kube(_) => "the Kubernetes API server is unreachable".to_owned(),
            Error::CacheNotSynced => "the Job cache has not synced with the Kubernetes API server yet".to_owned(),
            Error::NotOurs { .. } | Error::StillDeleting { .. } | Error::NoPod(_) => self.to_string(),
        }
    }

    fn is_not_found(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(status)) if status.code == 404)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The namespaced objects a run creates (Secrets, ConfigMap, ServiceAccount, Role, RoleBinding, Job).
trait RunObject:
    k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
    + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> RunObject for K where
    K: k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// Creates and follows the Kubernetes objects of runs in the job namespace.
#[derive(Clone)]
pub struct Executor {
    client: Client,
    settings: JobSettings,
    jobs: reflector::Store<Job>,
}

impl Executor {
    /// The executor and the future that keeps its Job cache in sync (a watch on this service's Jobs only);
    /// the caller runs that future for as long as the executor is used.
    pub fn new(
        client: Client,
        settings: JobSettings,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let api: Api<Job> = Api::namespaced(client.clone(), &settings.namespace);
        let (jobs, writer) = reflector::store();
        let config = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
        let jobs_as_read = watcher(api, config).default_backoff().modify(only_what_the_cache_reads);
        let stream = reflector::reflector(writer, jobs_as_read).applied_objects();
        let sync = async move {
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                if let Err(error) = event {
                    tracing::warn!(%error, "Job watch interrupted; retrying");
                }
            }
        };
        (Executor { client, settings, jobs }, sync)
    }

    /// Waits until the Job cache has its first full list (so status reads do not miss existing Jobs).
    pub async fn wait_until_cache_ready(&self) -> bool {
        self.jobs.wait_until_ready().await.is_ok()
    }

    fn api<K: RunObject>(&self) -> Api<K> {
        Api::namespaced(self.client.clone(), &self.settings.namespace)
    }

    /// Whether the API server answers within `budget` (for `/healthz`: the cache alone cannot tell an outage
    /// from a quiet period).
    pub async fn api_server_reachable(&self, budget: Duration) -> bool {
        matches!(tokio::time::timeout(budget, self.client.apiserver_version()).await, Ok(Ok(_)))
    }
}

/// A Job as the cache keeps it: its metadata (name, labels, uid) and status, which tell a run's state; its spec
/// (the pod template, with every variable of the runner) and managed fields are what most of a Job weighs, and
/// nothing reads them from the cache: a process following 1,000 runs would hold them all.
fn only_what_the_cache_reads(job: &mut Job) {
    job.spec = None;
    job.managed_fields_mut().clear();
}

/// The run an object belongs to: its names, and the ids its objects' labels carry.
#[derive(Debug, Clone, Copy)]
pub struct RunRef<'a> {
    pub names: &'a RunNames,
    pub runtime_id: Uuid,
    pub operation_id: Uuid,
}

impl RunRef<'_> {
    /// The labels of the run's objects.
    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
            (RUNTIME_LABEL.to_owned(), self.runtime_id.to_string()),
            (OPERATION_LABEL.to_owned(), self.operation_id.to_string()),
        ])
    }
}

fn metadata(name: &str, labels: &BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), labels: Some(labels.clone()), ..ObjectMeta::default() }
}

fn managed_by_us(meta: &ObjectMeta) -> bool {
    meta.labels.as_ref().and_then(|labels| labels.get(MANAGED_BY_LABEL)).is_some_and(|value| value == MANAGED_BY)
}

fn belongs_to(meta: &ObjectMeta, operation_id: Uuid) -> bool {
    managed_by_us(meta)
        && meta
            .labels
            .as_ref()
            .and_then(|labels| labels.get(OPERATION_LABEL))
            .is_some_and(|id| *id == operation_id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_belong_to_the_operation_in_their_labels() {
        let names = RunNames::new(crate::domain::OperationType::Provision, Uuid::now_v7());
        let run = RunRef { names: &names, runtime_id: Uuid::now_v7(), operation_id: Uuid::now_v7() };
        let meta = metadata("provision-x", &run.labels());
        assert!(belongs_to(&meta, run.operation_id));
        assert!(!belongs_to(&meta, Uuid::now_v7()));
        assert!(managed_by_us(&meta));
        assert!(!managed_by_us(&ObjectMeta::default()));
        assert_eq!(meta.labels.unwrap()[RUNTIME_LABEL], run.runtime_id.to_string());
    }
}
