//! Operations: recorded with the stage they start at, read, listed, counted and cancelled.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, FromQueryResult, IdenStatic,
    IntoActiveModel, JoinType, QueryFilter, QueryOrder, QuerySelect, QueryTrait, RelationDef, Select, SelectA, SelectB,
    SelectTwo, Statement, TransactionTrait, UpdateMany,
};
use uuid::Uuid;

use super::convert::{corrupt, operation_from_model, operation_to_model, state_from_str, type_from_str};
use super::entity::{operation, operation_stage, runtime};
use super::{Error, IdempotencyRecord, Result, Store, now, page, unique_violation_as};
use crate::domain::run::Stage;
use crate::domain::{LastError, Operation, OperationPage, OperationState, OperationType, StageEntry};

/// Operation counts by type and state, for the metrics endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationCount {
    pub operation_type: OperationType,
    pub state: OperationState,
    pub count: u64,
    /// When the oldest of them was asked for.
    pub oldest_created_at: DateTime<Utc>,
}

/// What a cancel request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// The operation was queued: it ended at once.
    Ended,
    /// It runs: its worker stops it (or already is).
    Requested,
    /// It had already ended, in this state.
    AlreadyEnded(OperationState),
    NotFound,
}

impl Store {
    /// Records a further operation on a live runtime and makes it the runtime's last operation (a forced
    /// deprovisioning, ended already, marks the runtime deleted in the same transaction).
    pub async fn insert_operation(&self, operation: &Operation) -> Result<()> {
        self.insert_keyed_operation(operation, None).await
    }

    /// [`Store::insert_operation`], with the record of the `Idempotency-Key` that asked for it in the same
    /// transaction (`IdempotencyKeyTaken` when a concurrent request recorded the key first).
    pub async fn insert_keyed_operation(&self, operation: &Operation, key: Option<&IdempotencyRecord>) -> Result<()> {
        let txn = self.db.begin().await?;
        insert_with_first_stage(&txn, operation).await?;
        if let Some(record) = key {
            super::idempotency::insert_record(&txn, record, operation.created_at).await?;
        }
        let mut queued = runtime::Entity::update_many()
            .col_expr(runtime::Column::LastOperationId, Expr::value(operation.id))
            .col_expr(runtime::Column::UpdatedAt, Expr::value(operation.created_at))
            .filter(runtime::Column::Id.eq(operation.runtime_id))
            .filter(runtime::Column::DeletedAt.is_null());
        // A protection turned on after the service checked it still stops the deprovisioning.
        let deprovisioning = operation.operation_type == OperationType::Deprovision;
        if deprovisioning {
            queued = queued.filter(runtime::Column::DeletionProtection.eq(false));
        }
        // A forced deprovisioning has ended when it is recorded: the runtime is deleted with it.
        if operation.forced.is_some() {
            queued = queued.col_expr(runtime::Column::DeletedAt, Expr::value(operation.created_at));
        }
        if queued.exec(&txn).await?.rows_affected == 1 {
            txn.commit().await?;
            return Ok(());
        }
        let runtime = runtime::Entity::find_by_id(operation.runtime_id).one(&txn).await?;
        match runtime {
            Some(runtime) if deprovisioning && runtime.deleted_at.is_none() => {
                Err(Error::DeletionProtected(operation.runtime_id))
            }
            _ => Err(Error::RuntimeNotFound(operation.runtime_id)),
        }
    }

    pub async fn find_operation(&self, id: Uuid) -> Result<Option<Operation>> {
        operation::Entity::find_by_id(id).one(&self.reads).await?.map(operation_from_model).transpose()
    }

