//! Renewing a vanilla control plane's certificates on request: a run (Job `renewal-<runtime>`) that plans as any
//! run and has kubeadm renew the certificates on each control-plane node, one after the other; node 0 publishes
//! the renewed admin kubeconfig, from which the next kubeconfig a reader gets is minted. EKS and GKE renew their
//! control planes' certificates themselves.

use tracing::instrument;

use super::changes::{check_provisioned, repeated};
use super::idempotency::fingerprint;
use super::{Conflict, Error, Requested, Result, Service};
use crate::domain::{OperationType, RuntimeId, Topology};

impl Service {
    /// Queues the renewal of a provisioned, awake vanilla runtime's control-plane certificates. A repeated
    /// request gets the renewal that is queued or running.
    #[instrument(skip_all, fields(runtime_id = %runtime_id))]
    pub async fn renew_certificates(
        &self,
        runtime_id: RuntimeId,
        requested_by: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Requested> {
        let status = self.latest_to_change(runtime_id).await?;
        let request = (OperationType::RenewCertificates.as_str(), runtime_id.0);
        let (keyed, earlier) = self.keyed(requested_by, idempotency_key, fingerprint(&request)).await?;
        if let Some(operation) = earlier {
            return Ok(Requested::Replayed(operation));
        }
        if let Some(running) = repeated(&status, OperationType::RenewCertificates, false) {
            return Ok(running);
        }
        let runtime = &status.runtime;
        let topology = runtime.cluster_config.topology;
        if topology != Topology::VanillaKubeadm {
            return Err(Error::Conflict {
                conflict: Conflict::ManagedByTheCloud,
                message: format!(
                    "runtime {}'s control plane is managed by the cloud ({}), which renews its certificates itself",
                    runtime.id,
                    topology.as_str()
                ),
            });
        }
        self.check_changeable(&status).await?;
        if runtime.hibernated {
            return Err(Error::Conflict {
                conflict: Conflict::Hibernated,
                message: format!(
                    "runtime {} is hibernated: its control plane is stopped; wake it up first",
                    runtime.id
                ),
            });
        }
        check_provisioned(&status, "renew the certificates of")?;
        self.queue_run(&status, OperationType::RenewCertificates, requested_by, keyed.as_ref()).await
    }
}
