//! One reconciler at a time: the process that holds the `coordination.k8s.io/v1` Lease [`LEASE_NAME`] in its own
//! namespace runs the Runtime controllers; every other one serves the APIs, runs its worker and waits for the
//! lease. The holder renews the lease every [`RENEW_EVERY`]; another process takes it once it is free (a holder
//! that stopped gracefully clears it) or expired (its last renewal older than [`LEASE_DURATION`]). Every write
//! replaces the Lease at the resourceVersion read just before, so of two processes taking it at once one wins and
//! the other gets a conflict. A holder that cannot renew for [`RENEW_DEADLINE`] stops its controllers at once,
//! before anyone else may take over.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::{Instant, sleep, timeout};

/// The Lease the reconciling process holds, in the namespace of the process's own client.
pub const LEASE_NAME: &str = "cluster-provisioner-runtimes";

/// How long a holder's last renewal keeps the others out: a killed holder is replaced within this plus
/// [`RETRY_EVERY`]. Long enough for a few failed renewals (an API server that hiccups) not to hand the lease
/// over, short enough for a handover within seconds.
pub const LEASE_DURATION: Duration = Duration::from_secs(10);
/// How often the holder renews: five chances within one [`LEASE_DURATION`].
pub const RENEW_EVERY: Duration = Duration::from_secs(2);
/// A holder that could not renew for this long stops leading: 3 s before anyone else may take the lease, for the
/// replicas' clocks to differ (others judge expiry by the renewTime it wrote) and its last request to arrive.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(7);
/// How often a process that does not lead looks whether the lease is free: a released lease is taken within this.
pub const RETRY_EVERY: Duration = Duration::from_secs(2);
/// Every call to the API server; one that takes longer counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// This process's name in the lease: its pod's name (`POD_NAME`, else `HOSTNAME`, which Kubernetes sets to the
/// pod's name) with a random suffix, so that a restarted container, or two processes on one host, never pass for
/// each other.
pub fn identity() -> String {
    let host = ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .filter_map(|variable| std::env::var(variable).ok())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "provisioner".to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &suffix[..8])
}

/// Whether `identity` may hold the lease `spec` at `now`: there is none, nobody holds it, `identity` does, or its
/// holder's last renewal (renewTime, else acquireTime) plus its leaseDurationSeconds lies before `now`.
pub fn free_for(spec: Option<&LeaseSpec>, identity: &str, now: DateTime<Utc>) -> bool {
    let Some(spec) = spec else { return true };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || holder == identity {
        return true;
    }
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else { return true };
    let ours = || i64::try_from(LEASE_DURATION.as_secs()).unwrap_or(i64::MAX);
    let seconds = spec.lease_duration_seconds.map_or_else(ours, i64::from);
    let expires = renewed.0.as_microsecond().saturating_add(seconds.saturating_mul(1_000_000));
    expires < now.timestamp_micros()
}

/// The lease `previous` (none: a new one) as `identity` holds it from `now`: renewed when it held it already,
/// taken over (acquired now, one transition more) otherwise.
pub fn held(previous: Option<LeaseSpec>, identity: &str, now: DateTime<Utc>) -> LeaseSpec {
    let now = Timestamp::from_microsecond(now.timestamp_micros()).ok().map(MicroTime);
    let seconds = i32::try_from(LEASE_DURATION.as_secs()).unwrap_or(i32::MAX);
    let (acquire_time, lease_transitions, previous) = match previous {
        None => (now.clone(), Some(0), LeaseSpec::default()),
        Some(previous) if previous.holder_identity.as_deref() == Some(identity) => {
            (previous.acquire_time.clone(), previous.lease_transitions, previous)
        }
        Some(previous) => {
            let transitions = previous.lease_transitions.unwrap_or(0).saturating_add(1);
            (now.clone(), Some(transitions), previous)
        }
    };
    LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(seconds),
        acquire_time,
        renew_time: now,
        lease_transitions,
        ..previous
    }
}

