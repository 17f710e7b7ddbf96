//! A claimed operation's progress, each write fenced by the claim's token.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, TransactionTrait, UpdateMany};
use uuid::Uuid;

use super::entity::{operation, runtime};
use super::operations::{enter_stage, set_last_error};
use super::{Result, Store, now};
use crate::domain::run::Stage;
use crate::domain::upgrade_chain::MinorDone;
use crate::domain::{ClusterConfig, LastError, Operation, OperationState, OperationType, PlanSummary};

/// How an owned operation moves on; each write is fenced by the claim token, so a run whose claim was superseded
/// (its lease expired and another claim took the operation) can no longer change it.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Now at `stage`, with this status message; a transient error shown while retrying is cleared.
    Stage { stage: Stage, message: String },
    /// The step at the current stage failed transiently and is retried: shown as the status message and the
    /// last error until the stage moves on.
    Retrying { message: String, error: LastError },
    /// The run failed; the remaining steps only clean up.
    Failing { stage: Stage, message: String, error: LastError },
    /// The run ended. For a successful deprovisioning, the runtime is marked deleted in the same transaction.
    Finished { state: OperationState, stage: Stage, message: String },
    /// The run ended with its plan saved for approval, which may be given until `expires_at`; the operation
    /// waits unowned (no worker claims it) until a caller approves or rejects it.
    AwaitingApproval { message: String, expires_at: DateTime<Utc> },
    /// A minor of a chained upgrade was applied and another follows: the runtime shows `done.applied` from now on,
    /// and the operation is queued again for the next minor's run (a fresh run: no approval, a full budget of
    /// attempts, its own timeout from the next minor's start), in one transaction.
    NextMinor { message: String, done: Box<MinorDone> },
}

impl Store {
    /// Records progress of a claimed operation; false when the claim is no longer current (the caller must stop).
    pub async fn record_progress(&self, operation: &Operation, token: Uuid, progress: Progress) -> Result<bool> {
        let now = now();
        let fenced = operation::Entity::update_many()
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .filter(operation::Column::Id.eq(operation.id))
            .filter(operation::Column::ClaimToken.eq(token))
            .filter(operation::Column::State.eq(OperationState::InProgress.as_str()));
        let entered = progress.stage();
        let runtime_update = match &progress {
            Progress::Finished { state: OperationState::Succeeded, .. } => runtime_change(operation, now)?,
            Progress::NextMinor { done, .. } => Some(applied_config(operation.runtime_id, &done.applied, now)?),
            _ => None,
        };
        let update = progress.apply(fenced, now);
        let txn = self.db.begin().await?;
        if update.exec(&txn).await?.rows_affected != 1 {
            return Ok(false);
        }
        if let Some(change) = runtime_update {
            change.exec(&txn).await?;
        }
        if let Some(stage) = entered {
            enter_stage(&txn, operation.id, stage, now).await?;
        }
        txn.commit().await?;
        Ok(true)
    }

    /// Records what the run's plan changed, and the digest of the plan when the run saved it for approval; fenced
    /// by the claim like every write of a run. An approved run's report names no saved plan: the approved digest
    /// stays.
    pub async fn record_plan_summary(
        &self,
        operation_id: Uuid,
        token: Uuid,
        summary: &PlanSummary,
        saved_plan_sha256: Option<&str>,
    ) -> Result<bool> {
        let mut update = operation::Entity::update_many()
            .col_expr(operation::Column::PlanSummary, Expr::value(serde_json::json!(summary).to_string()));
        if let Some(digest) = saved_plan_sha256 {
            update = update.col_expr(operation::Column::SavedPlanSha256, Expr::value(digest));
        }
        let updated = update
            .filter(operation::Column::Id.eq(operation_id))
            .filter(operation::Column::ClaimToken.eq(token))
            .exec(&self.db)
            .await?;
        Ok(updated.rows_affected == 1)
    }

    /// Records the digest of the kubeconfig an apply published, once the outputs Secret was checked to hold it;
    /// fenced by the claim like every write of a run.
    pub async fn record_kubeconfig_digest(&self, operation_id: Uuid, token: Uuid, digest: &str) -> Result<bool> {
        let updated = operation::Entity::update_many()
            .col_expr(operation::Column::KubeconfigSha256, Expr::value(digest))
            .filter(operation::Column::Id.eq(operation_id))
            .filter(operation::Column::ClaimToken.eq(token))
            .exec(&self.db)
            .await?;
        Ok(updated.rows_affected == 1)
    }
}

impl Progress {
    /// The stage the operation enters, if it moves.
    fn stage(&self) -> Option<Stage> {
        match self {
            Progress::Stage { stage, .. } | Progress::Failing { stage, .. } | Progress::Finished { stage, .. } => {
                Some(*stage)
            }
            Progress::AwaitingApproval { .. } => Some(Stage::AwaitingApproval),
            Progress::NextMinor { .. } => Some(Stage::NextMinor),
            Progress::Retrying { .. } => None,
        }
    }

