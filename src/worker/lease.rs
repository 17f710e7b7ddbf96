//! The lease keeper: one loop per process that renews the leases of all its runs in one statement per tick and
//! hears of cancel requests in the same answer, so that following a thousand runs costs the database what following
//! one does.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::following::Following;
use super::{LEASE_TICK, STORE_TIMEOUT, Worker, store_calls};
use crate::telemetry::Dependency;
use crate::worker::cluster::RunCluster;

impl<C: RunCluster> Worker<C> {
    /// Until `stop`: every [`LEASE_TICK`] (or a third of the lease, when shorter) renews every lease `following`
    /// holds. A run whose claim was superseded, or whose lease may have expired because the database did not answer
    /// in time, hears that it lost it (it must stop: another worker may take the operation now); a run somebody
    /// cancelled hears who did.
    pub(super) async fn keep_leases(&self, following: &Following, mut stop: watch::Receiver<bool>) {
        let lease = self.settings.lease;
        let interval = (lease / 3).min(LEASE_TICK);
        let mut next = Instant::now() + interval;
        loop {
            let wake = following.earliest_expiry().map_or(next, |expiry| expiry.min(next));
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
            let started = Instant::now();
            following.expire(started);
            if started < next {
                // Woken for an expiry only.
                continue;
            }
            let claims = following.claims();
            if claims.is_empty() {
                next = started + interval;
                continue;
            }
            let budget =
                following.earliest_expiry().map_or(STORE_TIMEOUT, |expiry| STORE_TIMEOUT.min(expiry - started));
            next = match tokio::time::timeout(budget, self.store.renew_leases(&claims, lease)).await {
                Ok(Ok(renewed)) => {
                    Dependency::Database.answered();
                    following.renewed(&claims, &renewed, started + lease);
                    started + interval
                }
                // A slow or failing database: try again soon, while the leases still hold.
                failed => {
                    match failed {
                        Ok(Err(error)) => store_calls::failed(Some(&error), "renewing the leases"),
                        _ => store_calls::failed(None, "renewing the leases"),
                    }
                    Instant::now() + (lease / 10).min(Duration::from_secs(1))
                }
            };
        }
    }
}
