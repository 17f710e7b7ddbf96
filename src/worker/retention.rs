//! The periodic clean-up of what is kept for a while: run logs archived longer ago than `APP_RUN_LOG_RETENTION`,
//! idempotency records older than `APP_IDEMPOTENCY_KEY_TTL`, and plans that waited for approval longer than
//! `APP_PLAN_APPROVAL_TTL` (their operations fail, so that they stop holding their runtimes).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::domain::LastError;
use crate::store::{self, Store};
use crate::telemetry::Dependency;

/// How long one clean-up may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long what is kept for a while stays.
#[derive(Debug, Clone, Copy)]
pub struct RetentionPeriods {
    /// `APP_RUN_LOG_RETENTION`.
    pub run_logs: Duration,
    /// `APP_IDEMPOTENCY_KEY_TTL`.
    pub idempotency_records: Duration,
    /// `APP_PLAN_APPROVAL_TTL`.
    pub plan_approvals: Duration,
}

/// How many expired approvals one round ends.
const EXPIRY_BATCH: u64 = 100;

/// Deletes what is past its time, a few times per the shortest period (at most hourly).
pub struct Retention {
    pub store: Store,
    pub periods: RetentionPeriods,
}

impl Retention {
    /// Cleans up now and then every interval until `stopped` turns true. A failed clean-up loses nothing: it is
    /// logged and the next round deletes what it left.
    pub async fn run(self, mut stopped: watch::Receiver<bool>) -> Result<(), String> {
        let RetentionPeriods { run_logs, idempotency_records, plan_approvals } = self.periods;
        let shortest = run_logs.min(idempotency_records).min(plan_approvals);
        let interval = (shortest / 4).clamp(Duration::from_secs(1), Duration::from_secs(60 * 60));
        loop {
            let expired = self.end_expired_approvals();
            report(
                "ended the operations of plans waiting",
                store::now(),
                tokio::time::timeout(CLEANUP_TIMEOUT, expired).await,
            );
            if let Some(cutoff) = cutoff(run_logs) {
                let deleted = self.store.delete_run_logs_archived_before(cutoff);
                report("deleted run logs archived", cutoff, tokio::time::timeout(CLEANUP_TIMEOUT, deleted).await);
            }
            if let Some(cutoff) = cutoff(idempotency_records) {
                let deleted = self.store.delete_idempotency_records_before(cutoff);
                report(
                    "deleted idempotency records kept",
                    cutoff,
                    tokio::time::timeout(CLEANUP_TIMEOUT, deleted).await,
                );
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                _ = stopped.wait_for(|stop| *stop) => return Ok(()),
            }
        }
    }
}

impl Retention {
    /// Fails the operations whose plan waited past its approval time; returns how many.
    async fn end_expired_approvals(&self) -> store::Result<u64> {
        let mut ended = 0;
        for id in self.store.expired_approvals(store::now(), EXPIRY_BATCH).await? {
            ended += u64::from(self.store.end_waiting(id, &LastError::approval_expired()).await?);
        }
        Ok(ended)
    }
}

/// Now minus `age`; `None` when that is before the representable time (nothing is that old).
fn cutoff(age: Duration) -> Option<DateTime<Utc>> {
    store::now().checked_sub_signed(chrono::TimeDelta::from_std(age).ok()?)
}

/// `what`: what a round does, such as "deleted run logs archived" (before `cutoff`).
fn report(what: &str, cutoff: DateTime<Utc>, outcome: Result<store::Result<u64>, tokio::time::error::Elapsed>) {
    match outcome {
        Ok(Ok(count)) => {
            Dependency::Database.answered();
            if count > 0 {
                tracing::info!(count, %cutoff, "{what} before the cutoff");
            }
        }
        Ok(Err(error)) => super::store_calls::failed(Some(&error), &format!("the clean-up ({what})")),
        Err(_) => super::store_calls::failed(None, &format!("the clean-up ({what})")),
    }
}