    /// An operation with when it entered each of its stages (in stage order), in one statement: a row for each
    /// stage, the operation decoded from the first.
    pub async fn find_operation_with_stages(&self, id: Uuid) -> Result<Option<(Operation, Vec<StageEntry>)>> {
        let rows = self.reads.query_all_raw(self.prepared.operation_with_stages(id)).await?;
        let Some(first) = rows.first() else { return Ok(None) };
        let operation = operation_from_model(operation::Model::from_query_result(first, SelectA.as_str())?)?;
        let mut stages = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(stage) = operation_stage::Model::from_query_result_optional(row, SelectB.as_str())? else {
                continue;
            };
            stages.push(stage_entry(&stage.stage, stage.entered_at)?);
        }
        stages.sort_by_key(|entry| entry.stage);
        Ok(Some((operation, stages)))
    }

    /// One page of a runtime's operations, newest first (ids are UUIDv7); `before` is the last id of the
    /// previous page.
    pub async fn list_operations(&self, runtime_id: Uuid, before: Option<Uuid>, limit: u64) -> Result<OperationPage> {
        let query = operation_page(runtime_id, before, limit);
        let (rows, has_next_page) = page(query.all(&self.reads).await?, limit);
        let operations = rows.into_iter().map(operation_from_model).collect::<Result<_>>()?;
        Ok(OperationPage { operations, has_next_page })
    }

    /// The statement [`Store::list_operations`] sends, for its plan (`EXPLAIN`).
    pub fn operation_page_statement(&self, runtime_id: Uuid, before: Option<Uuid>, limit: u64) -> Statement {
        operation_page(runtime_id, before, limit).build(self.db.get_database_backend())
    }

    /// When each of `operation_ids` entered each of its stages, in stage order, in one query: an id without
    /// stages (unknown) is left out.
    pub async fn stages_of(&self, operation_ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<StageEntry>>> {
        if operation_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = operation_stage::Entity::find()
            .filter(operation_stage::Column::OperationId.is_in(operation_ids.iter().copied()))
            .all(&self.reads)
            .await?;
        let mut stages: HashMap<Uuid, Vec<StageEntry>> = HashMap::new();
        for row in rows {
            stages.entry(row.operation_id).or_default().push(stage_entry(&row.stage, row.entered_at)?);
        }
        for entries in stages.values_mut() {
            entries.sort_by_key(|entry| entry.stage);
        }
        Ok(stages)
    }

    pub async fn operation_counts(&self) -> Result<Vec<OperationCount>> {
        let rows: Vec<(String, String, i64, DateTime<Utc>)> = operation::Entity::find()
            .select_only()
            .column(operation::Column::OperationType)
            .column(operation::Column::State)
            .column_as(Expr::col(operation::Column::Id).count(), "count")
            .column_as(Expr::col(operation::Column::CreatedAt).min(), "oldest_created_at")
            .group_by(operation::Column::OperationType)
            .group_by(operation::Column::State)
            .into_tuple()
            .all(&self.reads)
            .await?;
        rows.into_iter()
            .map(|(operation_type, state, count, oldest_created_at)| {
                Ok(OperationCount {
                    operation_type: type_from_str(&operation_type)?,
                    state: state_from_str(&state)?,
                    count: u64::try_from(count).unwrap_or(0),
                    oldest_created_at,
                })
            })
            .collect()
    }

    /// Cancels an operation for `caller`: a queued one fails at once (reason `cancelled`); for a running one the
    /// request is recorded, and its worker stops the run.
    pub async fn cancel_operation(&self, operation_id: Uuid, caller: &str) -> Result<Cancel> {
        let now = now();
        let error = LastError::cancelled_by(caller);
        let txn = self.db.begin().await?;
        let queued = set_last_error(operation::Entity::update_many(), Some(&error))
            .col_expr(operation::Column::State, Expr::value(OperationState::Failed.as_str()))
            .col_expr(operation::Column::Stage, Expr::value(Stage::Done.as_str()))
            .col_expr(operation::Column::Message, Expr::value(error.err_message.clone()))
            .col_expr(operation::Column::FinishedAt, Expr::value(now))
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .filter(operation::Column::Id.eq(operation_id))
            // Nothing runs for a queued one, nor for one whose plan waits for approval.
            .filter(
                operation::Column::State
                    .is_in([OperationState::Pending.as_str(), OperationState::AwaitingApproval.as_str()]),
            )
            .exec(&txn)
            .await?;
        if queued.rows_affected == 1 {
            enter_stage(&txn, operation_id, Stage::Done, now).await?;
            txn.commit().await?;
            return Ok(Cancel::Ended);
        }
        let running = operation::Entity::update_many()
            .col_expr(operation::Column::CancelRequestedBy, Expr::value(caller))
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .filter(operation::Column::Id.eq(operation_id))
            .filter(operation::Column::State.eq(OperationState::InProgress.as_str()))
            .filter(operation::Column::CancelRequestedBy.is_null())
            .exec(&txn)
            .await?;
        txn.commit().await?;
        if running.rows_affected == 1 {
            return Ok(Cancel::Requested);
        }
        match self.find_operation(operation_id).await? {
            None => Ok(Cancel::NotFound),
            Some(operation) if operation.state.is_active() => Ok(Cancel::Requested),
            Some(operation) => Ok(Cancel::AlreadyEnded(operation.state)),
        }
    }
}

