//! The periodic clean-up of what is kept for a while: run logs archived longer ago than `APP_RUN_LOG_RETENTION`
//! and idempotency records older than `APP_IDEMPOTENCY_KEY_TTL`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::store::{self, Store};

/// How long one clean-up may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long what is kept for a while stays.
#[derive(Debug, Clone, Copy)]
pub struct RetentionPeriods {
    /// `APP_RUN_LOG_RETENTION`.
    pub run_logs: Duration,
    /// `APP_IDEMPOTENCY_KEY_TTL`.
    pub idempotency_records: Duration,
}

/// Deletes what is past its time, a few times per the shorter period (at most hourly).
pub struct Retention {
    pub store: Store,
    pub periods: RetentionPeriods,
}

impl Retention {
    /// Cleans up now and then every interval until `stopped` turns true. A failed clean-up loses nothing: it is
    /// logged and the next round deletes what it left.
    pub async fn run(self, mut stopped: watch::Receiver<bool>) -> Result<(), String> {
        let RetentionPeriods { run_logs, idempotency_records } = self.periods;
        let shorter = run_logs.min(idempotency_records);
        let interval = (shorter / 4).clamp(Duration::from_secs(1), Duration::from_secs(60 * 60));
        loop {
            if let Some(cutoff) = cutoff(run_logs) {
                let deleted = self.store.delete_run_logs_archived_before(cutoff);
                report("run logs", cutoff, tokio::time::timeout(CLEANUP_TIMEOUT, deleted).await);
            }
            if let Some(cutoff) = cutoff(idempotency_records) {
                let deleted = self.store.delete_idempotency_records_before(cutoff);
                report("idempotency records", cutoff, tokio::time::timeout(CLEANUP_TIMEOUT, deleted).await);
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                _ = stopped.wait_for(|stop| *stop) => return Ok(()),
            }
        }
    }
}

/// Now minus `age`; `None` when that is before the representable time (nothing is that old).
fn cutoff(age: Duration) -> Option<DateTime<Utc>> {
    store::now().checked_sub_signed(chrono::TimeDelta::from_std(age).ok()?)
}

fn report(what: &str, cutoff: DateTime<Utc>, outcome: Result<store::Result<u64>, tokio::time::error::Elapsed>) {
    match outcome {
        Ok(Ok(0)) => {}
        Ok(Ok(deleted)) => tracing::info!(deleted, %cutoff, "deleted {what} past their retention"),
        Ok(Err(error)) => tracing::warn!(%error, "could not delete {what} past their retention"),
        Err(_) => tracing::warn!("deleting {what} past their retention timed out"),
    }
}
