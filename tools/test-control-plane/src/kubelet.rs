//! A kubelet stand-in: there is no node, so tests finish Pods by writing their status as a kubelet
//! would, and the real Job controller reacts to it.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};

use crate::{ControlPlane, Result, WAIT_TIMEOUT};

impl ControlPlane {
    /// Waits for a not yet finished Pod that the Job controller created for the Job `namespace/job`.
    pub async fn wait_for_job_pod(&self, namespace: &str, job: &str) -> Result<Pod> {
        let pods = Api::<Pod>::namespaced(self.admin_client()?, namespace);
        let selector = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
        let pending = async || {
            let list = pods.list(&selector).await.ok()?;
            list.items.into_iter().find(|pod| !is_finished(pod))
        };
        self.wait_until(&format!("a Pod of Job {namespace}/{job}"), WAIT_TIMEOUT, pending).await
    }

    /// Finishes the Pod `namespace/pod` through its status subresource, as a kubelet would after
    /// `container` exited: phase Succeeded for exit code 0, Failed otherwise, and the container's
    /// terminated state with `exit_code` and the termination `message`.
    pub async fn terminate_pod(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        exit_code: i32,
        message: &str,
    ) -> Result<Pod> {
        let pods = Api::<Pod>::namespaced(self.admin_client()?, namespace);
        let image = pods
            .get(pod)
            .await?
            .spec
            .and_then(|spec| spec.containers.into_iter().find(|c| c.name == container))
            .ok_or_else(|| format!("Pod {namespace}/{pod} has no container {container}"))?
            .image;
        let now = Time(Timestamp::now());
        let (phase, reason) = match exit_code {
            0 => ("Succeeded", "Completed"),
            _ => ("Failed", "Error"),
        };
        let status = Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: container.into(),
                    image: image.unwrap_or_default(),
                    image_id: String::new(),
                    ready: false,
                    restart_count: 0,
                    started: Some(false),
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code,
                            reason: Some(reason.into()),
                            message: Some(message.into()),
                            started_at: Some(now.clone()),
                            finished_at: Some(now),
                            ..ContainerStateTerminated::default()
                        }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        Ok(pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status)).await?)
    }

    /// Waits until the Job `namespace/job` has the condition `condition` (e.g. `Complete` or
    /// `Failed`) with status True.
    pub async fn wait_for_job_condition(&self, namespace: &str, job: &str, condition: &str) -> Result<Job> {
        let jobs = Api::<Job>::namespaced(self.admin_client()?, namespace);
        let reached = async || {
            let found = jobs.get(job).await.ok()?;
            let conditions = found.status.as_ref()?.conditions.as_ref()?;
            conditions.iter().any(|c| c.type_ == condition && c.status == "True").then_some(found)
        };
        let what = format!("condition {condition} on Job {namespace}/{job}");
        self.wait_until(&what, WAIT_TIMEOUT, reached).await
    }
}

fn is_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}
