//! Certificates watched: one turn of the watch reads the certificates of the live runtime due for a read
//! longest ago (with the admin kubeconfig its apply published, which never leaves the provisioner) and records
//! until when each is valid; the runtime's `CertificatesExpiring` condition and
//! `provisioner_runtime_certificate_expiry_seconds` show it.

use std::time::Duration;

use super::{Conflict, Error, Result, Service};
use crate::domain::RuntimeId;
use crate::domain::certificates::ObservedCertificates;
use crate::runtime_access::read_certificates;
use crate::store;
use crate::telemetry::CertificateRead;

/// How many runtimes due for a read one turn looks at to find one no other replica took meanwhile.
const CANDIDATES: u64 = 4;
/// When a runtime had no cluster to read or its cluster could not be read, it is due again after this (or after
/// the reread interval, when that is shorter): a provisioning that just ended is read soon after.
const RETRY_AFTER: Duration = Duration::from_secs(5 * 60);

impl Service {
    /// Reads the certificates of the live runtime due longest ago; due again after `reread_after`. `None` when no
    /// runtime is due.
    pub async fn read_next_certificates(&self, reread_after: Duration) -> Result<Option<(RuntimeId, CertificateRead)>> {
        let now = store::now();
        let after = |period: Duration| {
            let period = chrono::TimeDelta::from_std(period).unwrap_or(chrono::TimeDelta::MAX);
            now.checked_add_signed(period).unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
        };
        for due in self.store.due_for_certificate_read(now, CANDIDATES).await? {
            if self.store.take_for_certificate_read(due, after(reread_after)).await? {
                let runtime_id = RuntimeId(due.runtime_id);
                let outcome = self.read_certificates_of(runtime_id).await?;
                if outcome != CertificateRead::Read {
                    self.store.certificates_due(runtime_id.0, after(reread_after.min(RETRY_AFTER))).await?;
                }
                return Ok(Some((runtime_id, outcome)));
            }
        }
        Ok(None)
    }

    #[tracing::instrument(skip_all, fields(runtime_id = %runtime_id))]
    async fn read_certificates_of(&self, runtime_id: RuntimeId) -> Result<CertificateRead> {
        let kubeconfig = match self.published_kubeconfig(runtime_id).await {
            Ok(kubeconfig) => kubeconfig,
            Err(Error::Conflict { conflict: Conflict::NotReady | Conflict::UntrustedOutputs, .. }) => {
                return Ok(CertificateRead::NoCluster);
            }
            Err(error) => return Err(error),
        };
        match read_certificates(&kubeconfig, store::now()).await {
            Ok(observed) => {
                self.store.record_certificates(runtime_id.0, &observed).await?;
                tracing::debug!(soonest = ?observed.expiries.first(), "certificates read");
                Ok(CertificateRead::Read)
            }
            Err(error) => {
                tracing::warn!(%error, "the cluster's certificates could not be read; the last reading stays");
                Ok(CertificateRead::Failed)
            }
        }
    }

    /// The last reading of every live runtime whose certificates were read (for the metrics).
    pub async fn observed_certificates(&self) -> Result<Vec<(uuid::Uuid, ObservedCertificates)>> {
        Ok(self.store.observed_certificates().await?)
    }
}
