//! The Kubernetes side of a run: the credentials Secret, the config ConfigMap and the terraform Job, created
//! idempotently under deterministic names (AlreadyExists means: read it, check it is ours by its labels, reuse
//! it), followed through a watch, and read back for status, logs and the kubeconfig.

mod job;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, LogParams, PostParams, PropagationPolicy};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use runner_contract::credential::CloudCredential;
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL, OPERATION_LABEL, RUNTIME_LABEL};
use runner_contract::manifest::KUBECONFIG_KEY;
use runner_contract::plan::EXIT_DESTRUCTIVE_PLAN;
use runner_contract::redact::{Redactor, bounded_failure_message};
use runner_contract::report::RunReport;
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::domain::run::{JobState, RunNames};
use crate::domain::run_log::ContainerLog;
use crate::domain::{FailureReason, RunAction};
pub use job::{JobSettings, ModulesSettings, RUNNER_CONTAINER, RunnerResources};
pub use runner_contract::job::RUNNER_GRACE_PERIOD;
const DELETION_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a waiting run looks at the (in-memory) Job cache.
const JOB_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How long a log follower waits for the first pod of a Job created a moment ago.
const FIRST_POD_WAIT: Duration = Duration::from_secs(60);
/// How long a Job may be absent from the cache before the API server is asked whether it exists.
const CACHE_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{kind} {name} exists but was not created by {MANAGED_BY}")]
    NotOurs { kind: &'static str, name: String },
    #[error("{kind} {name} was still being deleted after {DELETION_TIMEOUT:?}")]
    StillDeleting { kind: &'static str, name: String },
    #[error("Secret {0} has no {KUBECONFIG_KEY} key")]
    NoKubeconfig(String),
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
            Error::NotOurs { .. } | Error::NoKubeconfig(_) | Error::NoPod(_) => false,
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
            Error::NotOurs { .. } | Error::StillDeleting { .. } | Error::NoKubeconfig(_) | Error::NoPod(_) => {
                self.to_string()
            }
        }
    }

    fn is_not_found(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(status)) if status.code == 404)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A run's logs being read to their end (see [`Executor::open_final_logs`]).
pub struct FinalLogs {
    containers: Vec<(String, LogSource)>,
}

enum LogSource {
    Read(String),
    Following(std::pin::Pin<Box<dyn futures::AsyncBufRead + Send>>),
}

impl FinalLogs {
    /// Reads every followed log until its container has stopped, for at most `wait` in all; what a container
    /// still running after that printed later is not in its log, which says so.
    pub async fn read(self, wait: Duration) -> Vec<ContainerLog> {
        use futures::AsyncReadExt as _;
        let deadline = tokio::time::Instant::now() + wait;
        let reads = self.containers.into_iter().map(|(container, source)| async move {
            let log = match source {
                LogSource::Read(log) => log,
                LogSource::Following(mut stream) => {
                    let mut bytes = Vec::new();
                    let ending = match tokio::time::timeout_at(deadline, stream.read_to_end(&mut bytes)).await {
                        Ok(Ok(_)) => String::new(),
                        Ok(Err(error)) => format!("\n(reading the log stopped: {error})\n"),
                        Err(_) => format!(
                            "\n(the container was still running after {}: its log ends here)\n",
                            humantime::format_duration(wait)
                        ),
                    };
                    format!("{}{ending}", String::from_utf8_lossy(&bytes))
                }
            };
            ContainerLog { container, log }
        });
        futures::future::join_all(reads).await
    }
}

/// Whether the runner container of `pod` has terminated (or the pod reached a final phase).
fn runner_ended(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let phase_final = matches!(status.and_then(|status| status.phase.as_deref()), Some("Succeeded" | "Failed"));
    let terminated =
        status.and_then(|status| status.container_statuses.as_ref()).into_iter().flatten().any(|container| {
            container.name == RUNNER_CONTAINER
                && container.state.as_ref().is_some_and(|state| state.terminated.is_some())
        });
    phase_final || terminated
}

/// What a container's log shows when the API server cannot serve it: a container that has not started (or a
/// pod without a node yet) has no logs.
fn unavailable_log(error: kube::Error) -> Result<String> {
    match error {
        kube::Error::Api(status) if status.code == 400 => Ok(format!("(no logs yet: {})", status.message)),
        error => Err(error.into()),
    }
}

