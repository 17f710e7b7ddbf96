//! The changes of a provisioned runtime: upgrade, hibernation, wake-up, deprovisioning and cancel, each queued
//! as an operation once the runtime's state allows it.

use tracing::instrument;

use super::deletion::deletion_refused;
use super::idempotency::{Keyed, fingerprint};
use super::{Conflict, Error, JOB_CACHE_SYNC, Latest, Result, Service, executor_error, operation_in_progress};
use crate::domain::approval::ApprovalPolicy;
use crate::domain::deletion::{self, DeletionRefusal};
use crate::domain::{
    FailureReason, Operation, OperationId, OperationType, ProviderVersion, Runtime, RuntimeId, UpgradeClusterInput,
};
use crate::store::{self, Cancel};

/// What a change request led to: a new operation, or, for a repeated request, the operation that already makes
/// the change or the last one once its target is reached (so a retry after a timeout is answered, not refused).
#[derive(Debug, Clone, PartialEq)]
pub enum Requested {
    /// Queued now (for a cancel: the operation, now ended or being stopped).
    Queued(Operation),
    /// The same change, already queued or running.
    Running(Operation),
    /// The target is reached and nothing runs: the runtime's last operation (for a cancel: the cancelled one).
    Done(Operation),
    /// A retry of a request with the same `Idempotency-Key`: the operation the first one queued.
    Replayed(Operation),
}

impl Requested {
    pub fn operation(&self) -> &Operation {
        match self {
            Requested::Queued(operation)
            | Requested::Running(operation)
            | Requested::Done(operation)
            | Requested::Replayed(operation) => operation,
        }
    }

    pub fn into_operation(self) -> Operation {
        match self {
            Requested::Queued(operation)
            | Requested::Running(operation)
            | Requested::Done(operation)
            | Requested::Replayed(operation) => operation,
        }
    }
}

/// The answer to a repeated request for `operation_type`: that change already active (not a dry run), or, when
/// nothing is active and the runtime is where the change would take it (`reached`), its last operation.
pub(super) fn repeated(status: &Latest, operation_type: OperationType, reached: bool) -> Option<Requested> {
    let last = &status.last_operation;
    if last.state.is_active() {
        let same = last.operation_type == operation_type && !last.dry_run;
        return same.then(|| Requested::Running(last.clone()));
    }
    reached.then(|| Requested::Done(last.clone()))
}

/// Neither deprovisioned nor a preview.
fn is_live(runtime: &Runtime) -> bool {
    runtime.deleted_at.is_none() && !runtime.preview
}