/// Runs `work` only while this process holds the lease `namespace`/[`LEASE_NAME`] as `identity`, until `stopped`
/// turns true. `work` is started anew each time the lease is won and dropped at once when it is lost (the
/// process then waits for the lease again); it must end by itself once `stopped` turns true, after which the
/// lease is released for the next process to take at once. Ends with an error only when `work` ends before
/// `stopped` does.
pub async fn lead<W, F>(
    client: kube::Client,
    namespace: &str,
    identity: &str,
    mut stopped: watch::Receiver<bool>,
    mut work: W,
) -> Result<(), String>
where
    W: FnMut() -> F,
    F: Future<Output = ()>,
{
    let elector = Elector { api: Api::namespaced(client, namespace), identity: identity.to_owned() };
    loop {
        let Some(acquired) = elector.acquire(&mut stopped).await else { return Ok(()) };
        tracing::info!(lease = LEASE_NAME, namespace, identity, "leading: this process reconciles the Runtimes");
        tokio::select! {
            () = work() => {
                elector.release().await;
                return if *stopped.borrow() {
                    tracing::info!(lease = LEASE_NAME, namespace, identity, "stopped leading: the lease is released");
                    Ok(())
                } else {
                    Err("the Runtime controllers ended".to_owned())
                };
            }
            () = elector.keep(acquired) => tracing::warn!(
                lease = LEASE_NAME,
                namespace,
                identity,
                "the lease is lost: the Runtime controllers stop, and this process waits to lead again"
            ),
        }
    }
}

/// Whether this process holds the lease after one attempt, or who does.
enum Hold {
    Held,
    HeldBy(String),
}

enum CallError {
    /// The Lease changed since it was read: someone else wrote it.
    Conflict,
    Failed(String),
}

struct Elector {
    api: Api<Lease>,
    identity: String,
}

impl Elector {
    /// Tries until the lease is held, every [`RETRY_EVERY`]; returns when the successful attempt started, or
    /// `None` once `stopped` turns true.
    async fn acquire(&self, stopped: &mut watch::Receiver<bool>) -> Option<Instant> {
        let mut last_seen = String::new();
        loop {
            if *stopped.borrow() {
                return None;
            }
            let started = Instant::now();
            let seen = match timeout(CALL_TIMEOUT * 2, self.try_hold()).await {
                Ok(Ok(Hold::Held)) => return Some(started),
                Ok(Ok(Hold::HeldBy(holder))) => format!("held by {holder}"),
                Ok(Err(error)) => error,
                Err(_) => format!("no answer within {:?}", CALL_TIMEOUT * 2),
            };
            // Said once, not every attempt.
            if seen != last_seen {
                tracing::info!(lease = LEASE_NAME, identity = %self.identity, state = %seen, "waiting for the lease");
                last_seen = seen;
            }
            tokio::select! {
                () = sleep(RETRY_EVERY) => {}
                _ = stopped.wait_for(|stop| *stop) => return None,
            }
        }
    }

    /// Renews the lease every [`RENEW_EVERY`] from `renewed` (when the last successful attempt started); returns
    /// once it is lost: another process holds it, or it could not be renewed for [`RENEW_DEADLINE`].
    async fn keep(&self, mut renewed: Instant) {
        loop {
            sleep(RENEW_EVERY).await;
            let started = Instant::now();
            let left = (renewed + RENEW_DEADLINE).saturating_duration_since(started);
            match timeout(left, self.try_hold()).await {
                Ok(Ok(Hold::Held)) => renewed = started,
                Ok(Ok(Hold::HeldBy(holder))) => {
                    tracing::warn!(lease = LEASE_NAME, identity = %self.identity, %holder, "another process took the lease");
                    return;
                }
                Ok(Err(error)) => tracing::warn!(lease = LEASE_NAME, %error, "renewing the lease failed"),
                Err(_) => tracing::warn!(lease = LEASE_NAME, "renewing the lease got no answer in time"),
            }
            if renewed.elapsed() >= RENEW_DEADLINE {
                tracing::warn!(lease = LEASE_NAME, "the lease was not renewed for {RENEW_DEADLINE:?}");
                return;
            }
        }
    }

