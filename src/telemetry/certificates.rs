//! The certificate watch's metrics: until when each watched certificate of each live runtime is valid (from the
//! store, so every replica shows the whole fleet, refreshed at most once a minute since readings change slowly),
//! and the reads by outcome.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use uuid::Uuid;

use crate::domain::certificates::ObservedCertificates;

/// How long the expiry gauges stay as they are before a scrape reads the store again.
const REFRESH_AFTER: Duration = Duration::from_secs(60);

/// What became of one turn of the watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateRead {
    /// The certificates were read and recorded.
    Read,
    /// The runtime has no cluster to read (not yet provisioned, or its outputs are not served).
    NoCluster,
    /// The cluster could not be reached, or presented what its CA did not sign.
    Failed,
}

impl CertificateRead {
    const ALL: [CertificateRead; 3] = [CertificateRead::Read, CertificateRead::NoCluster, CertificateRead::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            CertificateRead::Read => "read",
            CertificateRead::NoCluster => "no_cluster",
            CertificateRead::Failed => "failed",
        }
    }
}

/// The runtime is the provisioner's own id (never caller input); the certificate one of a closed set.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExpiryLabels {
    runtime: String,
    certificate: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Default)]
pub struct CertificateMetrics {
    expiry: Family<ExpiryLabels, Gauge>,
    reads: Family<OutcomeLabels, Counter>,
    refreshed: Mutex<Option<Instant>>,
}

impl CertificateMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "runtime_certificate_expiry_seconds",
            "When each watched certificate of each live runtime expires, in seconds since the epoch (as last read)",
            self.expiry.clone(),
        );
        for outcome in CertificateRead::ALL {
            drop(self.reads.get_or_create(&OutcomeLabels { outcome: outcome.as_str() }));
        }
        registry.register("certificate_reads", "Reads of runtimes' certificates, by outcome", self.reads.clone());
    }

    pub fn read(&self, outcome: CertificateRead) {
        self.reads.get_or_create(&OutcomeLabels { outcome: outcome.as_str() }).inc();
    }

    /// Whether the expiry gauges are due for a refresh from the store; when they are, the next caller refreshes
    /// them (others keep the gauges they have meanwhile).
    pub fn refresh_due(&self) -> bool {
        let mut refreshed = self.refreshed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = refreshed.is_none_or(|at| at.elapsed() >= REFRESH_AFTER);
        if due {
            *refreshed = Some(Instant::now());
        }
        due
    }

    /// Replaces the expiry gauges with `readings` (a deprovisioned runtime's series go).
    pub fn set_expiries(&self, readings: &[(Uuid, ObservedCertificates)]) {
        self.expiry.clear();
        for (runtime_id, observed) in readings {
            for expiry in &observed.expiries {
                let labels = ExpiryLabels { runtime: runtime_id.to_string(), certificate: expiry.certificate.as_str() };
                self.expiry.get_or_create(&labels).set(expiry.not_after.timestamp());
            }
        }
    }
}
