//! Durable storage of runtimes and operations with sea-orm, on PostgreSQL or SQLite.
//!
//! Invariants live in the database itself (see the migrations crate): one active operation per runtime and unique
//! names among live runtimes are partial unique indexes, so two concurrent requests cannot both win.

mod entity;

use chrono::{DateTime, Utc};
use migrations::{Migrator, MigratorTrait};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectOptions, Database, DatabaseConnection, DbBackend, DbErr, EntityTrait,
    IntoActiveModel, JoinType, QueryFilter, QueryOrder, QuerySelect, RelationDef, SqlErr, Statement, TransactionTrait,
};
use uuid::Uuid;

use crate::domain::{ClusterConfig, Labels, LastError, Operation, OperationState, OperationType, Runtime, RuntimePage};
use entity::{idempotency_key, operation, runtime};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("a runtime with this name already exists")]
    NameTaken,
    #[error("the runtime already has an active operation")]
    ActiveOperationExists,
    #[error("the idempotency key is already recorded")]
    IdempotencyKeyTaken,
    #[error("the runtime {0} does not exist")]
    RuntimeNotFound(Uuid),
    #[error("stored data is not readable: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(#[from] DbErr),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a provisioning request with an `Idempotency-Key` created, so that a retry gets the same answer.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyRecord {
    pub key: String,
    pub request_fingerprint: String,
    pub runtime_id: Uuid,
    pub operation_id: Uuid,
}

/// Operation counts by type and state, for the metrics endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationCount {
    pub operation_type: OperationType,
    pub state: OperationState,
    pub count: u64,
}

#[derive(Clone)]
pub struct Store {
    db: DatabaseConnection,
}

impl Store {
    /// Connects and applies pending migrations, so a new database is ready on first start.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        let mut options = ConnectOptions::new(url.to_owned());
        options.max_connections(max_connections).sqlx_logging(false);
        let db = Database::connect(options).await?;
        Migrator::up(&db, None).await?;
        Ok(Store { db })
    }

    pub async fn ping(&self) -> Result<()> {
        Ok(self.db.ping().await?)
    }

    /// Records a new runtime with its first operation (and the idempotency record, if any) atomically.
    pub async fn insert_runtime(
        &self,
        runtime: &Runtime,
        operation: &Operation,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<()> {
        let txn = self.db.begin().await?;
        runtime_to_model(runtime)?
            .into_active_model()
            .insert(&txn)
            .await
            .map_err(|error| unique_violation_as(error, Error::NameTaken))?;
        operation_to_model(operation)
            .into_active_model()
            .insert(&txn)
            .await
            .map_err(|error| unique_violation_as(error, Error::ActiveOperationExists))?;
        if let Some(record) = idempotency {
            idempotency_key::Model {
                key: record.key.clone(),
                request_fingerprint: record.request_fingerprint.clone(),
                runtime_id: record.runtime_id,
                operation_id: record.operation_id,
                created_at: operation.created_at,
            }
            .into_active_model()
            .insert(&txn)
            .await
            .map_err(|error| unique_violation_as(error, Error::IdempotencyKeyTaken))?;
        }
        txn.commit().await?;
        Ok(())
    }

    /// Records a further operation on a live runtime and makes it the runtime's last operation.
    pub async fn insert_operation(&self, operation: &Operation) -> Result<()> {
        let txn = self.db.begin().await?;
        operation_to_model(operation)
            .into_active_model()
            .insert(&txn)
            .await
            .map_err(|error| unique_violation_as(error, Error::ActiveOperationExists))?;
        let updated = runtime::Entity::update_many()
            .col_expr(runtime::Column::LastOperationId, Expr::value(operation.id))
            .col_expr(runtime::Column::UpdatedAt, Expr::value(operation.created_at))
            .filter(runtime::Column::Id.eq(operation.runtime_id))
            .filter(runtime::Column::DeletedAt.is_null())
            .exec(&txn)
            .await?;
        if updated.rows_affected != 1 {
            return Err(Error::RuntimeNotFound(operation.runtime_id));
        }
        txn.commit().await?;
        Ok(())
    }

    pub async fn find_runtime(&self, id: Uuid) -> Result<Option<Runtime>> {
        runtime::Entity::find_by_id(id).one(&self.db).await?.map(runtime_from_model).transpose()
    }

    pub async fn find_operation(&self, id: Uuid) -> Result<Option<Operation>> {
        operation::Entity::find_by_id(id).one(&self.db).await?.map(operation_from_model).transpose()
    }

    pub async fn find_idempotency_record(&self, key: &str) -> Result<Option<IdempotencyRecord>> {
        Ok(idempotency_key::Entity::find_by_id(key.to_owned()).one(&self.db).await?.map(|model| IdempotencyRecord {
            key: model.key,
            request_fingerprint: model.request_fingerprint,
            runtime_id: model.runtime_id,
            operation_id: model.operation_id,
        }))
    }

    /// Runtimes after the cursor in id order, optionally only those whose last operation is in `state`.
    pub async fn list_runtimes(
        &self,
        state: Option<OperationState>,
        after: Option<Uuid>,
        limit: u64,
    ) -> Result<RuntimePage> {
        let mut query = runtime::Entity::find()
            .select_also(operation::Entity)
            .join(JoinType::LeftJoin, last_operation_relation())
            .order_by_asc(runtime::Column::Id)
            .limit(limit + 1);
        if let Some(state) = state {
            query = query.filter(operation::Column::State.eq(state_to_str(state)));
        }
        if let Some(after) = after {
            query = query.filter(runtime::Column::Id.gt(after));
        }
        let mut rows = query.all(&self.db).await?;
        let has_next_page = rows.len() as u64 > limit;
        rows.truncate(limit as usize);
        let runtimes = rows
            .into_iter()
            .map(|(runtime, operation)| {
                Ok((runtime_from_model(runtime)?, operation.map(operation_from_model).transpose()?))
            })
            .collect::<Result<_>>()?;
        Ok(RuntimePage { runtimes, has_next_page })
    }

    pub async fn operation_counts(&self) -> Result<Vec<OperationCount>> {
        let rows: Vec<(String, String, i64)> = operation::Entity::find()
            .select_only()
            .column(operation::Column::OperationType)
            .column(operation::Column::State)
            .column_as(Expr::col(operation::Column::Id).count(), "count")
            .group_by(operation::Column::OperationType)
            .group_by(operation::Column::State)
            .into_tuple()
            .all(&self.db)
            .await?;
        rows.into_iter()
            .map(|(operation_type, state, count)| {
                Ok(OperationCount {
                    operation_type: type_from_str(&operation_type)?,
                    state: state_from_str(&state)?,
                    count: u64::try_from(count).unwrap_or(0),
                })
            })
            .collect()
    }
}