    /// One attempt: reads the Lease and, when it is free for this process, writes it as held (created when
    /// missing) at the version read.
    async fn try_hold(&self) -> Result<Hold, String> {
        let current = match call(self.api.get_opt(LEASE_NAME)).await {
            Ok(current) => current,
            Err(error) => return Err(error.describe("reading")),
        };
        let now = Utc::now();
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(LEASE_NAME.to_owned()), ..ObjectMeta::default() },
                spec: Some(held(None, &self.identity, now)),
            };
            return match call(self.api.create(&PostParams::default(), &lease)).await {
                Ok(_) => Ok(Hold::Held),
                Err(CallError::Conflict) => Ok(Hold::HeldBy("another process, which created it".to_owned())),
                Err(error) => Err(error.describe("creating")),
            };
        };
        if !free_for(lease.spec.as_ref(), &self.identity, now) {
            let holder = lease.spec.and_then(|spec| spec.holder_identity).unwrap_or_default();
            return Ok(Hold::HeldBy(holder));
        }
        lease.spec = Some(held(lease.spec.take(), &self.identity, now));
        match call(self.api.replace(LEASE_NAME, &PostParams::default(), &lease)).await {
            Ok(_) => Ok(Hold::Held),
            Err(CallError::Conflict) => Ok(Hold::HeldBy("another process, which wrote it first".to_owned())),
            Err(error) => Err(error.describe("writing")),
        }
    }

    /// Clears the holder when it is still this process, for the next process to take the lease at once. A
    /// failure is logged: the lease then expires.
    async fn release(&self) {
        let released = async {
            let Some(mut lease) =
                call(self.api.get_opt(LEASE_NAME)).await.map_err(|error| error.describe("reading"))?
            else {
                return Ok(());
            };
            let Some(spec) = lease.spec.as_mut().filter(|spec| spec.holder_identity.as_ref() == Some(&self.identity))
            else {
                return Ok(());
            };
            spec.holder_identity = None;
            call(self.api.replace(LEASE_NAME, &PostParams::default(), &lease))
                .await
                .map(drop)
                .map_err(|error| error.describe("releasing"))
        };
        if let Err(error) = released.await {
            tracing::warn!(lease = LEASE_NAME, %error, "the lease was not released; it expires in {LEASE_DURATION:?}");
        }
    }
}

/// One call to the API server, within [`CALL_TIMEOUT`].
async fn call<T>(request: impl Future<Output = kube::Result<T>>) -> Result<T, CallError> {
    match timeout(CALL_TIMEOUT, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(kube::Error::Api(status))) if status.code == 409 => Err(CallError::Conflict),
        Ok(Err(error)) => Err(CallError::Failed(error.to_string())),
        Err(_) => Err(CallError::Failed(format!("no answer within {CALL_TIMEOUT:?}"))),
    }
}

impl CallError {
    fn describe(self, what: &str) -> String {
        match self {
            CallError::Conflict => format!("{what} the Lease {LEASE_NAME}: it changed meanwhile"),
            CallError::Failed(error) => format!("{what} the Lease {LEASE_NAME}: {error}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    fn held_by(holder: Option<&str>, renewed: Option<i64>, duration: Option<i32>) -> LeaseSpec {
        let time = |seconds: i64| MicroTime(Timestamp::from_second(at(seconds).timestamp()).unwrap());
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: renewed.map(time),
            acquire_time: Some(time(0)),
            lease_duration_seconds: duration,
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_is_free_when_missing_unheld_or_mine() {
        assert!(free_for(None, "me", at(1)));
        assert!(free_for(Some(&held_by(None, Some(0), Some(10))), "me", at(1)));
        assert!(free_for(Some(&held_by(Some(""), Some(0), Some(10))), "me", at(1)));
        assert!(free_for(Some(&held_by(Some("me"), Some(0), Some(10))), "me", at(1)));
    }

    #[test]
    fn another_holders_lease_is_free_only_once_its_last_renewal_is_older_than_its_duration() {
        let other = held_by(Some("other"), Some(100), Some(10));
        assert!(!free_for(Some(&other), "me", at(101)));
        assert!(!free_for(Some(&other), "me", at(110)), "expired only after the whole duration");
        assert!(free_for(Some(&other), "me", at(111)));
        // Without a renewal, its acquisition counts; without a duration, ours.
        assert!(!free_for(Some(&held_by(Some("other"), None, Some(10))), "me", at(9)));
        assert!(free_for(Some(&held_by(Some("other"), None, Some(10))), "me", at(11)));
        assert!(!free_for(Some(&held_by(Some("other"), Some(100), None)), "me", at(109)));
        assert!(free_for(Some(&held_by(Some("other"), Some(100), None)), "me", at(111)));
    }

    #[test]
    fn holding_renews_my_lease_and_takes_over_anothers() {
        let created = held(None, "me", at(5));
        assert_eq!(created.holder_identity.as_deref(), Some("me"));
        assert_eq!((created.lease_transitions, created.lease_duration_seconds), (Some(0), Some(10)));
        assert_eq!(created.acquire_time, created.renew_time);

        let renewed = held(Some(created.clone()), "me", at(7));
        assert_eq!(renewed.acquire_time, created.acquire_time);
        assert_eq!(renewed.lease_transitions, Some(0));
        assert_eq!(renewed.renew_time.as_ref().unwrap().0.as_second(), at(7).timestamp());

        let taken = held(Some(renewed), "next", at(20));
        assert_eq!(taken.holder_identity.as_deref(), Some("next"));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.acquire_time.unwrap().0.as_second(), at(20).timestamp());
    }

    #[test]
    fn identities_differ_per_process_even_on_one_host() {
        assert_ne!(identity(), identity());
    }
}
