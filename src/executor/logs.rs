//! A run's logs: read, followed while the runner runs, and read to their end for the archive.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{ListParams, LogParams};
use runner_contract::job::OPERATION_LABEL;
use uuid::Uuid;

use super::{Error, Executor, RUNNER_CONTAINER, Result, job};
use crate::domain::run_log::{BoundedRead, ContainerLog};

/// How long a log follower waits for the first pod of a Job created a moment ago.
const FIRST_POD_WAIT: Duration = Duration::from_secs(60);

/// A run's logs being read to their end (see [`Executor::open_final_logs`]).
pub struct FinalLogs {
    containers: Vec<(String, LogSource)>,
}

impl FinalLogs {
    /// Logs already read, as a fake cluster of a unit test gives them.
    #[cfg(test)]
    pub(crate) fn already_read(logs: Vec<(String, String)>) -> FinalLogs {
        FinalLogs { containers: logs.into_iter().map(|(container, log)| (container, LogSource::Read(log))).collect() }
    }

    /// Reads every followed log until its container has stopped, for at most `wait` in all and keeping at most
    /// `max_bytes` of each (its head and tail); what a container still running after that printed later is not
    /// in its log, which says so.
    pub async fn read(self, wait: Duration, max_bytes: usize) -> Vec<ContainerLog> {
        let deadline = tokio::time::Instant::now() + wait;
        let reads = self.containers.into_iter().map(|(container, source)| async move {
            let log = match source {
                LogSource::Read(log) => log,
                LogSource::Following(stream) => {
                    let mut read = BoundedRead::new(max_bytes);
                    let ending = match tokio::time::timeout_at(deadline, read_into(stream, &mut read)).await {
                        Ok(Ok(())) => String::new(),
                        Ok(Err(error)) => format!("\n(reading the log stopped: {error})\n"),
                        Err(_) => format!(
                            "\n(the container was still running after {}: its log ends here)\n",
                            humantime::format_duration(wait)
                        ),
                    };
                    format!("{}{ending}", read.text())
                }
            };
            ContainerLog { container, log }
        });
        futures::future::join_all(reads).await
    }
}

/// Reads `stream` to its end into `read`.
async fn read_into(
    mut stream: std::pin::Pin<Box<dyn futures::AsyncBufRead + Send>>,
    read: &mut BoundedRead,
) -> std::io::Result<()> {
    use futures::AsyncReadExt as _;
    let mut buffer = vec![0; 64 * 1024];
    loop {
        match stream.read(&mut buffer).await? {
            0 => return Ok(()),
            count => read.push(&buffer[..count]),
        }
    }
}

enum LogSource {
    Read(String),
    Following(std::pin::Pin<Box<dyn futures::AsyncBufRead + Send>>),
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

impl Executor {
    pub(super) async fn newest_pod(&self, job_name: &str) -> Result<Option<Pod>> {
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

    /// Logs of the `init` and `terraform-runner` containers of the operation's pod, at most `limit_bytes` each
    /// (the API server stops there).
    pub async fn logs(
        &self,
        operation_id: Uuid,
        tail_lines: Option<i64>,
        limit_bytes: usize,
    ) -> Result<Vec<ContainerLog>> {
        let pod = self.newest_pod_of_operation(operation_id).await?;
        let pod_name = pod.ok_or(Error::NoPod(operation_id))?.name_any();
        let mut logs = Vec::new();
        for container in [job::INIT_CONTAINER, RUNNER_CONTAINER] {
            let limit_bytes = Some(i64::try_from(limit_bytes).unwrap_or(i64::MAX));
            let params =
                LogParams { container: Some(container.to_owned()), tail_lines, limit_bytes, ..LogParams::default() };
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
}