/// A worker's claim on an operation: who holds it and until when, unless the heartbeat extends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub owner: String,
    pub expires_at: DateTime<Utc>,
}

/// How an owned operation moves on; each write is fenced by the lease owner, so a worker that lost its lease
/// can no longer change the operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Now at `stage`, with this status message.
    Stage { stage: String, message: String },
    /// The run failed; the remaining steps only clean up.
    Failing { stage: String, message: String, error: LastError },
    /// The run ended. For a successful deprovisioning, the runtime is marked deleted in the same transaction.
    Finished { state: OperationState, stage: String, message: String },
}

impl Store {
    /// Claims the oldest Pending operation, or (with `resume_expired`) an InProgress one whose lease expired,
    /// marking it InProgress under `lease` in the same statement. On PostgreSQL the row lock with SKIP LOCKED
    /// makes concurrent claims from several processes skip each other's rows; SQLite serialises writers.
    pub async fn claim_operation(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        resume_expired: bool,
    ) -> Result<Option<Operation>> {
        let backend = self.db.get_database_backend();
        let lock = match backend {
            DbBackend::Postgres => "FOR UPDATE SKIP LOCKED",
            _ => "",
        };
        let (p1, p2, p3, p4) = match backend {
            DbBackend::Postgres => ("$1", "$2", "$3", "$4"),
            _ => ("?", "?", "?", "?"),
        };
        let sql = format!(
            "UPDATE operation SET state = 'InProgress', owner = {p1}, lease_expires_at = {p2}, \
             started_at = COALESCE(started_at, {p3}), updated_at = {p3}, attempts = attempts + 1 \
             WHERE id = (SELECT id FROM operation \
                         WHERE state = 'Pending' OR (state = 'InProgress' AND {p4} AND lease_expires_at < {p3}) \
                         ORDER BY created_at, id LIMIT 1 {lock}) \
             RETURNING *"
        );
        let values: Vec<sea_orm::Value> = match backend {
            DbBackend::Postgres => {
                vec![lease.owner.clone().into(), lease.expires_at.into(), now.into(), resume_expired.into()]
            }
            // Positional `?` parameters are bound in order of appearance.
            _ => vec![
                lease.owner.clone().into(),
                lease.expires_at.into(),
                now.into(),
                now.into(),
                resume_expired.into(),
                now.into(),
            ],
        };
        let claimed = operation::Entity::find()
            .from_raw_sql(Statement::from_sql_and_values(backend, sql, values))
            .one(&self.db)
            .await?;
        claimed.map(operation_from_model).transpose()
    }