/// The namespaced objects a run creates (Secret, ConfigMap, Job).
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
        let stream = reflector::reflector(writer, watcher(api, config).default_backoff()).applied_objects();
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

    pub async fn ensure_credentials(
        &self,
        names: &RunNames,
        labels: &BTreeMap<String, String>,
        files: &BTreeMap<String, SecretString>,
    ) -> Result<()> {
        let data = files
            .iter()
            .map(|(name, value)| (name.clone(), ByteString(value.expose_secret().as_bytes().to_vec())))
            .collect();
        let secret = Secret {
            metadata: metadata(&names.credentials_secret, labels),
            data: Some(data),
            type_: Some("Opaque".to_owned()),
            ..Secret::default()
        };
        self.ensure(secret, operation_of(labels)).await.map(drop)
    }

    pub async fn ensure_config(
        &self,
        names: &RunNames,
        labels: &BTreeMap<String, String>,
        files: BTreeMap<String, String>,
    ) -> Result<()> {
        let config_map =
            ConfigMap { metadata: metadata(&names.config_map, labels), data: Some(files), ..ConfigMap::default() };
        self.ensure(config_map, operation_of(labels)).await.map(drop)
    }

    /// Creates the run's Job (or reuses it) and hands its ConfigMap and credentials Secret to it as owner, so
    /// the garbage collector removes them with the Job.
    pub async fn ensure_job(
        &self,
        modules: &ModulesSettings,
        action: RunAction,
        names: &RunNames,
        labels: &BTreeMap<String, String>,
        active_deadline: Duration,
    ) -> Result<()> {
        let job = job::build(&self.settings, modules, action, names, labels, active_deadline);
        let job = self.ensure(job, operation_of(labels)).await?;
        let owner = OwnerReference {
            api_version: "batch/v1".to_owned(),
            kind: "Job".to_owned(),
            name: job.name_any(),
            uid: job.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        };
        self.set_owner::<ConfigMap>(&names.config_map, &owner).await?;
        self.set_owner::<Secret>(&names.credentials_secret, &owner).await
    }

    /// Creates `object`; when it already exists, reuses it if it belongs to this operation, and replaces it if
    /// an earlier operation of ours left it behind.
    async fn ensure<K: RunObject>(&self, object: K, operation_id: Uuid) -> Result<K> {
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

    /// Follows the Job until it completes or fails, or `timeout` passes (then `Running`). It reads the
    /// watch-backed Job cache, so a thousand waiting runs cost the API server one watch, not a thousand; only a
    /// Job the cache does not show (yet) is looked up directly.
    pub async fn wait_for_job(
        &self,
        names: &RunNames,
        operation_id: Uuid,
        timeout: Duration,
        redact: &[String],
    ) -> Result<JobState> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut missing_since = None;
        loop {
            let cached = self.jobs.get(&ObjectRef::new(&names.job).within(&self.settings.namespace));
            let job = match cached.filter(|job| belongs_to(job.meta(), operation_id)) {
                Some(job) => Some((*job).clone()),
                // A Job created a moment ago may not have reached the cache: ask the API server after a grace.
                None if missing_since.get_or_insert_with(tokio::time::Instant::now).elapsed() > CACHE_GRACE => {
                    match self.api::<Job>().get_opt(&names.job).await? {
                        Some(job) if belongs_to(job.meta(), operation_id) => Some(job),
                        _ => return Ok(JobState::Missing),
                    }
                }
                None => None,
            };
            if let Some(job) = job
                && job::finished(&job).is_some()
            {
                return self.outcome(&job, redact).await;
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(JobState::Running);
            }
            tokio::time::sleep(JOB_POLL_INTERVAL.min(deadline - tokio::time::Instant::now())).await;
        }
    }

    /// The state of a run's Job from the watch-backed cache (no API request), for live status reads.
    pub fn cached_job_state(&self, names: &RunNames, operation_id: Uuid) -> JobState {
        let reference = ObjectRef::new(&names.job).within(&self.settings.namespace);
        match self.jobs.get(&reference) {
            Some(job) if belongs_to(job.meta(), operation_id) => match job::finished(&job) {
                Some(true) => JobState::Succeeded,
                Some(false) => {
                    let (reason, message) = job::failure(&job);
                    JobState::Failed { reason, message }
                }
                None => JobState::Running,
            },
            _ => JobState::Missing,
        }
    }

    async fn outcome(&self, job: &Job, redact: &[String]) -> Result<JobState> {
        match job::finished(job) {
            None => Ok(JobState::Running),
            Some(true) => Ok(JobState::Succeeded),
            Some(false) => {
                let (reason, job_message) = job::failure(job);
                let (reason, message) = match self.termination_message(&job.name_any()).await? {
                    Some((EXIT_DESTRUCTIVE_PLAN, message)) => (FailureReason::DestructivePlan, message),
                    Some((_, message)) => (reason, message),
                    None => (reason, job_message),
                };
                Ok(JobState::Failed { reason, message: bounded_and_redacted(&message, redact) })
            }
        }
    }

    /// What a succeeded run reports (see `runner_contract::report`): its runner's termination message. `None`
    /// when the pod is gone or said nothing readable.
    pub async fn run_report(&self, names: &RunNames) -> Result<Option<RunReport>> {
        let Some(pod) = self.newest_pod(&names.job).await? else { return Ok(None) };
        let statuses = pod.status.and_then(|status| status.container_statuses).unwrap_or_default();
        Ok(statuses
            .into_iter()
            .filter(|container| container.name == RUNNER_CONTAINER)
            .filter_map(|container| container.state.and_then(|state| state.terminated))
            .filter(|terminated| terminated.exit_code == 0)
            .find_map(|terminated| serde_json::from_str(terminated.message.as_deref()?).ok()))
    }

    /// The exit code and termination message of the runner (or of the init container when that one failed).
    async fn termination_message(&self, job_name: &str) -> Result<Option<(i32, String)>> {
        let Some(pod) = self.newest_pod(job_name).await? else { return Ok(None) };
        let status = pod.status.unwrap_or_default();
        let statuses = status
            .init_container_statuses
            .unwrap_or_default()
            .into_iter()
            .chain(status.container_statuses.unwrap_or_default());
        Ok(statuses
            .filter_map(|container| container.state.and_then(|state| state.terminated))
            .filter(|terminated| terminated.exit_code != 0)
            .find_map(|terminated| {
                let message = terminated.message.filter(|message| !message.trim().is_empty())?;
                Some((terminated.exit_code, message))
            }))
    }

    async fn newest_pod(&self, job_name: &str) -> Result<Option<Pod>> {
        self.newest_pod_matching(&format!("batch.kubernetes.io/job-name={job_name}")).await
    }

    /// The newest pod of an operation's Job.
    async fn newest_pod_of_operation(&self, operation_id: Uuid) -> Result<Option<Pod>> {
        self.newest_pod_matching(&format!("{OPERATION_LABEL}={operation_id}")).await
    }

    async fn newest_pod_matching(&self, selector: &str) -> Result<Option<Pod>> {
        let pods = self.api::<Pod>().list(&ListParams::default().labels(selector)).await?;
        Ok(pods.items.into_iter().max_by_key(|pod| pod.metadata.creation_timestamp.clone()))
    }

    /// Logs of the `init` and `terraform-runner` containers of the operation's pod.
    pub async fn logs(&self, operation_id: Uuid, tail_lines: Option<i64>) -> Result<Vec<ContainerLog>> {
        let pod = self.newest_pod_of_operation(operation_id).await?;
        let pod_name = pod.ok_or(Error::NoPod(operation_id))?.name_any();
        let mut logs = Vec::new();
        for container in [job::INIT_CONTAINER, RUNNER_CONTAINER] {
            let params = LogParams { container: Some(container.to_owned()), tail_lines, ..LogParams::default() };
            let log = match self.api::<Pod>().logs(&pod_name, &params).await {
                Ok(log) => log,
                Err(error) => unavailable_log(error)?,
            };
            logs.push(ContainerLog { container: container.to_owned(), log });
        }
        Ok(logs)
    }

    /// The runner container's log of the operation's newest pod, line by line as it prints them, until the
    /// container has ended. A stream that breaks while the container still runs (a dropped connection to the API
    /// server or the node) is resumed after the lines already sent, and a newer pod of the Job is followed from
    /// its start. With `wait_for_pod` (the operation is active), a missing first pod is waited for, up to
    /// [`FIRST_POD_WAIT`]: a Job created a moment ago gets it from the Job controller. Without a pod the stream
    /// ends. Stops when the receiver is dropped.
    pub fn follow_runner_log(
        &self,
        operation_id: Uuid,
        wait_for_pod: bool,
    ) -> futures::channel::mpsc::Receiver<Result<String>> {
        let (mut sender, receiver) = futures::channel::mpsc::channel(64);
        let executor = self.clone();
        tokio::spawn(async move {
            use futures::{AsyncBufReadExt as _, SinkExt as _};
            let mut followed: Option<(String, usize)> = None;
            let first_pod_deadline = tokio::time::Instant::now() + FIRST_POD_WAIT;
            loop {
                let pod = match executor.newest_pod_of_operation(operation_id).await {
                    Ok(Some(pod)) => pod,
                    Ok(None)
                        if wait_for_pod
                            && followed.is_none()
                            && tokio::time::Instant::now() < first_pod_deadline
                            && !sender.is_closed() =>
                    {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                    Ok(None) => return,
                    Err(error) => {
                        let _ = sender.send(Err(error)).await;
                        return;
                    }
                };
                let name = pod.name_any();
                let sent = match &followed {
                    Some((pod, sent)) if *pod == name => *sent,
                    _ => 0,
                };
                let params =
                    LogParams { container: Some(RUNNER_CONTAINER.to_owned()), follow: true, ..LogParams::default() };
                let mut count = 0;
                match executor.api::<Pod>().log_stream(&name, &params).await {
                    Ok(stream) => {
                        let mut lines = stream.lines();
                        while let Some(Ok(line)) = lines.next().await {
                            count += 1;
                            if count > sent && sender.send(Ok(format!("{line}\n"))).await.is_err() {
                                return;
                            }
                        }
                    }
                    // Not started yet: the init container still runs.
                    Err(kube::Error::Api(status)) if status.code == 400 => {}
                    Err(error) => {
                        let _ = sender.send(Err(error.into())).await;
                        return;
                    }
                }
                followed = Some((name.clone(), sent.max(count)));
                // A pod that is gone, or unreadable now, is asked for again: a newer pod may follow.
                let ended = matches!(executor.api::<Pod>().get_opt(&name).await, Ok(Some(pod)) if runner_ended(&pod));
                if ended || sender.is_closed() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        receiver
    }

    /// Starts reading the whole logs of the operation's pod (`None` without a pod): each container's log is
    /// followed, so one still running when its Job is stopped next is read until it has printed its last line.
    pub async fn open_final_logs(&self, operation_id: Uuid) -> Result<Option<FinalLogs>> {
        let Some(pod) = self.newest_pod_of_operation(operation_id).await? else { return Ok(None) };
        let pod_name = pod.name_any();
        let mut containers = Vec::new();
        for container in [job::INIT_CONTAINER, RUNNER_CONTAINER] {
            let params = LogParams { container: Some(container.to_owned()), follow: true, ..LogParams::default() };
            let source = match self.api::<Pod>().log_stream(&pod_name, &params).await {
                Ok(stream) => LogSource::Following(Box::pin(stream)),
                Err(error) => LogSource::Read(unavailable_log(error)?),
            };
            containers.push((container.to_owned(), source));
        }
        Ok(Some(FinalLogs { containers }))
    }

    /// Stops a run's Job before the run ends, so that no Terraform of it can still be running afterwards: a Job
    /// that has not finished is deleted with background propagation (its pods get their grace period, in which
    /// the runner interrupts Terraform so that it writes its state and releases the lock), after the credentials
    /// Secret was taken out of the Job's ownership so that the garbage collector cannot remove it while a pod
    /// still mounts it. Then waits up to `wait` until no pod of the run is running.
    pub async fn stop_job(&self, names: &RunNames, operation_id: Uuid, wait: Duration) -> Result<JobStop> {
        let mut stop = JobStop::NotRunning;
        if let Some(job) = self.api::<Job>().get_opt(&names.job).await?
            && belongs_to(job.meta(), operation_id)
            && job.metadata.deletion_timestamp.is_none()
            && job::finished(&job).is_none()
        {
            self.remove_owner::<Secret>(&names.credentials_secret, &job.uid().unwrap_or_default()).await?;
            match self.api::<Job>().delete(&names.job, &background_deletion()).await {
                Ok(_) => stop = JobStop::Stopped,
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
        let deadline = tokio::time::Instant::now() + wait;
        let selector = format!("{OPERATION_LABEL}={operation_id}");
        loop {
            let running = self.running_pods(&selector).await?;
            if running.is_empty() {
                return Ok(stop);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(JobStop::StillRunning { pods: running });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Names of the pods matching `selector` that have not reached a final phase (a pod being deleted counts
    /// until it is gone or its containers have stopped).
    async fn running_pods(&self, selector: &str) -> Result<Vec<String>> {
        let pods = self.api::<Pod>().list(&ListParams::default().labels(selector)).await?;
        Ok(pods.items.into_iter().filter(|pod| !pod_finished(pod)).map(|pod| pod.name_any()).collect())
    }

    /// A Job or pod of another operation on the same runtime that may still run Terraform, asked of the API
    /// server (not the cache, which may not have seen a Job another replica created a moment ago).
    pub async fn other_run_of_runtime(&self, runtime_id: Uuid, operation_id: Uuid) -> Result<Option<String>> {
        let selector =
            ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY},{RUNTIME_LABEL}={runtime_id}"));
        let others = |meta: &ObjectMeta| !belongs_to(meta, operation_id);
        let jobs = self.api::<Job>().list(&selector).await?;
        if let Some(job) = jobs.items.iter().find(|job| others(job.meta()) && job::finished(job).is_none()) {
            return Ok(Some(format!("Job {}", job.name_any())));
        }
        let pods = self.api::<Pod>().list(&selector).await?;
        Ok(pods
            .items
            .iter()
            .find(|pod| others(pod.meta()) && !pod_finished(pod))
            .map(|pod| format!("pod {}", pod.name_any())))
    }

    /// A Job of the runtime that has not finished, from the watch-backed cache (no API request once it has
    /// listed; a process that just started waits up to `sync` for that first list).
    pub async fn cached_active_job_of_runtime(&self, runtime_id: Uuid, sync: Duration) -> Result<Option<String>> {
        if !matches!(tokio::time::timeout(sync, self.wait_until_cache_ready()).await, Ok(true)) {
            return Err(Error::CacheNotSynced);
        }
        let runtime_id = runtime_id.to_string();
        Ok(self
            .jobs
            .state()
            .into_iter()
            .filter(|job| job.labels().get(RUNTIME_LABEL) == Some(&runtime_id))
            .find(|job| job::finished(job).is_none())
            .map(|job| job.name_any()))
    }

    /// Whether the API server answers within `budget` (for `/healthz`: the cache alone cannot tell an outage
    /// from a quiet period).
    pub async fn api_server_reachable(&self, budget: Duration) -> bool {
        matches!(tokio::time::timeout(budget, self.client.apiserver_version()).await, Ok(Ok(_)))
    }

    async fn remove_owner<K: RunObject>(&self, name: &str, owner_uid: &str) -> Result<()> {
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

    /// The kubeconfig terraform-runner published; `None` while the outputs Secret does not exist.
    pub async fn kubeconfig(&self, names: &RunNames) -> Result<Option<String>> {
        let Some(secret) = self.api::<Secret>().get_opt(&names.outputs_secret).await? else { return Ok(None) };
        let kubeconfig = secret
            .data
            .and_then(|mut data| data.remove(KUBECONFIG_KEY))
            .ok_or_else(|| Error::NoKubeconfig(names.outputs_secret.clone()))?;
        Ok(Some(String::from_utf8_lossy(&kubeconfig.0).into_owned()))
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

/// What stopping a run's Job found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStop {
    /// The Job had finished (or did not exist) and no pod of the run is running.
    NotRunning,
    /// The Job was still running: it was deleted, and its pods are gone now.
    Stopped,
    /// Pods of the run were still running when the wait ended.
    StillRunning { pods: Vec<String> },
}

/// Background propagation: a Job's pods go with it (with their grace period) instead of being orphaned.
fn background_deletion() -> DeleteParams {
    DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() }
}

fn pod_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// The labels of one run's objects.
pub fn run_labels(runtime_id: Uuid, operation_id: Uuid) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
        (RUNTIME_LABEL.to_owned(), runtime_id.to_string()),
        (OPERATION_LABEL.to_owned(), operation_id.to_string()),
    ])
}

fn operation_of(labels: &BTreeMap<String, String>) -> Uuid {
    labels.get(OPERATION_LABEL).and_then(|id| Uuid::parse_str(id).ok()).unwrap_or_default()
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

/// Keeps a failure message short and free of credential values.
fn bounded_and_redacted(message: &str, redact: &[String]) -> String {
    bounded_failure_message(&Redactor::new(redact.iter().cloned()).redact(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_messages_are_redacted_and_bounded() {
        let secrets = vec!["AKIASECRET123".to_owned(), "x".to_owned()];
        // A short value is redacted where it stands as a word, not inside others.
        let message = bounded_and_redacted("auth failed for AKIASECRET123 at max x", &secrets);
        assert_eq!(message, "auth failed for [REDACTED] at max [REDACTED]");
        let long = "é".repeat(2000);
        let bounded = bounded_and_redacted(&long, &[]);
        assert!(bounded.len() <= runner_contract::redact::MAX_FAILURE_MESSAGE + '…'.len_utf8());
        assert!(bounded.ends_with('…'));
    }

    #[test]
    fn objects_belong_to_the_operation_in_their_labels() {
        let runtime_id = Uuid::now_v7();
        let operation_id = Uuid::now_v7();
        let meta = metadata("provision-x", &run_labels(runtime_id, operation_id));
        assert!(belongs_to(&meta, operation_id));
        assert!(!belongs_to(&meta, Uuid::now_v7()));
        assert!(managed_by_us(&meta));
        assert!(!managed_by_us(&ObjectMeta::default()));
        assert_eq!(operation_of(&run_labels(runtime_id, operation_id)), operation_id);
    }
}
