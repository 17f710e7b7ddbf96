//! The certificate watch: a few runtimes per minute, each replica on its own jittered beat, the runtime read
//! longest ago first, so that a fleet is read in turn and never all at once.

use std::time::Duration;

use tokio::sync::watch;

use crate::backoff::jittered;
use crate::service::{self, Service};
use crate::telemetry::Metrics;

/// One read: the store calls, the TLS handshake and the Kubernetes read of the kubeconfig together.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// `APP_CERTIFICATE_READS_PER_MINUTE` and `APP_CERTIFICATE_REREAD_AFTER`.
#[derive(Debug, Clone, Copy)]
pub struct CertificateWatchSettings {
    pub reads_per_minute: u32,
    pub reread_after: Duration,
}

pub struct CertificateWatch {
    pub service: Service,
    pub metrics: Metrics,
    pub settings: CertificateWatchSettings,
}

impl CertificateWatch {
    /// Reads one runtime's certificates per beat until `stopped` turns true. A failed read loses nothing: the
    /// runtime keeps its last reading and comes round again.
    pub async fn run(self, mut stopped: watch::Receiver<bool>) -> Result<(), String> {
        let beat = Duration::from_secs(60) / self.settings.reads_per_minute.max(1);
        loop {
            let read = self.service.read_next_certificates(self.settings.reread_after);
            match tokio::time::timeout(READ_TIMEOUT, read).await {
                Ok(Ok(Some((_, outcome)))) => self.metrics.certificates().read(outcome),
                Ok(Ok(None)) => {}
                // An outage is told once, as it begins (telemetry::Dependency).
                Ok(Err(service::Error::Unavailable { .. })) => {}
                Ok(Err(error)) => tracing::warn!(%error, "the certificate watch could not take a runtime"),
                Err(_) => tracing::warn!(timeout = ?READ_TIMEOUT, "a read of a runtime's certificates took too long"),
            }
            tokio::select! {
                () = tokio::time::sleep(jittered(beat)) => {}
                _ = stopped.wait_for(|stop| *stop) => return Ok(()),
            }
        }
    }
}
