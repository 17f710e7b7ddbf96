//! The periodic clean-up of kept run logs: what was archived longer ago than `APP_RUN_LOG_RETENTION` goes.

use std::time::Duration;

use tokio::sync::watch;

use crate::store::{self, Store};

/// How long one clean-up may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Deletes kept run logs past their retention, a few times per retention period (at most hourly).
pub struct RunLogRetention {
    pub store: Store,
    pub retention: Duration,
}

impl RunLogRetention {
    /// Cleans up now and then every interval until `stopped` turns true. A failed clean-up loses nothing: it is
    /// logged and the next round deletes what it left.
    pub async fn run(self, mut stopped: watch::Receiver<bool>) -> Result<(), String> {
        let interval = (self.retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(60 * 60));
        let age = chrono::Duration::from_std(self.retention).map_err(|_| "the retention is out of range".to_owned())?;
        loop {
            if let Some(cutoff) = store::now().checked_sub_signed(age) {
                match tokio::time::timeout(CLEANUP_TIMEOUT, self.store.delete_run_logs_archived_before(cutoff)).await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(deleted)) => tracing::info!(deleted, %cutoff, "deleted run logs past their retention"),
                    Ok(Err(error)) => tracing::warn!(%error, "could not delete run logs past their retention"),
                    Err(_) => tracing::warn!("deleting run logs past their retention timed out"),
                }
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                _ = stopped.wait_for(|stop| *stop) => return Ok(()),
            }
        }
    }
}
