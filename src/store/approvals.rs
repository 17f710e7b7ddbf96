//! Operations whose plan waits for approval: approved (queued again to apply exactly that plan), or ended
//! (rejected, expired). Each write is conditional on the operation still waiting, so two callers never both win.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect, TransactionTrait, UpdateMany};
use uuid::Uuid;

use super::entity::operation;
use super::operations::{enter_stage, set_last_error};
use super::{Result, Store, now};
use crate::domain::run::Stage;
use crate::domain::{LastError, OperationState};

/// The operation, only while it waits for approval.
fn while_waiting(update: UpdateMany<operation::Entity>, operation_id: Uuid) -> UpdateMany<operation::Entity> {
    update
        .filter(operation::Column::Id.eq(operation_id))
        .filter(operation::Column::State.eq(OperationState::AwaitingApproval.as_str()))
}

impl Store {
    /// Approves the plan the operation waits with, for `approved_by`: it is queued again (at stage `Approved`) and
    /// its next run applies exactly that plan, with a full budget of attempts. False when it no longer waits with that plan, or the
    /// approval time ran out.
    pub async fn approve_plan(&self, operation_id: Uuid, plan_sha256: &str, approved_by: &str) -> Result<bool> {
        let now = now();
        let txn = self.db.begin().await?;
        let approved = while_waiting(operation::Entity::update_many(), operation_id)
            .col_expr(operation::Column::State, Expr::value(OperationState::Pending.as_str()))
            .col_expr(operation::Column::Stage, Expr::value(Stage::Approved.as_str()))
            .col_expr(
                operation::Column::Message,
                Expr::value(format!("Plan approved by {approved_by}: waiting for a worker to apply it")),
            )
            .col_expr(operation::Column::ApprovedBy, Expr::value(approved_by))
            .col_expr(operation::Column::ApprovedAt, Expr::value(now))
            .col_expr(operation::Column::Attempts, Expr::value(0))
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .filter(operation::Column::SavedPlanSha256.eq(plan_sha256))
            .filter(operation::Column::ApprovalExpiresAt.gt(now))
            .exec(&txn)
            .await?;
        if approved.rows_affected == 1 {
            enter_stage(&txn, operation_id, Stage::Approved, now).await?;
        }
        txn.commit().await?;
        Ok(approved.rows_affected == 1)
    }

    /// Ends an operation that waits for approval, failed with `error` (rejected, or expired); false when it no
    /// longer waits.
    pub async fn end_waiting(&self, operation_id: Uuid, error: &LastError) -> Result<bool> {
        let now = now();
        let txn = self.db.begin().await?;
        let ended = set_last_error(while_waiting(operation::Entity::update_many(), operation_id), Some(error))
            .col_expr(operation::Column::State, Expr::value(OperationState::Failed.as_str()))
            .col_expr(operation::Column::Stage, Expr::value(Stage::Done.as_str()))
            .col_expr(operation::Column::Message, Expr::value(error.err_message.clone()))
            .col_expr(operation::Column::FinishedAt, Expr::value(now))
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .exec(&txn)
            .await?;
        if ended.rows_affected == 1 {
            enter_stage(&txn, operation_id, Stage::Done, now).await?;
        }
        txn.commit().await?;
        Ok(ended.rows_affected == 1)
    }

    /// The operations whose plan waited past its approval time at `at`, at most `limit`.
    pub async fn expired_approvals(&self, at: DateTime<Utc>, limit: u64) -> Result<Vec<Uuid>> {
        Ok(operation::Entity::find()
            .select_only()
            .column(operation::Column::Id)
            .filter(operation::Column::State.eq(OperationState::AwaitingApproval.as_str()))
            .filter(operation::Column::ApprovalExpiresAt.lte(at))
            .limit(limit)
            .into_tuple()
            .all(&self.db)
            .await?)
    }
}
