//! Stale state locks. A run whose pod vanished without a graceful stop (node lost, OOM-killed) leaves Terraform's
//! lock in the state bucket, and every later run would wait for it and fail. Each run records itself as the
//! holder (pod, operation, hostname) before its first command that takes the lock; the next run of the runtime
//! force-unlocks a lock only when that record explains it (the lock's `Who` names the recorded hostname, the record
//! names this runtime), the recorded pod no longer runs, and its operation has no unfinished Job. Anything else is
//! left alone and waited for like any held lock.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use runner_contract::job::{OPERATION_LABEL, finished};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Result;

/// Terraform's lock object, as the S3 and GCS backends write it (`LockInfo`); only what the decision reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StateLock {
    #[serde(rename = "ID")]
    pub id: String,
    /// `user@hostname` of the process that took it.
    pub who: String,
    #[serde(default)]
    pub created: String,
}

impl StateLock {
    fn hostname(&self) -> &str {
        self.who.rsplit_once('@').map_or(self.who.as_str(), |(_, host)| host)
    }
}

/// Who takes the state lock: written beside the state by each run before Terraform locks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockHolder {
    pub runtime_id: Uuid,
    pub operation_id: Uuid,
    pub pod: String,
    /// What Terraform writes after the `@` of the lock's `Who`: a pod's hostname is its name, but a runner
    /// started elsewhere (a test) has the machine's.
    pub hostname: String,
}

impl LockHolder {
    /// This process, run as `pod` for `operation_id` on `runtime_id`'s state.
    pub fn this_run(runtime_id: Uuid, operation_id: Uuid, pod: &str) -> Self {
        // Where Go's os.Hostname, and so Terraform, reads it on Linux.
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_owned();
        LockHolder { runtime_id, operation_id, pod: pod.to_owned(), hostname }
    }
}

/// What the API server says of the recorded holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Not in the API server any more.
    Gone,
    /// Its containers have ended for good (`Succeeded` or `Failed`, as an OOM-killed Job pod is).
    Ended,
    /// Pending, running or being stopped: its Terraform may still hold the lock and release it.
    Live,
}