    /// Extends a lease; false when the operation is no longer ours (another worker took over, or it ended).
    pub async fn extend_lease(&self, operation_id: Uuid, lease: &Lease) -> Result<bool> {
        let updated = operation::Entity::update_many()
            .col_expr(operation::Column::LeaseExpiresAt, Expr::value(lease.expires_at))
            .filter(operation::Column::Id.eq(operation_id))
            .filter(operation::Column::Owner.eq(lease.owner.clone()))
            .filter(operation::Column::State.eq(state_to_str(OperationState::InProgress)))
            .exec(&self.db)
            .await?;
        Ok(updated.rows_affected == 1)
    }

    /// Records progress of an owned operation; false when the lease was lost (the caller must stop).
    pub async fn record_progress(&self, operation: &Operation, owner: &str, progress: Progress) -> Result<bool> {
        let now = now();
        let mut update = operation::Entity::update_many()
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .filter(operation::Column::Id.eq(operation.id))
            .filter(operation::Column::Owner.eq(owner))
            .filter(operation::Column::State.eq(state_to_str(OperationState::InProgress)));
        let mut runtime_deleted = false;
        match progress {
            Progress::Stage { stage, message } => {
                update = update
                    .col_expr(operation::Column::Stage, Expr::value(stage))
                    .col_expr(operation::Column::Message, Expr::value(message));
            }
            Progress::Failing { stage, message, error } => {
                update = update
                    .col_expr(operation::Column::Stage, Expr::value(stage))
                    .col_expr(operation::Column::Message, Expr::value(message))
                    .col_expr(operation::Column::LastErrorMessage, Expr::value(error.err_message))
                    .col_expr(operation::Column::LastErrorReason, Expr::value(error.reason))
                    .col_expr(operation::Column::LastErrorComponent, Expr::value(error.component));
            }
            Progress::Finished { state, stage, message } => {
                runtime_deleted =
                    state == OperationState::Succeeded && operation.operation_type == OperationType::Deprovision;
                update = update
                    .col_expr(operation::Column::State, Expr::value(state_to_str(state)))
                    .col_expr(operation::Column::Stage, Expr::value(stage))
                    .col_expr(operation::Column::Message, Expr::value(message))
                    .col_expr(operation::Column::FinishedAt, Expr::value(now))
                    .col_expr(operation::Column::Owner, Expr::value(Option::<String>::None))
                    .col_expr(operation::Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None));
            }
        }
        let txn = self.db.begin().await?;
        if update.exec(&txn).await?.rows_affected != 1 {
            return Ok(false);
        }
        if runtime_deleted {
            runtime::Entity::update_many()
                .col_expr(runtime::Column::DeletedAt, Expr::value(now))
                .col_expr(runtime::Column::UpdatedAt, Expr::value(now))
                .filter(runtime::Column::Id.eq(operation.runtime_id))
                .exec(&txn)
                .await?;
        }
        txn.commit().await?;
        Ok(true)
    }

    /// Gives an operation back on shutdown: it stays InProgress with an expired lease, so the next process
    /// resumes it at once instead of waiting for the lease to run out.
    pub async fn release(&self, operation_id: Uuid, owner: &str) -> Result<()> {
        operation::Entity::update_many()
            .col_expr(operation::Column::LeaseExpiresAt, Expr::value(now()))
            .filter(operation::Column::Id.eq(operation_id))
            .filter(operation::Column::Owner.eq(owner))
            .exec(&self.db)
            .await?;
        Ok(())
    }
}

fn last_operation_relation() -> RelationDef {
    runtime::Entity::belongs_to(operation::Entity)
        .from(runtime::Column::LastOperationId)
        .to(operation::Column::Id)
        .into()
}

/// Maps a unique-constraint violation of one insert to the domain meaning of that table's constraint.
fn unique_violation_as(error: DbErr, meaning: Error) -> Error {
    match error.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => meaning,
        _ => Error::Database(error),
    }
}