fn operation_page(runtime_id: Uuid, before: Option<Uuid>, limit: u64) -> Select<operation::Entity> {
    let query = operation::Entity::find()
        .filter(operation::Column::RuntimeId.eq(runtime_id))
        .order_by_desc(operation::Column::Id)
        .limit(limit + 1);
    match before {
        Some(before) => query.filter(operation::Column::Id.lt(before)),
        None => query,
    }
}

/// Inserts an operation and the entry of its first stage, in the caller's transaction.
pub(super) async fn insert_with_first_stage(txn: &DatabaseTransaction, operation: &Operation) -> Result<()> {
    operation_to_model(operation)?
        .into_active_model()
        .insert(txn)
        .await
        .map_err(|error| unique_violation_as(error, Error::ActiveOperationExists))?;
    enter_stage(txn, operation.id, operation.stage, operation.created_at).await
}

/// Sets the three columns of an operation's last error, or clears them with `None`.
pub(super) fn set_last_error(
    update: UpdateMany<operation::Entity>,
    error: Option<&LastError>,
) -> UpdateMany<operation::Entity> {
    update
        .col_expr(operation::Column::LastErrorMessage, Expr::value(error.map(|error| error.err_message.clone())))
        .col_expr(operation::Column::LastErrorReason, Expr::value(error.map(|error| error.reason.as_str())))
        .col_expr(operation::Column::LastErrorComponent, Expr::value(error.map(|error| error.component.as_str())))
}

/// Records that the operation entered `stage`, in the caller's transaction; a stage entered again (a resumed run)
/// keeps its first time.
pub(super) async fn enter_stage(
    txn: &sea_orm::DatabaseTransaction,
    operation_id: Uuid,
    stage: Stage,
    at: DateTime<Utc>,
) -> Result<()> {
    let entry = operation_stage::ActiveModel {
        operation_id: sea_orm::Set(operation_id),
        stage: sea_orm::Set(stage.as_str().to_owned()),
        entered_at: sea_orm::Set(at),
    };
    operation_stage::Entity::insert(entry).on_conflict_do_nothing().exec(txn).await?;
    Ok(())
}

/// A stored stage entry; an unknown stage is an error.
pub(super) fn stage_entry(stage: &str, entered_at: DateTime<Utc>) -> Result<StageEntry> {
    let stage = Stage::parse(stage).ok_or_else(|| corrupt("stage", stage))?;
    Ok(StageEntry { stage, entered_at })
}

/// The statement of [`Store::find_operation_with_stages`] (sent as [`super::prepared::Prepared`] built it).
pub(super) fn operation_with_stages_query(id: Uuid) -> SelectTwo<operation::Entity, operation_stage::Entity> {
    operation::Entity::find_by_id(id).select_also(operation_stage::Entity).join(JoinType::LeftJoin, stages_relation())
}

/// An operation's stages, joined to it.
pub(super) fn stages_relation() -> RelationDef {
    let stage_of_operation: RelationDef = operation_stage::Entity::belongs_to(operation::Entity)
        .from(operation_stage::Column::OperationId)
        .to(operation::Column::Id)
        .into();
    stage_of_operation.rev()
}