impl PodState {
    pub fn of(pod: Option<&Pod>) -> Self {
        let phase = pod.and_then(|pod| pod.status.as_ref()).and_then(|status| status.phase.as_deref());
        match (pod, phase) {
            (None, _) => PodState::Gone,
            (Some(_), Some("Succeeded" | "Failed")) => PodState::Ended,
            (Some(_), _) => PodState::Live,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// Its recorded holder is dead: unlock it.
    Stale(&'a LockHolder),
    /// Left alone, and why.
    Held(String),
}

/// The decision, on what was read: the lock, the holder record beside it, this run, the recorded pod's state, and
/// whether the recorded operation still has an unfinished Job (never asked of this run's own operation, whose Job
/// runs this very pod).
pub fn judge<'a>(
    lock: &StateLock,
    holder: Option<&'a LockHolder>,
    this_run: &LockHolder,
    pod: PodState,
    operation_has_unfinished_job: bool,
) -> Verdict<'a> {
    let Some(holder) = holder else {
        return Verdict::Held("no run recorded itself as its holder".to_owned());
    };
    if holder.runtime_id != this_run.runtime_id {
        return Verdict::Held(format!("its holder record is for another runtime ({})", holder.runtime_id));
    }
    if lock.hostname() != holder.hostname {
        return Verdict::Held(format!("it was taken by {}, not by the recorded pod {}", lock.who, holder.pod));
    }
    if holder.pod == this_run.pod || pod == PodState::Live {
        return Verdict::Held(format!("its holder pod {} still runs", holder.pod));
    }
    if holder.operation_id != this_run.operation_id && operation_has_unfinished_job {
        return Verdict::Held(format!("its holder's operation {} still has an unfinished Job", holder.operation_id));
    }
    Verdict::Stale(holder)
}

/// The recorded pod's state and whether the recorded operation has an unfinished Job, from the API server, in the
/// run's own namespace (where every run's Job is).
pub async fn holder_facts(
    kube: &kube::Client,
    namespace: &str,
    holder: &LockHolder,
    this_run: &LockHolder,
) -> Result<(PodState, bool)> {
    let pod = Api::<Pod>::namespaced(kube.clone(), namespace).get_opt(&holder.pod).await?;
    let unfinished = if holder.operation_id == this_run.operation_id {
        false
    } else {
        let selector = format!("{OPERATION_LABEL}={}", holder.operation_id);
        let jobs =
            Api::<Job>::namespaced(kube.clone(), namespace).list(&ListParams::default().labels(&selector)).await?;
        jobs.items.iter().any(|job| finished(job).is_none())
    };
    Ok((PodState::of(pod.as_ref()), unfinished))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodStatus;

    use super::*;

    fn holder(pod: &str, operation: u128) -> LockHolder {
        LockHolder {
            runtime_id: Uuid::from_u128(1),
            operation_id: Uuid::from_u128(operation),
            pod: pod.to_owned(),
            hostname: pod.to_owned(),
        }
    }

    fn lock_by(who: &str) -> StateLock {
        StateLock { id: "b6f1".to_owned(), who: who.to_owned(), created: String::new() }
    }

    #[test]
    fn a_lock_whose_recorded_pod_is_gone_or_ended_is_stale() {
        let (dead, me) = (holder("provision-r-aaaaa", 7), holder("provision-r-bbbbb", 8));
        let lock = lock_by("runner@provision-r-aaaaa");
        assert_eq!(judge(&lock, Some(&dead), &me, PodState::Gone, false), Verdict::Stale(&dead));
        assert_eq!(judge(&lock, Some(&dead), &me, PodState::Ended, false), Verdict::Stale(&dead));
        // An earlier attempt of this very operation: its Job is this run's.
        let earlier_attempt = holder("provision-r-aaaaa", 8);
        assert_eq!(judge(&lock, Some(&earlier_attempt), &me, PodState::Gone, true), Verdict::Stale(&earlier_attempt));
        // Terraform's user part may be empty (no passwd entry).
        assert_eq!(
            judge(&lock_by("@provision-r-aaaaa"), Some(&dead), &me, PodState::Gone, false),
            Verdict::Stale(&dead)
        );
    }

    #[test]
    fn a_live_holder_an_active_operation_or_an_unexplained_lock_is_left_alone() {
        let (holder_run, me) = (holder("provision-r-aaaaa", 7), holder("provision-r-bbbbb", 8));
        let lock = lock_by("runner@provision-r-aaaaa");
        let held = |verdict: Verdict<'_>| match verdict {
            Verdict::Held(why) => why,
            Verdict::Stale(_) => panic!("a lock that must be left alone was judged stale"),
        };
        assert_eq!(
            held(judge(&lock, Some(&holder_run), &me, PodState::Live, false)),
            "its holder pod provision-r-aaaaa still runs"
        );
        assert_eq!(
            held(judge(&lock, Some(&holder_run), &me, PodState::Gone, true)),
            format!("its holder's operation {} still has an unfinished Job", Uuid::from_u128(7))
        );
        assert_eq!(held(judge(&lock, None, &me, PodState::Gone, false)), "no run recorded itself as its holder");
        let by_hand = lock_by("alice@laptop");
        assert_eq!(
            held(judge(&by_hand, Some(&holder_run), &me, PodState::Gone, false)),
            "it was taken by alice@laptop, not by the recorded pod provision-r-aaaaa"
        );
        let other_runtime = LockHolder { runtime_id: Uuid::from_u128(2), ..holder_run.clone() };
        assert!(held(judge(&lock, Some(&other_runtime), &me, PodState::Gone, false)).contains("another runtime"));
        // Never this pod's own lock.
        assert!(held(judge(&lock, Some(&holder_run), &holder_run, PodState::Gone, false)).contains("still runs"));
    }

    #[test]
    fn a_pod_runs_until_its_phase_says_it_ended() {
        let pod = |phase: Option<&str>| Pod {
            status: Some(PodStatus { phase: phase.map(str::to_owned), ..PodStatus::default() }),
            ..Pod::default()
        };
        assert_eq!(PodState::of(None), PodState::Gone);
        assert_eq!(PodState::of(Some(&pod(Some("Failed")))), PodState::Ended);
        assert_eq!(PodState::of(Some(&pod(Some("Succeeded")))), PodState::Ended);
        assert_eq!(PodState::of(Some(&pod(Some("Running")))), PodState::Live);
        assert_eq!(PodState::of(Some(&pod(None))), PodState::Live);
    }

    #[test]
    fn terraforms_lock_object_is_read() {
        let lock: StateLock = serde_json::from_str(
            r#"{"ID":"0c1f0b5e-9d3a-4b7e-8a63-d2f6c1f0e001","Operation":"OperationTypeApply","Info":"","Who":"root@provision-r-aaaaa","Version":"1.10.7","Created":"2026-12-02T01:02:03.456Z","Path":"kubeopera-x/terraform.tfstate"}"#,
        )
        .unwrap();
        assert_eq!(lock.id, "0c1f0b5e-9d3a-4b7e-8a63-d2f6c1f0e001");
        assert_eq!(lock.hostname(), "provision-r-aaaaa");
    }
}