fn runtime_to_model(runtime: &Runtime) -> Result<runtime::Model> {
    let config = &runtime.cluster_config;
    Ok(runtime::Model {
        id: runtime.id,
        name: runtime.name.clone(),
        description: runtime.description.clone(),
        labels: serde_json::to_value(&runtime.labels).map_err(|error| Error::Corrupt(error.to_string()))?,
        topology: config.topology.as_str().to_owned(),
        cloud: config.topology.cloud().as_str().to_owned(),
        region: config.region.clone(),
        environment: config.environment.clone(),
        credential_id: config.credential_id.clone(),
        cluster_config: serde_json::to_value(config).map_err(|error| Error::Corrupt(error.to_string()))?,
        last_operation_id: runtime.last_operation_id,
        created_at: runtime.created_at,
        updated_at: runtime.updated_at,
        deleted_at: runtime.deleted_at,
    })
}

fn runtime_from_model(model: runtime::Model) -> Result<Runtime> {
    let labels: Labels = serde_json::from_value(model.labels)
        .map_err(|error| Error::Corrupt(format!("runtime {} labels: {error}", model.id)))?;
    let cluster_config: ClusterConfig = serde_json::from_value(model.cluster_config)
        .map_err(|error| Error::Corrupt(format!("runtime {} cluster config: {error}", model.id)))?;
    Ok(Runtime {
        id: model.id,
        name: model.name,
        description: model.description,
        labels,
        cluster_config,
        last_operation_id: model.last_operation_id,
        created_at: model.created_at,
        updated_at: model.updated_at,
        deleted_at: model.deleted_at,
    })
}

fn operation_to_model(operation: &Operation) -> operation::Model {
    let last_error = operation.last_error.as_ref();
    operation::Model {
        id: operation.id,
        runtime_id: operation.runtime_id,
        operation_type: type_to_str(operation.operation_type).to_owned(),
        state: state_to_str(operation.state).to_owned(),
        stage: operation.stage.clone(),
        message: operation.message.clone(),
        last_error_message: last_error.map(|error| error.err_message.clone()),
        last_error_reason: last_error.map(|error| error.reason.clone()),
        last_error_component: last_error.map(|error| error.component.clone()),
        attempts: operation.attempts,
        owner: None,
        lease_expires_at: None,
        created_at: operation.created_at,
        started_at: operation.started_at,
        updated_at: operation.updated_at,
        finished_at: operation.finished_at,
    }
}

fn operation_from_model(model: operation::Model) -> Result<Operation> {
    let last_error = match (model.last_error_message, model.last_error_reason, model.last_error_component) {
        (Some(err_message), reason, component) => Some(LastError {
            err_message,
            reason: reason.unwrap_or_default(),
            component: component.unwrap_or_default(),
        }),
        (None, _, _) => None,
    };
    Ok(Operation {
        id: model.id,
        runtime_id: model.runtime_id,
        operation_type: type_from_str(&model.operation_type)?,
        state: state_from_str(&model.state)?,
        stage: model.stage,
        message: model.message,
        last_error,
        attempts: model.attempts,
        created_at: model.created_at,
        started_at: model.started_at,
        updated_at: model.updated_at,
        finished_at: model.finished_at,
    })
}

fn type_to_str(operation_type: OperationType) -> &'static str {
    match operation_type {
        OperationType::Provision => "Provision",
        OperationType::Deprovision => "Deprovision",
    }
}

fn type_from_str(value: &str) -> Result<OperationType> {
    match value {
        "Provision" => Ok(OperationType::Provision),
        "Deprovision" => Ok(OperationType::Deprovision),
        other => Err(Error::Corrupt(format!("unknown operation type {other:?}"))),
    }
}

fn state_to_str(state: OperationState) -> &'static str {
    match state {
        OperationState::Pending => "Pending",
        OperationState::InProgress => "InProgress",
        OperationState::Succeeded => "Succeeded",
        OperationState::Failed => "Failed",
    }
}

fn state_from_str(value: &str) -> Result<OperationState> {
    match value {
        "Pending" => Ok(OperationState::Pending),
        "InProgress" => Ok(OperationState::InProgress),
        "Succeeded" => Ok(OperationState::Succeeded),
        "Failed" => Ok(OperationState::Failed),
        other => Err(Error::Corrupt(format!("unknown operation state {other:?}"))),
    }
}

/// The current time, truncated to microseconds: both databases store that precision, so values read back
/// compare equal to the ones written.
pub fn now() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}
