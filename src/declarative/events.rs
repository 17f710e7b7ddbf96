//! Events on a Runtime (`kubectl describe runtime`, `kubectl get events`): the operations the reconciler queued,
//! what it refused and why, and the deprovisioning that let the object go. Published with kube's recorder, which
//! turns repeats into a series; a failure to publish is logged, never a failure of the reconcile.

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::resource::{FIELD_MANAGER, RuntimeResource, RuntimeResourceStatus};
use super::status::{RECONCILED, Refusal};
use crate::domain::Operation;

pub struct RuntimeEvents {
    recorder: Recorder,
}

impl RuntimeEvents {
    /// Events reported as the provisioner, by this process (`instance`).
    pub fn new(client: kube::Client, instance: String) -> Self {
        let reporter = Reporter { controller: FIELD_MANAGER.to_owned(), instance: Some(instance) };
        RuntimeEvents { recorder: Recorder::new(client, reporter) }
    }

    /// An operation queued for the object (`ProvisionQueued`, `UpgradeQueued`, ...).
    pub async fn queued(&self, object: &RuntimeResource, operation: &Operation) {
        let kind = operation.operation_type.as_str();
        let note = format!("operation {} queued", operation.id);
        self.publish(object, EventType::Normal, &format!("{kind}Queued"), note, kind).await;
    }

    /// A refusal, once: when the object's `Reconciled` condition did not already say it (`before`).
    pub async fn refused(&self, object: &RuntimeResource, refusal: &Refusal, before: Option<&RuntimeResourceStatus>) {
        let said = before
            .into_iter()
            .flat_map(|status| &status.conditions)
            .any(|condition| condition.condition_type == RECONCILED && condition.reason == refusal.reason);
        if !said {
            let note = refusal.message.clone();
            self.publish(object, EventType::Warning, &refusal.reason, note, "Reconcile").await;
        }
    }

    /// The runtime is deprovisioned: the finalizer goes, and the object with it.
    pub async fn deprovisioned(&self, object: &RuntimeResource) {
        let note = "the runtime is deprovisioned; the object goes".to_owned();
        self.publish(object, EventType::Normal, "Deprovisioned", note, "Deprovision").await;
    }

    async fn publish(&self, object: &RuntimeResource, type_: EventType, reason: &str, note: String, action: &str) {
        let event =
            Event { type_, reason: reason.to_owned(), note: Some(note), action: action.to_owned(), secondary: None };
        if let Err(error) = self.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::warn!(%error, reason, "an event of the Runtime was not published");
        }
    }
}
