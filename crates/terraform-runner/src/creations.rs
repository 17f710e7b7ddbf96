//! What the runs of a runtime created, recorded as each resource is created: the deprovisioning's sweep deletes
//! only what a run recorded here (see [`crate::leftovers`]), so a resource that someone else tagged with the
//! runtime's id is named, never deleted. The record is an object of the state bucket beside the state, whose trust
//! it shares (only the runner writes there, with the run's credential; no role a cluster's nodes hold reaches the
//! bucket), and it goes with the bucket once nothing of the runtime is left.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::cloud_session::CloudSession;
use crate::diagnostics::Created;
use crate::terraform::RecordCreation;
use crate::{Error, Result};

/// Everything the runs of one runtime recorded creating.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Creations {
    created: BTreeSet<Created>,
}

impl Creations {
    /// Whether a run created the resource of `resource_type` with `id`.
    pub(crate) fn holds(&self, resource_type: &str, id: &str) -> bool {
        self.created.iter().any(|created| created.resource_type == resource_type && created.id == id)
    }

    /// Whether a run created a resource with `id`, of whatever type: for the kinds the runner never deletes, where
    /// the answer only decides how a leftover is named.
    pub(crate) fn holds_id(&self, id: &str) -> bool {
        self.created.iter().any(|created| created.id == id)
    }

    /// Adds `created`; whether it was new.
    fn add(&mut self, created: Created) -> bool {
        self.created.insert(created)
    }

    /// The record as `object` of the state bucket holds it: empty when there is none (no run created anything, or
    /// every run predates the record); an object that is not a record fails the run rather than sweep nothing.
    pub(crate) async fn read(session: &CloudSession, bucket: &str) -> Result<Creations> {
        let object = session.state_objects().creations;
        match session.read_json_object(bucket, object).await? {
            None => Ok(Creations::default()),
            Some(record) => serde_json::from_value(record).map_err(|error| {
                Error::Input(format!("the record of what runs created ({object}) is unreadable: {error}"))
            }),
        }
    }
}

/// Records, during one run, each resource its applies create, as Terraform reports it created: the whole record
/// is written again at once, so it is durable before the run goes on. A failed write is tried again with the next
/// creation and at [`Recorder::save`], which the run waits for before anything else.
pub(crate) struct Recorder<'a> {
    session: &'a CloudSession,
    bucket: &'a str,
    creations: Mutex<Creations>,
    unsaved: AtomicBool,
}

impl<'a> Recorder<'a> {
    /// A recorder that adds to what earlier runs recorded in `bucket`.
    pub(crate) async fn open(session: &'a CloudSession, bucket: &'a str) -> Result<Recorder<'a>> {
        let creations = Creations::read(session, bucket).await?;
        Ok(Recorder { session, bucket, creations: Mutex::new(creations), unsaved: AtomicBool::new(false) })
    }

    /// Adds `created` and writes the record; a failed write is logged and tried again later.
    async fn record(&self, created: Created) {
        tracing::debug!(resource_type = created.resource_type, id = created.id, "recording a created resource");
        let new = self.creations.lock().expect("creations lock").add(created);
        if new || self.unsaved.load(Ordering::Relaxed) {
            self.unsaved.store(true, Ordering::Relaxed);
            if let Err(error) = self.write().await {
                tracing::warn!(%error, "recording a created resource failed; tried again with the next one");
            }
        }
    }

    /// Writes what is not written yet.
    pub(crate) async fn save(&self) -> Result<()> {
        if self.unsaved.load(Ordering::Relaxed) { self.write().await } else { Ok(()) }
    }

    /// What the runs of the runtime created, this one's included.
    pub(crate) fn creations(&self) -> Creations {
        self.creations.lock().expect("creations lock").clone()
    }

    async fn write(&self) -> Result<()> {
        let record = serde_json::to_value(self.creations()).expect("a record serialises");
        self.session.write_json_object(self.bucket, self.session.state_objects().creations, &record).await?;
        self.unsaved.store(false, Ordering::Relaxed);
        Ok(())
    }
}

impl RecordCreation for Recorder<'_> {
    fn record<'a>(&'a self, created: Created) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(Recorder::record(self, created))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(resource_type: &str, id: &str) -> Created {
        Created { resource_type: resource_type.into(), id: id.into(), address: format!("{resource_type}.this") }
    }

    #[test]
    fn a_resource_is_held_by_its_type_and_id_and_its_record_reads_back() {
        let mut creations = Creations::default();
        assert!(creations.add(created("aws_eks_cluster", "prod")));
        assert!(!creations.add(created("aws_eks_cluster", "prod")), "recorded once");
        assert!(creations.add(created("aws_vpc", "vpc-0a1b")));
        assert!(creations.holds("aws_eks_cluster", "prod"));
        assert!(!creations.holds("aws_iam_role", "prod"), "a name of another type is not the cluster");
        assert!(creations.holds_id("prod") && !creations.holds_id("vpc-0c2d"));
        let record = serde_json::to_value(&creations).unwrap();
        assert_eq!(
            record["created"][0],
            serde_json::json!({"type": "aws_eks_cluster", "id": "prod", "address": "aws_eks_cluster.this"})
        );
        assert_eq!(serde_json::from_value::<Creations>(record).unwrap(), creations);
    }
}
