//! The audit entries of one test's app, kept in memory (and logged as in production), so a test reads its own
//! entries whatever other tests of the binary log at the same moment.

use std::sync::{Arc, Mutex};

use provisioner::api::audit::{AuditEntry, AuditSink, AuditTrail};

/// Every entry the app wrote, in order.
#[derive(Clone, Default)]
pub struct KeptAudit(Arc<Mutex<Vec<AuditEntry>>>);

struct KeepingSink {
    kept: KeptAudit,
    log: AuditTrail,
}

impl AuditSink for KeepingSink {
    fn record(&self, entry: &AuditEntry) {
        self.kept.0.lock().unwrap().push(entry.clone());
        self.log.record(entry);
    }
}

impl KeptAudit {
    /// The trail to build an app with.
    pub fn trail(&self) -> AuditTrail {
        AuditTrail::to_sink(Arc::new(KeepingSink { kept: self.clone(), log: AuditTrail::log() }))
    }

    pub fn entries(&self) -> Vec<AuditEntry> {
        self.0.lock().unwrap().clone()
    }
}
