//! A run's Job: its state from the cache, its outcome and report, stopping it, and one Job per runtime.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use runner_contract::approval::EXIT_STALE_PLAN;
use runner_contract::failure::{EXIT_CLOUD_FAILURE, EXIT_LEFTOVERS, Leftovers, RunFailure};
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL, OPERATION_LABEL, RUNTIME_LABEL};
use runner_contract::plan::EXIT_DESTRUCTIVE_PLAN;
use runner_contract::redact::{Redactor, bounded_failure_message};
use runner_contract::report::RunReport;
use uuid::Uuid;

use super::objects::background_deletion;
use super::{Error, Executor, RUNNER_CONTAINER, Result, belongs_to, job, job_failure};
use crate::domain::FailureReason;
use crate::domain::run::{JobState, RunNames};

/// How often a waiting run looks at the (in-memory) Job cache.
const JOB_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How long a Job may be absent from the cache before the API server is asked whether it exists.
const CACHE_GRACE: Duration = Duration::from_secs(10);

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

fn pod_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Keeps a failure message short and free of credential values.
fn bounded_and_redacted(message: &str, redact: &[String]) -> String {
    bounded_failure_message(&Redactor::new(redact.iter().cloned()).redact(message))
}

impl Executor {
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
                    let (reason, message) = job_failure::failure(&job);
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
                let (reason, job_message) = job_failure::failure(job);
                let (reason, message) = match self.termination_message(&job.name_any()).await? {
                    Some((EXIT_DESTRUCTIVE_PLAN, message)) => (FailureReason::DestructivePlan, message),
                    Some((EXIT_STALE_PLAN, message)) => (FailureReason::StalePlan, message),
                    Some((EXIT_CLOUD_FAILURE, message)) => cloud_failure(message),
                    Some((EXIT_LEFTOVERS, message)) => leftovers(message),
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
        self.termination_report(names, 0).await
    }

    /// What a deprovisioning that found resources left in the cloud reported (its runner exited with
    /// [`EXIT_LEFTOVERS`]).
    pub async fn leftovers(&self, names: &RunNames) -> Result<Option<Leftovers>> {
        self.termination_report(names, EXIT_LEFTOVERS).await
    }

    /// The runner's termination message as JSON, when it exited with `exit_code`.
    async fn termination_report<T: serde::de::DeserializeOwned>(
        &self,
        names: &RunNames,
        exit_code: i32,
    ) -> Result<Option<T>> {
        let Some(pod) = self.newest_pod(&names.job).await? else { return Ok(None) };
        let statuses = pod.status.and_then(|status| status.container_statuses).unwrap_or_default();
        Ok(statuses
            .into_iter()
            .filter(|container| container.name == RUNNER_CONTAINER)
            .filter_map(|container| container.state.and_then(|state| state.terminated))
            .filter(|terminated| terminated.exit_code == exit_code)
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
}

/// The reason and message of a deprovisioning that found leftovers (its termination message is [`Leftovers`]).
fn leftovers(message: String) -> (FailureReason, String) {
    match serde_json::from_str::<Leftovers>(&message) {
        Ok(leftovers) => (FailureReason::Leftovers, leftovers.message),
        Err(_) => (FailureReason::JobFailed, message),
    }
}

/// The reason and message of a run that failed on the cloud's answer (its termination message is a
/// [`RunFailure`]); a message that is not one (a runner of another release) is shown as it is.
fn cloud_failure(message: String) -> (FailureReason, String) {
    match serde_json::from_str::<RunFailure>(&message) {
        Ok(failure) => (FailureReason::of_cloud(failure.cloud.class), failure.message),
        Err(_) => (FailureReason::JobFailed, message),
    }
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
}
