//! The operations this process is running: its claims skip them, and its one lease keeper renews all their leases
//! together (see `lease.rs`), telling each run when it lost its lease or was cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use crate::store::{Claim, RenewedLease};

/// One run's claim as the keeper sees it.
struct Held {
    token: Uuid,
    /// Until when the lease surely holds, by this process's clock.
    valid_until: Instant,
    /// Raised once the lease is lost; the run then stops.
    lost: watch::Sender<bool>,
    /// Who cancelled the operation, once somebody did.
    cancelled: watch::Sender<Option<String>>,
}

/// The runs of this process, so that it never claims one of them a second time (after an outage let their leases
/// expire) and renews their leases in one statement; an entry leaves when its run's future ends, however it ends.
#[derive(Default)]
pub(super) struct Following(Mutex<HashMap<Uuid, Held>>);

impl Following {
    fn runs(&self) -> MutexGuard<'_, HashMap<Uuid, Held>> {
        self.0.lock().expect("never poisoned: no code panics while holding it")
    }

    pub(super) fn ids(&self) -> Vec<Uuid> {
        self.runs().keys().copied().collect()
    }

    /// Follows a claimed run whose lease holds until `valid_until`.
    pub(super) fn follow(self: &Arc<Self>, claim: &Claim, valid_until: Instant) -> Followed {
        let (lost, lease_lost) = watch::channel(false);
        let (cancelled, cancel_requests) = watch::channel(claim.operation.cancel_requested_by.clone());
        let held = Held { token: claim.token, valid_until, lost, cancelled };
        self.runs().insert(claim.operation.id, held);
        Followed { following: self.clone(), id: claim.operation.id, lease_lost, cancel_requests }
    }

    /// The claims to renew (operation id, token): those whose lease has not been lost.
    pub(super) fn claims(&self) -> Vec<(Uuid, Uuid)> {
        let runs = self.runs();
        runs.iter().filter(|(_, held)| !*held.lost.borrow()).map(|(id, held)| (*id, held.token)).collect()
    }

    /// When the first lease still held runs out.
    pub(super) fn earliest_expiry(&self) -> Option<Instant> {
        self.runs().values().filter(|held| !*held.lost.borrow()).map(|held| held.valid_until).min()
    }

    /// Tells every run whose lease ran out by `now` that it lost it.
    pub(super) fn expire(&self, now: Instant) {
        for (id, held) in self.runs().iter().filter(|(_, held)| held.valid_until <= now) {
            if !held.lost.send_replace(true) {
                super::store_calls::warn_unless_database_away!(
                    operation_id = %id,
                    "the lease could not be renewed before it expired; stopping this run"
                );
            }
        }
    }

    /// The answer to a renewal of `sent`: each renewed run holds its lease until `valid_until` and learns of a
    /// cancel request; any other run sent lost its claim.
    pub(super) fn renewed(&self, sent: &[(Uuid, Uuid)], renewed: &[RenewedLease], valid_until: Instant) {
        let renewed: HashMap<Uuid, &Option<String>> =
            renewed.iter().map(|lease| (lease.operation_id, &lease.cancel_requested_by)).collect();
        let mut runs = self.runs();
        for (id, token) in sent {
            // A run that ended meanwhile, or was claimed again, is not this renewal's to judge.
            let Some(held) = runs.get_mut(id).filter(|held| held.token == *token) else { continue };
            match renewed.get(id) {
                Some(cancel_requested_by) => {
                    held.valid_until = valid_until;
                    if let Some(caller) = cancel_requested_by {
                        held.cancelled.send_if_modified(|current| {
                            let first = current.is_none();
                            current.get_or_insert_with(|| caller.clone());
                            first
                        });
                    }
                }
                // Superseded, or finished by this run a moment ago: the step loop tells which when it looks.
                None => {
                    held.lost.send_replace(true);
                }
            }
        }
    }
}

/// A followed run: it leaves [`Following`] when dropped, and hears of a lost lease and of a cancel request.
pub(super) struct Followed {
    following: Arc<Following>,
    id: Uuid,
    pub(super) lease_lost: watch::Receiver<bool>,
    pub(super) cancel_requests: watch::Receiver<Option<String>>,
}

impl Drop for Followed {
    fn drop(&mut self) {
        if let Ok(mut runs) = self.following.0.lock() {
            runs.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::{Cloud, Operation, OperationType, ProviderVersion};

    fn claim() -> Claim {
        let provider = ProviderVersion::pinned(Cloud::Aws);
        let operation = Operation::queued(Uuid::now_v7(), OperationType::Provision, provider, chrono::Utc::now());
        Claim { operation, token: Uuid::now_v7() }
    }

    #[tokio::test]
    async fn one_renewal_keeps_the_current_claims_and_tells_the_others_and_the_cancelled() {
        let following = Arc::new(Following::default());
        let now = Instant::now();
        let (kept, superseded, cancelled) = (claim(), claim(), claim());
        let runs: Vec<Followed> =
            [&kept, &superseded, &cancelled].iter().map(|claim| following.follow(claim, now)).collect();
        let sent = following.claims();
        assert_eq!(sent.len(), 3);
        let renewed = [
            RenewedLease { operation_id: kept.operation.id, cancel_requested_by: None },
            RenewedLease { operation_id: cancelled.operation.id, cancel_requested_by: Some("alice".into()) },
        ];
        let later = now + Duration::from_secs(30);
        following.renewed(&sent, &renewed, later);

        assert_eq!(runs.iter().map(|run| *run.lease_lost.borrow()).collect::<Vec<_>>(), [false, true, false]);
        assert_eq!(*runs[2].cancel_requests.borrow(), Some("alice".to_owned()));
        assert_eq!(*runs[0].cancel_requests.borrow(), None);
        // The lost claim is not renewed again; the others now hold until `later`.
        let mut left: Vec<Uuid> = following.claims().into_iter().map(|(id, _)| id).collect();
        left.sort();
        let mut expected = vec![kept.operation.id, cancelled.operation.id];
        expected.sort();
        assert_eq!(left, expected);
        assert_eq!(following.earliest_expiry(), Some(later));
        // A later renewal naming another caller keeps the first.
        let again = [RenewedLease { operation_id: cancelled.operation.id, cancel_requested_by: Some("bob".into()) }];
        following.renewed(&following.claims(), &again, later);
        assert_eq!(*runs[2].cancel_requests.borrow(), Some("alice".to_owned()));
    }

    #[tokio::test]
    async fn a_lease_not_renewed_in_time_is_lost_and_a_run_that_ended_leaves() {
        let following = Arc::new(Following::default());
        let now = Instant::now();
        let (expiring, holding) = (claim(), claim());
        let expiring_run = following.follow(&expiring, now + Duration::from_secs(1));
        let holding_run = following.follow(&holding, now + Duration::from_secs(60));
        following.expire(now + Duration::from_secs(2));
        assert!(*expiring_run.lease_lost.borrow());
        assert!(!*holding_run.lease_lost.borrow());
        assert_eq!(following.claims(), [(holding.operation.id, holding.token)]);
        // Still followed (claims skip it) until its run ends.
        assert_eq!(following.ids().len(), 2);
        drop(expiring_run);
        assert_eq!(following.ids(), [holding.operation.id]);
    }
}
