//! The Job around the runner: the labels of what belongs to a run, the binary the Job starts, and the timing
//! both sides depend on when a pod is stopped.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;

/// Labels on every object of a run (the runner's outputs Secret too); the operation label says which run an
/// object belongs to.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "cluster-provisioner";
pub const RUNTIME_LABEL: &str = "kubeopera.io/runtime-id";
pub const OPERATION_LABEL: &str = "kubeopera.io/operation-id";

/// The runner's binary in the image (the terraform-runner crate), which the Job names as its command.
pub const RUNNER_BINARY: &str = "terraform-runner";

/// How long a stopped runner may take to interrupt Terraform and exit (the pod's termination grace period): a
/// stopped Terraform finishes the calls in flight, writes its state and releases the lock.
pub const RUNNER_GRACE_PERIOD: Duration = Duration::from_secs(300);

/// How long apply and destroy wait for the state lock.
pub const STATE_LOCK_TIMEOUT: Duration = Duration::from_secs(6 * 60);

// The lock a replaced pod's Terraform still holds is released within its grace period; a new pod's Terraform
// must wait longer than that, or it fails on a lock that is about to be released.
const _: () = assert!(STATE_LOCK_TIMEOUT.as_secs() > RUNNER_GRACE_PERIOD.as_secs());

/// `Some(true)` once the Job completed, `Some(false)` once it failed, `None` while it runs (or may still start a
/// pod): what the service waits for and what a runner asks of a stale lock's operation.
pub fn finished(job: &Job) -> Option<bool> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().filter(|condition| condition.status == "True").find_map(|condition| {
        match condition.type_.as_str() {
            "Complete" => Some(true),
            "Failed" => Some(false),
            _ => None,
        }
    })
}
