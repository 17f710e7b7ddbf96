//! Approving or rejecting a plan that waits (see `domain::approval`): an approval names the plan by its digest
//! and queues the run that applies exactly it; a rejection, or an approval time that ran out, ends the operation
//! with nothing changed.

use tracing::instrument;

use super::validation::{Invalid, InvalidReason};
use super::{Conflict, Error, Requested, Result, RuntimeStatus, Service};
use crate::domain::approval::{ApprovalPolicy, ApprovalRefusal, is_plan_digest};
use crate::domain::{FailureReason, LastError, Operation, OperationId, RuntimeId};
use crate::store;

impl Service {
    /// Approves the plan `operation_id` waits with, for `approved_by`, when `plan_sha256` names it: the operation
    /// is queued again and applies exactly that plan. A repeated approval of the same plan gets the operation.
    #[instrument(skip_all, fields(operation_id = %operation_id))]
    pub async fn approve_operation(
        &self,
        operation_id: OperationId,
        plan_sha256: &str,
        approved_by: &str,
    ) -> Result<Requested> {
        if !is_plan_digest(plan_sha256) {
            let message = "must be the plan's SHA-256 as the operation shows it: 64 lowercase hex digits";
            return Err(Invalid::new(InvalidReason::Format, "planSha256", message).into());
        }
        let operation = self.visible_operation(operation_id).await?;
        if operation.approved_plan() == Some(plan_sha256) {
            return Ok(Requested::Running(operation));
        }
        self.check_waiting(&operation, operation.check_approval(plan_sha256, store::now())).await?;
        if !self.store.approve_plan(operation.id, plan_sha256, approved_by).await? {
            return Err(self.no_longer_waiting(operation_id).await?);
        }
        self.wake.notify_one();
        tracing::info!(approved_by, plan_sha256, "plan approved");
        Ok(Requested::Queued(self.visible_operation(operation_id).await?))
    }

    /// Rejects the plan `operation_id` waits with, for `rejected_by`: the operation fails (`plan_rejected`) and
    /// nothing is applied. A repeated rejection gets the operation.
    #[instrument(skip_all, fields(operation_id = %operation_id))]
    pub async fn reject_operation(&self, operation_id: OperationId, rejected_by: &str) -> Result<Requested> {
        let operation = self.visible_operation(operation_id).await?;
        if operation.last_error.as_ref().is_some_and(|error| error.reason == FailureReason::PlanRejected) {
            return Ok(Requested::Done(operation));
        }
        self.check_waiting(&operation, operation.check_waiting(store::now())).await?;
        if !self.store.end_waiting(operation.id, &LastError::plan_rejected_by(rejected_by)).await? {
            return Err(self.no_longer_waiting(operation_id).await?);
        }
        tracing::info!(rejected_by, "plan rejected");
        Ok(Requested::Queued(self.visible_operation(operation_id).await?))
    }

    /// Whether a request's own `policy` lets through a plan that the runtime's policy would hold back: only a
    /// caller who may approve plans may ask for that.
    pub async fn loosens_approval(&self, runtime_id: RuntimeId, policy: Option<ApprovalPolicy>) -> Result<bool> {
        let Some(policy) = policy else { return Ok(false) };
        Ok(policy.is_looser_than(self.latest(runtime_id).await?.runtime.approval_policy))
    }

    /// Changes which plans of a live runtime's runs wait for approval (no operation: the provisioner's own
    /// record); an operation already waiting keeps waiting.
    #[instrument(skip_all, fields(runtime_id = %runtime_id, policy = policy.as_str()))]
    pub async fn set_approval_policy(&self, runtime_id: RuntimeId, policy: ApprovalPolicy) -> Result<RuntimeStatus> {
        self.latest_to_change(runtime_id).await?;
        if !self.store.set_approval_policy(runtime_id.0, policy, store::now()).await? {
            return Err(Error::Conflict {
                conflict: Conflict::AlreadyDeprovisioned,
                message: format!("runtime {runtime_id} is already deprovisioned"),
            });
        }
        tracing::info!("approval policy changed");
        self.runtime_status(runtime_id).await
    }

    /// The refusal as the caller's error; an approval time that ran out ends the operation first, so that it
    /// stops holding its runtime.
    async fn check_waiting(&self, operation: &Operation, checked: Result<(), ApprovalRefusal>) -> Result<()> {
        let Err(refusal) = checked else { return Ok(()) };
        let conflict = match refusal {
            ApprovalRefusal::NotAwaiting(_) => Conflict::NotAwaitingApproval,
            ApprovalRefusal::OtherPlan => Conflict::PlanMismatch,
            ApprovalRefusal::Expired(_) => {
                self.store.end_waiting(operation.id, &LastError::approval_expired()).await?;
                Conflict::ApprovalExpired
            }
        };
        Err(Error::Conflict { conflict, message: format!("operation {}: {refusal}", operation.id) })
    }

    /// Why a conditional write found the operation no longer waiting: another request changed it meanwhile.
    async fn no_longer_waiting(&self, operation_id: OperationId) -> Result<Error> {
        let operation = self.visible_operation(operation_id).await?;
        let refusal = ApprovalRefusal::NotAwaiting(operation.state);
        Ok(Error::Conflict {
            conflict: Conflict::NotAwaitingApproval,
            message: format!("operation {}: {refusal}", operation.id),
        })
    }
}