    /// The operation's columns this progress writes.
    fn apply(self, update: UpdateMany<operation::Entity>, now: DateTime<Utc>) -> UpdateMany<operation::Entity> {
        let no_text = || Expr::value(Option::<String>::None);
        match self {
            Progress::Stage { stage, message } => set_last_error(update, None)
                .col_expr(operation::Column::Stage, Expr::value(stage.as_str()))
                .col_expr(operation::Column::Message, Expr::value(message))
                .col_expr(operation::Column::ProgressSinceClaim, Expr::value(true)),
            Progress::Retrying { message, error } => {
                set_last_error(update, Some(&error)).col_expr(operation::Column::Message, Expr::value(message))
            }
            Progress::Failing { stage, message, error } => set_last_error(update, Some(&error))
                .col_expr(operation::Column::Stage, Expr::value(stage.as_str()))
                .col_expr(operation::Column::Message, Expr::value(message))
                .col_expr(operation::Column::ProgressSinceClaim, Expr::value(true)),
            Progress::Finished { state, stage, message } => {
                // A failed run keeps the error it failed with.
                let update = if state == OperationState::Succeeded { set_last_error(update, None) } else { update };
                update
                    .col_expr(operation::Column::State, Expr::value(state.as_str()))
                    .col_expr(operation::Column::Stage, Expr::value(stage.as_str()))
                    .col_expr(operation::Column::Message, Expr::value(message))
                    .col_expr(operation::Column::FinishedAt, Expr::value(now))
                    .col_expr(operation::Column::Owner, no_text())
                    .col_expr(operation::Column::ClaimToken, Expr::value(Option::<Uuid>::None))
                    .col_expr(operation::Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None))
            }
            Progress::AwaitingApproval { message, expires_at } => set_last_error(update, None)
                .col_expr(operation::Column::State, Expr::value(OperationState::AwaitingApproval.as_str()))
                .col_expr(operation::Column::Stage, Expr::value(Stage::AwaitingApproval.as_str()))
                .col_expr(operation::Column::Message, Expr::value(message))
                .col_expr(operation::Column::ApprovalExpiresAt, Expr::value(expires_at))
                .col_expr(operation::Column::Owner, no_text())
                .col_expr(operation::Column::ClaimToken, Expr::value(Option::<Uuid>::None))
                .col_expr(operation::Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None)),
            Progress::NextMinor { message, done } => set_last_error(update, None)
                .col_expr(operation::Column::State, Expr::value(OperationState::Pending.as_str()))
                .col_expr(operation::Column::Stage, Expr::value(Stage::NextMinor.as_str()))
                .col_expr(operation::Column::Message, Expr::value(message))
                .col_expr(operation::Column::Minors, Expr::value(serde_json::json!(done.minors).to_string()))
                .col_expr(operation::Column::Attempts, Expr::value(0))
                .col_expr(operation::Column::SavedPlanSha256, no_text())
                .col_expr(operation::Column::ApprovalExpiresAt, Expr::value(Option::<DateTime<Utc>>::None))
                .col_expr(operation::Column::ApprovedBy, no_text())
                .col_expr(operation::Column::ApprovedAt, Expr::value(Option::<DateTime<Utc>>::None))
                .col_expr(operation::Column::Owner, no_text())
                .col_expr(operation::Column::ClaimToken, Expr::value(Option::<Uuid>::None))
                .col_expr(operation::Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None)),
        }
    }
}

/// What a successful run changes of its runtime, written in the same transaction as its end: a deprovisioning
/// marks it deleted, and it shows what was last applied (an upgrade's configuration, the hibernation). None for a
/// dry run or an operation that changes nothing of it.
fn runtime_change(operation: &Operation, now: DateTime<Utc>) -> Result<Option<UpdateMany<runtime::Entity>>> {
    let deleted = operation.operation_type == OperationType::Deprovision;
    let applied_config = operation.target_config.as_ref();
    let hibernated = operation.operation_type.hibernated_after();
    if operation.dry_run || !(deleted || applied_config.is_some() || hibernated.is_some()) {
        return Ok(None);
    }
    let mut change = runtime::Entity::update_many()
        .col_expr(runtime::Column::UpdatedAt, Expr::value(now))
        .filter(runtime::Column::Id.eq(operation.runtime_id));
    if deleted {
        change = change.col_expr(runtime::Column::DeletedAt, Expr::value(now));
    }
    if let Some(config) = applied_config {
        change = with_config(change, config)?;
    }
    if let Some(hibernated) = hibernated {
        change = change.col_expr(runtime::Column::Hibernated, Expr::value(hibernated));
    }
    Ok(Some(change))
}

/// The runtime showing `config` as the configuration last applied.
fn applied_config(runtime_id: Uuid, config: &ClusterConfig, now: DateTime<Utc>) -> Result<UpdateMany<runtime::Entity>> {
    let change = runtime::Entity::update_many()
        .col_expr(runtime::Column::UpdatedAt, Expr::value(now))
        .filter(runtime::Column::Id.eq(runtime_id));
    with_config(change, config)
}

fn with_config(change: UpdateMany<runtime::Entity>, config: &ClusterConfig) -> Result<UpdateMany<runtime::Entity>> {
    let (config, api_allowed_cidrs) = super::convert::config_columns(config)?;
    Ok(change
        .col_expr(runtime::Column::ClusterConfig, Expr::value(config))
        .col_expr(runtime::Column::ApiAllowedCidrs, Expr::value(api_allowed_cidrs)))
}
