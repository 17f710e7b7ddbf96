//! What runs beside a run's steps: the heartbeat that keeps its lease, and the look-out for a cancel request.

use std::convert::Infallible;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{CANCEL_POLL, STORE_TIMEOUT, Worker};
use crate::store::Claim;
use crate::worker::cluster::RunCluster;

impl<C: RunCluster> Worker<C> {
    /// Extends the lease every third of its length. When the claim is superseded, or the lease may have expired
    /// because the database did not answer in time, it raises `lost` (the run must stop: another worker may take
    /// the operation now) and then waits forever.
    pub(super) async fn heartbeat(
        &self,
        claim: &Claim,
        mut valid_until: Instant,
        lost: watch::Sender<bool>,
    ) -> Infallible {
        let lease = self.settings.lease;
        let mut next = Instant::now() + lease / 3;
        loop {
            tokio::time::sleep_until(next.min(valid_until)).await;
            let started = Instant::now();
            if started >= valid_until {
                tracing::warn!("the lease could not be renewed before it expired; stopping this run");
                break;
            }
            let extend = self.store.extend_lease(claim.operation.id, claim.token, lease);
            next = match tokio::time::timeout(STORE_TIMEOUT.min(valid_until - started), extend).await {
                Ok(Ok(true)) => {
                    valid_until = started + lease;
                    started + lease / 3
                }
                // Superseded, or finished by this run a moment ago: the step loop tells which when it looks.
                Ok(Ok(false)) => break,
                // A slow or failing database: try again soon, while the lease still holds.
                failed => {
                    match failed {
                        Ok(Err(error)) => tracing::warn!(%error, "could not extend the lease"),
                        _ => tracing::warn!("extending the lease timed out"),
                    }
                    Instant::now() + (lease / 10).min(Duration::from_secs(1))
                }
            };
        }
        let _ = lost.send(true);
        std::future::pending().await
    }

    /// Looks every [`CANCEL_POLL`] whether a caller cancelled the operation, and says who once somebody did
    /// (then waits forever). A failed look is only logged: the next one may succeed.
    pub(super) async fn watch_for_cancel(&self, claim: &Claim, requests: watch::Sender<Option<String>>) -> Infallible {
        if requests.borrow().is_none() {
            loop {
                tokio::time::sleep(CANCEL_POLL).await;
                match tokio::time::timeout(STORE_TIMEOUT, self.store.cancel_requested_by(claim.operation.id)).await {
                    Ok(Ok(Some(caller))) => {
                        let _ = requests.send(Some(caller));
                        break;
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(error)) => tracing::debug!(%error, "could not look for a cancel request"),
                    Err(_) => tracing::debug!("looking for a cancel request timed out"),
                }
            }
        }
        std::future::pending().await
    }
}