impl Service {
    /// Queues the teardown of a runtime. `confirm`, when sent (and always when the operator requires it), names
    /// the runtime. Refused while its deletion protection is on or another operation on it is active; a repeated
    /// request gets the deprovisioning that runs or ran. `force` marks it deleted without a run instead, only
    /// when its credential is gone (see [`Service::force_deprovisioning`]).
    #[instrument(skip_all, fields(runtime_id = %runtime_id, force))]
    pub async fn deprovision_runtime(
        &self,
        runtime_id: RuntimeId,
        confirm: Option<&str>,
        force: bool,
        requested_by: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Requested> {
        let status = self.latest_to_change(runtime_id).await?;
        let request = (OperationType::Deprovision.as_str(), runtime_id.0);
        // A plain request keeps the fingerprint it had before forcing existed.
        let fingerprint = if force { fingerprint(&(request, "force")) } else { fingerprint(&request) };
        let (keyed, earlier) = self.keyed(requested_by, idempotency_key, fingerprint).await?;
        if let Some(operation) = earlier {
            return Ok(Requested::Replayed(operation));
        }
        if force {
            return self.force_deprovisioning(runtime_id, status, confirm, requested_by, keyed.as_ref()).await;
        }
        let refused = |refusal| deletion_refused(runtime_id, refusal);
        self.deletion.check_confirmation(&status.runtime, confirm).map_err(refused)?;
        let deleted = status.runtime.deleted_at.is_some();
        if let Some(repeated) = repeated(&status, OperationType::Deprovision, deleted) {
            return Ok(repeated);
        }
        deletion::check_protection(&status.runtime).map_err(refused)?;
        self.check_changeable(&status).await?;
        // The provider that last wrote the cluster's state destroys it, whatever this release pins; a hibernated
        // cluster is destroyed as it is.
        self.queue_run(&status, OperationType::Deprovision, requested_by, keyed.as_ref()).await
    }

    /// Queues a change of a provisioned cluster: the configuration `upgrade` makes of the one last applied, checked
    /// as a provisioning is plus the upgrade's own rules. The runtime shows the new configuration only once the
    /// upgrade succeeded; a dry run only plans it. `approval_policy` holds for this run instead of the runtime's.
    #[instrument(skip_all, fields(runtime_id = %runtime_id, dry_run))]
    pub async fn upgrade_cluster(
        &self,
        runtime_id: RuntimeId,
        upgrade: UpgradeClusterInput,
        dry_run: bool,
        approval_policy: Option<ApprovalPolicy>,
        requested_by: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Requested> {
        let status = self.latest_to_change(runtime_id).await?;
        let request = (OperationType::Upgrade.as_str(), runtime_id.0, &upgrade, dry_run);
        // A request without a policy keeps the fingerprint it had before requests carried one.
        let fingerprint = match approval_policy {
            Some(policy) => fingerprint(&(request, policy.as_str())),
            None => fingerprint(&request),
        };
        let (keyed, earlier) = self.keyed(requested_by, idempotency_key, fingerprint).await?;
        if let Some(operation) = earlier {
            return Ok(Requested::Replayed(operation));
        }
        let runtime = &status.runtime;
        // Validation first: a bad request is answered the same whatever the runtime is doing.
        let target = self
            .policy
            .validate_upgrade(&runtime.cluster_config, &upgrade)?
            .ok_or_else(|| Error::NothingToChange { runtime_id: runtime.id.to_string() })?;
        self.check_changeable(&status).await?;
        if runtime.hibernated {
            return Err(Error::Conflict {
                conflict: Conflict::Hibernated,
                message: format!("runtime {} is hibernated; wake it up before upgrading it", runtime.id),
            });
        }
        check_provisioned(&status, "upgrade")?;
        let provider = self.state_provider(&status.runtime).await?;
        let operation = Operation {
            target_config: Some(target),
            dry_run,
            approval_policy,
            requested_by: Some(requested_by.to_owned()),
            ..Operation::queued(status.runtime.id, OperationType::Upgrade, provider, store::now())
        };
        let operation = operation.chained_from(&status.runtime.cluster_config);
        self.queue(runtime_id, operation, keyed.as_ref()).await
    }

    /// Queues the hibernation of a provisioned cluster: every worker pool scaled to zero (a vanilla control plane
    /// stopped too); the configuration keeps the sizes a wake-up restores.
    #[instrument(skip_all, fields(runtime_id = %runtime_id))]
    pub async fn hibernate_runtime(
        &self,
        runtime_id: RuntimeId,
        requested_by: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Requested> {
        let status = self.latest_to_change(runtime_id).await?;
        let request = (OperationType::Hibernate.as_str(), runtime_id.0);
        let (keyed, earlier) = self.keyed(requested_by, idempotency_key, fingerprint(&request)).await?;
        if let Some(operation) = earlier {
            return Ok(Requested::Replayed(operation));
        }
        let runtime = &status.runtime;
        if let Some(repeated) = repeated(&status, OperationType::Hibernate, runtime.hibernated && is_live(runtime)) {
            return Ok(repeated);
        }
        self.check_changeable(&status).await?;
        if runtime.hibernated {
            return Err(Error::Conflict {
                conflict: Conflict::Hibernated,
                message: format!("runtime {} is already hibernated", runtime.id),
            });
        }
        check_provisioned(&status, "hibernate")?;
        self.queue_run(&status, OperationType::Hibernate, requested_by, keyed.as_ref()).await
    }

    /// Queues the wake-up of a hibernated cluster: back at its configured sizes (a vanilla control plane started,
    /// and the run ends once its API server answers).
    #[instrument(skip_all, fields(runtime_id = %runtime_id))]
    pub async fn wake_up_runtime(
        &self,
        runtime_id: RuntimeId,
        requested_by: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Requested> {
        let status = self.latest_to_change(runtime_id).await?;
        let request = (OperationType::WakeUp.as_str(), runtime_id.0);
        let (keyed, earlier) = self.keyed(requested_by, idempotency_key, fingerprint(&request)).await?;
        if let Some(operation) = earlier {
            return Ok(Requested::Replayed(operation));
        }
        let runtime = &status.runtime;
        let awake = !runtime.hibernated && is_live(runtime) && status.provisioned_at.is_some();
        if let Some(repeated) = repeated(&status, OperationType::WakeUp, awake) {
            return Ok(repeated);
        }
        self.check_changeable(&status).await?;
        if !status.runtime.hibernated {
            return Err(Error::Conflict {
                conflict: Conflict::NotHibernated,
                message: format!("runtime {} is not hibernated; there is nothing to wake up", status.runtime.id),
            });
        }
        self.queue_run(&status, OperationType::WakeUp, requested_by, keyed.as_ref()).await
    }

    /// Queues a run of the runtime's own configuration with the provider that last wrote its state.
    pub(super) async fn queue_run(
        &self,
        status: &Latest,
        operation_type: OperationType,
        requested_by: &str,
        keyed: Option<&Keyed<'_>>,
    ) -> Result<Requested> {
        let provider = self.state_provider(&status.runtime).await?;
        let operation = Operation {
            requested_by: Some(requested_by.to_owned()),
            ..Operation::queued(status.runtime.id, operation_type, provider, store::now())
        };
        self.queue(RuntimeId(status.runtime.id), operation, keyed).await
    }

    /// Whether a new operation may be queued on the runtime: live, not a preview, no active operation, and no
    /// Job of an earlier operation still running (a run that ended without stopping it): a second Terraform on
    /// the same state must not start beside it.
    pub(super) async fn check_changeable(&self, status: &Latest) -> Result<()> {
        let runtime = &status.runtime;
        if runtime.deleted_at.is_some() {
            return Err(Error::Conflict {
                conflict: Conflict::AlreadyDeprovisioned,
                message: format!("runtime {} is already deprovisioned", runtime.id),
            });
        }
        if runtime.preview {
            return Err(Error::Conflict {
                conflict: Conflict::Preview,
                message: format!(
                    "runtime {} is the preview of a dry run and has no cluster; provision it without dryRun",
                    runtime.id
                ),
            });
        }
        if status.last_operation.state.is_active() {
            return Err(operation_in_progress(&status.last_operation));
        }
        let running = match &self.executor {
            Some(executor) => {
                executor.cached_active_job_of_runtime(runtime.id, JOB_CACHE_SYNC).await.map_err(executor_error)?
            }
            None => None,
        };
        if let Some(job) = running {
            return Err(Error::Conflict {
                conflict: Conflict::JobStillRunning,
                message: format!(
                    "Job {job} of an earlier operation on runtime {} is still running; try again once it has ended",
                    runtime.id
                ),
            });
        }
        Ok(())
    }

    /// The provider version the runtime's state was last written with (a cluster keeps the provider that built
    /// it until a release moves it on deliberately).
    pub(super) async fn state_provider(&self, runtime: &Runtime) -> Result<ProviderVersion> {
        Ok(match self.store.last_terraform_provider(runtime.id).await? {
            Some(provider) => provider,
            None => ProviderVersion::pinned(runtime.cluster_config.topology.cloud()),
        })
    }

    /// Records `operation` (with its key's record, when keyed): a concurrent request with the same key that
    /// recorded first gets its operation replayed.
    pub(super) async fn queue(
        &self,
        runtime_id: RuntimeId,
        operation: Operation,
        keyed: Option<&Keyed<'_>>,
    ) -> Result<Requested> {
        let operation = Operation { trace_parent: super::trace_of_request(), ..operation };
        let record = keyed.map(|keyed| keyed.record(&operation));
        match self.store.insert_keyed_operation(&operation, record.as_ref()).await {
            Ok(()) => {
                tracing::info!(
                    operation_id = %operation.id,
                    operation_type = operation.operation_type.as_str(),
                    dry_run = operation.dry_run,
                    "operation queued"
                );
                self.wake.notify_one();
                Ok(Requested::Queued(operation))
            }
            Err(store::Error::IdempotencyKeyTaken) => {
                let keyed = keyed.expect("only a keyed operation records a key");
                let earlier = self.earlier_answer(keyed).await?;
                Ok(Requested::Replayed(earlier.ok_or(Error::IdempotencyKeyReused)?))
            }
            // Another request queued an operation since we read the status: report that one.
            Err(store::Error::ActiveOperationExists) => {
                Err(operation_in_progress(&self.latest(runtime_id).await?.last_operation))
            }
            Err(store::Error::DeletionProtected(_)) => Err(deletion_refused(runtime_id, DeletionRefusal::Protected)),
            Err(store::Error::RuntimeNotFound(id)) => Err(Error::Conflict {
                conflict: Conflict::AlreadyDeprovisioned,
                message: format!("runtime {id} is already deprovisioned"),
            }),
            Err(error) => Err(error.into()),
        }
    }

    /// Cancels an operation for `requested_by`: a queued one ends at once, `Failed` with reason `cancelled`; a
    /// running one is stopped by the worker that runs it (its Job's pod gets its grace period, in which Terraform
    /// stops at a safe point and releases the state lock), then it ends the same way. A repeated cancel gets the
    /// operation (still being stopped, or cancelled); 409 once it has ended otherwise.
    #[instrument(skip_all, fields(operation_id = %operation_id))]
    pub async fn cancel_operation(&self, operation_id: OperationId, requested_by: &str) -> Result<Requested> {
        let id = operation_id.0;
        if self.tenant.is_some() {
            self.visible_operation(operation_id).await?;
        }
        match self.store.cancel_operation(id, requested_by).await? {
            Cancel::Ended | Cancel::Requested => Ok(Requested::Queued(self.visible_operation(operation_id).await?)),
            Cancel::AlreadyEnded(_) => {
                let operation = self.visible_operation(operation_id).await?;
                let cancelled =
                    operation.last_error.as_ref().is_some_and(|error| error.reason == FailureReason::Cancelled);
                if cancelled {
                    return Ok(Requested::Done(operation));
                }
                Err(Error::Conflict {
                    conflict: Conflict::AlreadyEnded,
                    message: format!(
                        "operation {id} has already ended ({}); only a queued or running one can be cancelled",
                        operation.state
                    ),
                })
            }
            Cancel::NotFound => Err(Error::NotFound { what: "operation", id: id.to_string() }),
        }
    }
}

/// A change of a cluster needs a cluster: a provisioning of the runtime succeeded.
pub(super) fn check_provisioned(status: &Latest, what: &str) -> Result<()> {
    if status.provisioned_at.is_some() {
        return Ok(());
    }
    Err(Error::Conflict {
        conflict: Conflict::NotReady,
        message: format!("runtime {} has no cluster to {what}: its provisioning has not succeeded", status.runtime.id),
    })
}
