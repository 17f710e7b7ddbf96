//! Durable storage of runtimes and operations with sea-orm, on PostgreSQL or SQLite.
//!
//! Invariants live in the database itself (see the migrations crate): one active operation per runtime and unique
//! names among live runtimes are partial unique indexes, so two concurrent requests cannot both win.

mod entity;
mod schema;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr,
    EntityTrait, IntoActiveModel, JoinType, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, RelationDef, SqlErr,
    Statement, TransactionTrait,
};
use uuid::Uuid;

use crate::domain::run::Stage;
use crate::domain::run_log::{KeptLog, LogBudget};
use crate::domain::state_bucket;
use crate::domain::tenant::Tenant;
use crate::domain::{
    ClusterConfig, Component, FailureReason, Labels, LastError, Operation, OperationPage, OperationState,
    OperationType, PlanSummary, ProviderVersion, Runtime, RuntimePage, StageEntry,
};
use entity::{caller_idempotency_key, operation, operation_log, operation_stage, runtime};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("a runtime with this name already exists")]
    NameTaken,
    #[error("the runtime already has an active operation")]
    ActiveOperationExists,
    #[error("the idempotency key is already recorded")]
    IdempotencyKeyTaken,
    /// Kept logs longer than the request may read.
    #[error("the kept logs are longer than the {max_bytes} bytes this request may read")]
    OverBudget { max_bytes: usize },
    #[error("the runtime {0} does not exist")]
    RuntimeNotFound(Uuid),
    #[error("stored data is not readable: {0}")]
    Corrupt(String),
    /// The database's schema does not fit this release ([`schema`]).
    #[error("database schema: {0}")]
    Schema(String),
    #[error("database error: {0}")]
    Database(#[from] DbErr),
}

pub use schema::Migrations;

impl Error {
    /// Whether the database could not be reached (no connection within the acquire timeout, a dropped connection),
    /// as opposed to a statement it refused: callers answer 503 and retry rather than report a bug.
    pub fn is_unavailable(&self) -> bool {
        let Error::Database(error) = self else { return false };
        let runtime = match error {
            DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => return true,
            DbErr::Exec(runtime) | DbErr::Query(runtime) => runtime,
            _ => return false,
        };
        match runtime {
            sea_orm::RuntimeErr::SqlxError(sqlx) => matches!(
                **sqlx,
                sea_orm::sqlx::Error::Io(_)
                    | sea_orm::sqlx::Error::PoolTimedOut
                    | sea_orm::sqlx::Error::PoolClosed
                    | sea_orm::sqlx::Error::Tls(_)
                    | sea_orm::sqlx::Error::WorkerCrashed
            ),
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a provisioning request with an `Idempotency-Key` created, so that a retry gets the same answer. A key is
/// its caller's: the same key from another caller is another request.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyRecord {
    pub caller: String,
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

/// How long an SQLite connection waits for another process's write lock before it reports SQLITE_BUSY. Within this
/// process writes never wait for it: they share one connection.
const SQLITE_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Clone)]
pub struct Store {
    /// Every write goes here. On SQLite this pool has one connection: SQLite has one writer at a time, and a queue
    /// in the pool is fair and bounded by the acquire timeout, where competing connections would sleep in
    /// SQLite's busy handler and could fail with SQLITE_BUSY.
    db: DatabaseConnection,
    /// Reads. On SQLite a pool of its own, so that in WAL mode readers never queue behind the writer; on
    /// PostgreSQL the same pool as `db`.
    reads: DatabaseConnection,
}

impl Store {
    /// Connects and applies pending migrations, so a new database is ready on first start. SQLite is opened as a
    /// server database: WAL journal (readers and the writer do not block each other), `synchronous=NORMAL`
    /// (durable across process crashes in WAL mode; a power loss may lose the last transactions, never corrupt
    /// the file), a busy timeout, and foreign keys on.
    pub async fn connect(url: &str, max_connections: u32, acquire_timeout: std::time::Duration) -> Result<Self> {
        Self::connect_with(url, max_connections, acquire_timeout, Migrations::Apply).await
    }

    /// [`Store::connect`], applying this release's missing migrations or only checking for them ([`Migrations`]).
    pub async fn connect_with(
        url: &str,
        max_connections: u32,
        acquire_timeout: std::time::Duration,
        migrations: Migrations,
    ) -> Result<Self> {
        let options = |max_connections: u32| {
            let mut options = ConnectOptions::new(url.to_owned());
            // Without a short acquire timeout a database outage makes every request hang for the library's 30 s.
            options
                .max_connections(max_connections)
                .acquire_timeout(acquire_timeout)
                .connect_timeout(acquire_timeout)
                .sqlx_logging(false)
                .map_sqlx_sqlite_opts(|sqlite| {
                    sqlite
                        .journal_mode(SqliteJournalMode::Wal)
                        .synchronous(SqliteSynchronous::Normal)
                        .busy_timeout(SQLITE_BUSY_TIMEOUT)
                        .foreign_keys(true)
                });
            options
        };
        if url.starts_with("sqlite:") {
            let db = Database::connect(options(1)).await?;
            schema::prepare(&db, migrations).await?;
            let reads = Database::connect(options(max_connections)).await?;
            return Ok(Store { db, reads });
        }
        let db = Database::connect(options(max_connections)).await?;
        schema::prepare(&db, migrations).await?;
        Ok(Store { reads: db.clone(), db })
    }

    pub async fn ping(&self) -> Result<()> {
        Ok(self.reads.ping().await?)
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
        operation_to_model(operation)?
            .into_active_model()
            .insert(&txn)
            .await
            .map_err(|error| unique_violation_as(error, Error::ActiveOperationExists))?;
        enter_stage(&txn, operation.id, operation.stage, operation.created_at).await?;
        if let Some(record) = idempotency {
            caller_idempotency_key::Model {
                caller: record.caller.clone(),
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
        operation_to_model(operation)?
            .into_active_model()
            .insert(&txn)
            .await
            .map_err(|error| unique_violation_as(error, Error::ActiveOperationExists))?;
        enter_stage(&txn, operation.id, operation.stage, operation.created_at).await?;
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

    /// The provider version of the runtime's latest operation that recorded one: what its state was last written
    /// with, so what the next run on it must install.
    pub async fn last_terraform_provider(&self, runtime_id: Uuid) -> Result<Option<ProviderVersion>> {
        let latest = operation::Entity::find()
            .select_only()
            .column(operation::Column::TerraformProvider)
            .filter(operation::Column::RuntimeId.eq(runtime_id))
            .filter(operation::Column::TerraformProvider.is_not_null())
            .order_by_desc(operation::Column::CreatedAt)
            .into_tuple::<String>()
            .one(&self.reads)
            .await?;
        latest.as_deref().map(provider_from_str).transpose()
    }

    /// Whether a provisioning of the runtime (not a dry run) succeeded: its cluster exists.
    pub async fn was_provisioned(&self, runtime_id: Uuid) -> Result<bool> {
        let succeeded = operation::Entity::find()
            .filter(operation::Column::RuntimeId.eq(runtime_id))
            .filter(operation::Column::OperationType.eq(OperationType::Provision.as_str()))
            .filter(operation::Column::State.eq(OperationState::Succeeded.as_str()))
            .filter(operation::Column::DryRun.eq(false))
            .count(&self.reads)
            .await?;
        Ok(succeeded > 0)
    }

    pub async fn find_runtime(&self, id: Uuid) -> Result<Option<Runtime>> {
        runtime::Entity::find_by_id(id).one(&self.reads).await?.map(runtime_from_model).transpose()
    }

    pub async fn find_operation(&self, id: Uuid) -> Result<Option<Operation>> {
        operation::Entity::find_by_id(id).one(&self.reads).await?.map(operation_from_model).transpose()
    }

    /// One page of a runtime's operations, newest first (ids are UUIDv7); `before` is the last id of the
    /// previous page.
    pub async fn list_operations(&self, runtime_id: Uuid, before: Option<Uuid>, limit: u64) -> Result<OperationPage> {
        let mut query = operation::Entity::find()
            .filter(operation::Column::RuntimeId.eq(runtime_id))
            .order_by_desc(operation::Column::Id)
            .limit(limit + 1);
        if let Some(before) = before {
            query = query.filter(operation::Column::Id.lt(before));
        }
        let mut rows = query.all(&self.reads).await?;
        let has_next_page = rows.len() as u64 > limit;
        rows.truncate(limit as usize);
        let operations = rows.into_iter().map(operation_from_model).collect::<Result<_>>()?;
        Ok(OperationPage { operations, has_next_page })
    }

    /// When the operation entered each of its stages, in stage order.
    pub async fn stages_of(&self, operation_id: Uuid) -> Result<Vec<StageEntry>> {
        let rows = operation_stage::Entity::find()
            .filter(operation_stage::Column::OperationId.eq(operation_id))
            .all(&self.reads)
            .await?;
        let mut entries = rows
            .into_iter()
            .map(|row| {
                let stage = Stage::parse(&row.stage).ok_or_else(|| corrupt("stage", &row.stage))?;
                Ok(StageEntry { stage, entered_at: row.entered_at })
            })
            .collect::<Result<Vec<_>>>()?;
        entries.sort_by_key(|entry| entry.stage);
        Ok(entries)
    }

    /// `caller`'s record of `key`, when it was made at `not_before` or later (older ones have expired).
    pub async fn find_idempotency_record(
        &self,
        caller: &str,
        key: &str,
        not_before: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>> {
        let found = caller_idempotency_key::Entity::find_by_id((caller.to_owned(), key.to_owned()))
            .filter(caller_idempotency_key::Column::CreatedAt.gte(not_before))
            .one(&self.reads)
            .await?;
        Ok(found.map(|model| IdempotencyRecord {
            caller: model.caller,
            key: model.key,
            request_fingerprint: model.request_fingerprint,
            runtime_id: model.runtime_id,
            operation_id: model.operation_id,
        }))
    }

    /// Deletes `caller`'s expired record of `key` (made before `not_before`), so that the key can be used anew.
    pub async fn forget_expired_idempotency_record(
        &self,
        caller: &str,
        key: &str,
        not_before: DateTime<Utc>,
    ) -> Result<()> {
        caller_idempotency_key::Entity::delete_many()
            .filter(caller_idempotency_key::Column::Caller.eq(caller))
            .filter(caller_idempotency_key::Column::Key.eq(key))
            .filter(caller_idempotency_key::Column::CreatedAt.lt(not_before))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Deletes the idempotency records made before `cutoff`; returns how many.
    pub async fn delete_idempotency_records_before(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        let deleted = caller_idempotency_key::Entity::delete_many()
            .filter(caller_idempotency_key::Column::CreatedAt.lt(cutoff))
            .exec(&self.db)
            .await?;
        Ok(deleted.rows_affected)
    }

    /// Runtimes after the cursor in id order, optionally only those whose last operation is in `state`.
    pub async fn list_runtimes(
        &self,
        tenant: Option<&Tenant>,
        state: Option<OperationState>,
        label: Option<(&str, &str)>,
        after: Option<Uuid>,
        limit: u64,
    ) -> Result<RuntimePage> {
        let mut query = runtime::Entity::find()
            .select_also(operation::Entity)
            .join(JoinType::LeftJoin, last_operation_relation())
            .order_by_asc(runtime::Column::Id)
            .limit(limit + 1);
        if let Some(tenant) = tenant {
            query = query.filter(runtime::Column::Tenant.eq(tenant.as_str()));
        }
        if let Some(state) = state {
            query = query.filter(operation::Column::State.eq(state.as_str()));
        }
        if let Some(after) = after {
            query = query.filter(runtime::Column::Id.gt(after));
        }
        if let Some((key, value)) = label {
            // Label keys are validated (no quote can end the JSON path); both are bound as values.
            let condition = match self.db.get_database_backend() {
                DbBackend::Postgres => {
                    Expr::cust_with_values(r#""runtime"."labels" ->> $1 = $2"#, [key.to_owned(), value.to_owned()])
                }
                _ => Expr::cust_with_values(
                    r#"json_extract("runtime"."labels", '$."' || ? || '"') = ?"#,
                    [key.to_owned(), value.to_owned()],
                ),
            };
            query = query.filter(condition);
        }
        let mut rows = query.all(&self.reads).await?;
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
            .all(&self.reads)
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

/// One SQL statement with its parameters, numbered for the backend (`$n` on PostgreSQL, `?` in order on SQLite).
struct Sql {
    backend: DbBackend,
    text: String,
    values: Vec<sea_orm::Value>,
}

impl Sql {
    fn new(backend: DbBackend) -> Self {
        Sql { backend, text: String::new(), values: Vec::new() }
    }

    fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    fn param(&mut self, value: impl Into<sea_orm::Value>) -> &mut Self {
        self.values.push(value.into());
        match self.backend {
            DbBackend::Postgres => self.text.push_str(&format!("${}", self.values.len())),
            _ => self.text.push('?'),
        }
        self
    }

    /// `values` as a comma-separated list of parameters (inside an `IN (...)`).
    fn params<V: Into<sea_orm::Value>>(&mut self, values: impl IntoIterator<Item = V>) -> &mut Self {
        for (index, value) in values.into_iter().enumerate() {
            if index > 0 {
                self.push(", ");
            }
            self.param(value);
        }
        self
    }

    /// The database's clock: a claim that waited for a connection still gets its whole lease.
    fn now(&mut self) -> &mut Self {
        match self.backend {
            DbBackend::Postgres => self.push("CURRENT_TIMESTAMP"),
            // The format sqlx writes timestamps in (RFC 3339, UTC), so that stored values compare as text.
            _ => self.push("strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')"),
        }
    }

    fn now_plus(&mut self, duration: std::time::Duration) -> &mut Self {
        match self.backend {
            DbBackend::Postgres => {
                self.push("(CURRENT_TIMESTAMP + make_interval(secs => ").param(duration.as_secs_f64()).push("))")
            }
            _ => self
                .push("strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', ")
                .param(format!("+{:.3} seconds", duration.as_secs_f64()))
                .push(")"),
        }
    }

    fn statement(&self) -> Statement {
        Statement::from_sql_and_values(self.backend, self.text.clone(), self.values.clone())
    }
}

/// A worker's hold on an operation: `token` is new for every claim and fences every write of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub operation: Operation,
    pub token: Uuid,
}

impl Store {
    /// Claims the oldest Pending operation, or (with `resume_expired`) an InProgress one whose lease expired, except
    /// those in `exclude` (the runs this process still follows), marking it InProgress under a new claim token with
    /// a lease of `lease` from the database's clock, all in one statement. The claim uses an attempt when the
    /// operation was Pending, or when the previous holder recorded no progress and was not waiting for its Job.
    /// On PostgreSQL the row lock with SKIP LOCKED makes concurrent claims skip each other's rows; SQLite serialises
    /// writers.
    pub async fn claim_operation(
        &self,
        owner: &str,
        lease: std::time::Duration,
        resume_expired: bool,
        exclude: &[Uuid],
    ) -> Result<Option<Claim>> {
        let backend = self.db.get_database_backend();
        let token = Uuid::now_v7();
        let pending = OperationState::Pending.as_str();
        let in_progress = OperationState::InProgress.as_str();
        let mut sql = Sql::new(backend);
        sql.push("UPDATE operation SET state = ")
            .param(in_progress)
            .push(", owner = ")
            .param(owner)
            .push(", claim_token = ")
            .param(token)
            .push(", lease_expires_at = ")
            .now_plus(lease)
            .push(", started_at = COALESCE(started_at, ")
            .now()
            .push("), updated_at = ")
            .now()
            .push(", claims = claims + 1, attempts = attempts + CASE WHEN state = ")
            .param(pending)
            .push(" OR (NOT progress_since_claim AND stage <> ")
            .param(Stage::WaitForJob.as_str())
            .push(") THEN 1 ELSE 0 END, progress_since_claim = ")
            .param(false)
            .push(" WHERE id = (SELECT id FROM operation WHERE (state = ")
            .param(pending)
            .push(" OR (state = ")
            .param(in_progress)
            .push(" AND ")
            .param(resume_expired)
            .push(" AND lease_expires_at < ")
            .now()
            .push("))");
        // Only what this release can run: during a rolling update a newer replica may queue an operation of a type
        // (or leave one at a stage) that an older one does not know; the older one leaves it to the newer ones.
        sql.push(" AND operation_type IN (");
        sql.params(OperationType::ALL.iter().map(|operation_type| operation_type.as_str()));
        sql.push(") AND stage IN (");
        sql.params(Stage::ALL.iter().map(|stage| stage.as_str()));
        sql.push(")");
        if !exclude.is_empty() {
            sql.push(" AND id NOT IN (");
            sql.params(exclude.iter().copied());
            sql.push(")");
        }
        sql.push(" ORDER BY created_at, id LIMIT 1");
        if backend == DbBackend::Postgres {
            sql.push(" FOR UPDATE SKIP LOCKED");
        }
        sql.push(") RETURNING *");
        let claimed = operation::Entity::find().from_raw_sql(sql.statement()).one(&self.db).await?;
        claimed.map(|model| Ok(Claim { operation: operation_from_model(model)?, token })).transpose()
    }

    /// Extends a lease by `lease` from the database's clock; false when the claim is no longer current (another
    /// claim took over, or the operation ended).
    pub async fn extend_lease(&self, operation_id: Uuid, token: Uuid, lease: std::time::Duration) -> Result<bool> {
        let mut sql = Sql::new(self.db.get_database_backend());
        sql.push("UPDATE operation SET lease_expires_at = ")
            .now_plus(lease)
            .push(" WHERE id = ")
            .param(operation_id)
            .push(" AND claim_token = ")
            .param(token)
            .push(" AND state = ")
            .param(OperationState::InProgress.as_str());
        Ok(self.db.execute_raw(sql.statement()).await?.rows_affected() == 1)
    }

    /// Cancels an operation for `caller`: a queued one fails at once (reason `cancelled`); for a running one the
    /// request is recorded, and its worker stops the run.
    pub async fn cancel_operation(&self, operation_id: Uuid, caller: &str) -> Result<Cancel> {
        let now = now();
        let error = LastError::cancelled_by(caller);
        let txn = self.db.begin().await?;
        let queued = operation::Entity::update_many()
            .col_expr(operation::Column::State, Expr::value(OperationState::Failed.as_str()))
            .col_expr(operation::Column::Stage, Expr::value(Stage::Done.as_str()))
            .col_expr(operation::Column::Message, Expr::value(error.err_message.clone()))
            .col_expr(operation::Column::LastErrorMessage, Expr::value(error.err_message.clone()))
            .col_expr(operation::Column::LastErrorReason, Expr::value(error.reason.as_str()))
            .col_expr(operation::Column::LastErrorComponent, Expr::value(error.component.as_str()))
            .col_expr(operation::Column::FinishedAt, Expr::value(now))
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .filter(operation::Column::Id.eq(operation_id))
            .filter(operation::Column::State.eq(OperationState::Pending.as_str()))
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

    /// Who asked to cancel the operation, once somebody did.
    pub async fn cancel_requested_by(&self, operation_id: Uuid) -> Result<Option<String>> {
        let requested: Option<Option<String>> = operation::Entity::find_by_id(operation_id)
            .select_only()
            .column(operation::Column::CancelRequestedBy)
            .into_tuple()
            .one(&self.db)
            .await?;
        Ok(requested.flatten())
    }

    /// Records progress of a claimed operation; false when the claim is no longer current (the caller must stop).
    pub async fn record_progress(&self, operation: &Operation, token: Uuid, progress: Progress) -> Result<bool> {
        let now = now();
        let no_text = || Expr::value(Option::<String>::None);
        let mut update = operation::Entity::update_many()
            .col_expr(operation::Column::UpdatedAt, Expr::value(now))
            .filter(operation::Column::Id.eq(operation.id))
            .filter(operation::Column::ClaimToken.eq(token))
            .filter(operation::Column::State.eq(OperationState::InProgress.as_str()));
        // What a successful run changes of its runtime, written in the same transaction.
        let mut runtime_update = None;
        let entered = match &progress {
            Progress::Stage { stage, .. } | Progress::Failing { stage, .. } | Progress::Finished { stage, .. } => {
                Some(*stage)
            }
            Progress::Retrying { .. } => None,
        };
        match progress {
            Progress::Stage { stage, message } => {
                update = update
                    .col_expr(operation::Column::Stage, Expr::value(stage.as_str()))
                    .col_expr(operation::Column::Message, Expr::value(message))
                    .col_expr(operation::Column::ProgressSinceClaim, Expr::value(true))
                    .col_expr(operation::Column::LastErrorMessage, no_text())
                    .col_expr(operation::Column::LastErrorReason, no_text())
                    .col_expr(operation::Column::LastErrorComponent, no_text());
            }
            Progress::Retrying { message, error } => {
                update = update
                    .col_expr(operation::Column::Message, Expr::value(message))
                    .col_expr(operation::Column::LastErrorMessage, Expr::value(error.err_message))
                    .col_expr(operation::Column::LastErrorReason, Expr::value(error.reason.as_str()))
                    .col_expr(operation::Column::LastErrorComponent, Expr::value(error.component.as_str()));
            }
            Progress::Failing { stage, message, error } => {
                update = update
                    .col_expr(operation::Column::Stage, Expr::value(stage.as_str()))
                    .col_expr(operation::Column::Message, Expr::value(message))
                    .col_expr(operation::Column::ProgressSinceClaim, Expr::value(true))
                    .col_expr(operation::Column::LastErrorMessage, Expr::value(error.err_message))
                    .col_expr(operation::Column::LastErrorReason, Expr::value(error.reason.as_str()))
                    .col_expr(operation::Column::LastErrorComponent, Expr::value(error.component.as_str()));
            }
            Progress::Finished { state, stage, message } => {
                let deleted = operation.operation_type == OperationType::Deprovision;
                // The runtime shows what was last applied: an upgrade's configuration only once it succeeded.
                let applied_config = operation.target_config.as_ref();
                let hibernated = operation.operation_type.hibernated_after();
                let changes_runtime = deleted || applied_config.is_some() || hibernated.is_some();
                if state == OperationState::Succeeded && !operation.dry_run && changes_runtime {
                    let mut change = runtime::Entity::update_many()
                        .col_expr(runtime::Column::UpdatedAt, Expr::value(now))
                        .filter(runtime::Column::Id.eq(operation.runtime_id));
                    if deleted {
                        change = change.col_expr(runtime::Column::DeletedAt, Expr::value(now));
                    }
                    if let Some(config) = applied_config {
                        let config = serde_json::to_value(config).map_err(|error| Error::Corrupt(error.to_string()))?;
                        change = change.col_expr(runtime::Column::ClusterConfig, Expr::value(config));
                    }
                    if let Some(hibernated) = hibernated {
                        change = change.col_expr(runtime::Column::Hibernated, Expr::value(hibernated));
                    }
                    runtime_update = Some(change);
                }
                if state == OperationState::Succeeded {
                    update = update
                        .col_expr(operation::Column::LastErrorMessage, no_text())
                        .col_expr(operation::Column::LastErrorReason, no_text())
                        .col_expr(operation::Column::LastErrorComponent, no_text());
                }
                update = update
                    .col_expr(operation::Column::State, Expr::value(state.as_str()))
                    .col_expr(operation::Column::Stage, Expr::value(stage.as_str()))
                    .col_expr(operation::Column::Message, Expr::value(message))
                    .col_expr(operation::Column::FinishedAt, Expr::value(now))
                    .col_expr(operation::Column::Owner, no_text())
                    .col_expr(operation::Column::ClaimToken, Expr::value(Option::<Uuid>::None))
                    .col_expr(operation::Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None));
            }
        }
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

    /// Records what the run's plan changed; fenced by the claim like every write of a run.
    pub async fn record_plan_summary(&self, operation_id: Uuid, token: Uuid, summary: &PlanSummary) -> Result<bool> {
        let updated = operation::Entity::update_many()
            .col_expr(operation::Column::PlanSummary, Expr::value(serde_json::json!(summary).to_string()))
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

    /// The digest of the kubeconfig the runtime's latest checked apply published: the only content of its outputs
    /// Secret that may be served.
    pub async fn checked_kubeconfig_digest(&self, runtime_id: Uuid) -> Result<Option<String>> {
        Ok(operation::Entity::find()
            .select_only()
            .column(operation::Column::KubeconfigSha256)
            .filter(operation::Column::RuntimeId.eq(runtime_id))
            .filter(operation::Column::KubeconfigSha256.is_not_null())
            .order_by_desc(operation::Column::CreatedAt)
            .into_tuple::<String>()
            .one(&self.reads)
            .await?)
    }

    /// Keeps a run's logs, gzip-compressed. The first archive of an operation stays: a clean-up step that runs
    /// again after a restart (when the pod may be gone) adds nothing.
    pub async fn archive_run_logs(&self, operation_id: Uuid, logs: &[KeptLog]) -> Result<()> {
        let archived_at = now();
        let rows: Vec<_> = logs
            .iter()
            .map(|log| operation_log::ActiveModel {
                operation_id: sea_orm::Set(operation_id),
                container: sea_orm::Set(log.container.clone()),
                content: sea_orm::Set(gzip(&log.text)),
                printed_bytes: sea_orm::Set(log.printed_bytes as i64),
                archived_at: sea_orm::Set(archived_at),
            })
            .collect();
        if rows.is_empty() {
            return Ok(());
        }
        operation_log::Entity::insert_many(rows).on_conflict_do_nothing().exec(&self.db).await?;
        Ok(())
    }

    /// Whether the operation's logs are archived.
    pub async fn run_logs_archived(&self, operation_id: Uuid) -> Result<bool> {
        let count = operation_log::Entity::find()
            .filter(operation_log::Column::OperationId.eq(operation_id))
            .count(&self.reads)
            .await?;
        Ok(count > 0)
    }

    /// The archived logs of an operation by container, in container order; `None` when none were archived. Each
    /// log's size is taken from `budget` before it is decompressed ([`Error::OverBudget`] when too little is
    /// left), and decompression never goes past it.
    pub async fn run_logs(&self, operation_id: Uuid, budget: &LogBudget) -> Result<Option<Vec<KeptLog>>> {
        let rows = operation_log::Entity::find()
            .filter(operation_log::Column::OperationId.eq(operation_id))
            .order_by_asc(operation_log::Column::Container)
            .all(&self.reads)
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let logs = rows
            .into_iter()
            .map(|row| {
                let damaged = |problem: String| {
                    Error::Corrupt(format!("the archived {} log of operation {operation_id}: {problem}", row.container))
                };
                let printed_bytes = usize::try_from(row.printed_bytes)
                    .map_err(|_| corrupt("printed_bytes", &row.printed_bytes.to_string()))?;
                let size = gzip_size(&row.content).ok_or_else(|| damaged("no gzip trailer".to_owned()))?;
                if !budget.spend(size) {
                    return Err(Error::OverBudget { max_bytes: budget.total() });
                }
                let text = gunzip(&row.content, size)
                    .map_err(|error| damaged(error.to_string()))?
                    .ok_or_else(|| damaged(format!("longer than the {size} bytes its trailer says")))?;
                Ok(KeptLog { text, printed_bytes, container: row.container })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(logs))
    }

    /// Deletes the logs archived before `cutoff` (the retention clean-up); returns how many container logs went.
    pub async fn delete_run_logs_archived_before(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        let deleted = operation_log::Entity::delete_many()
            .filter(operation_log::Column::ArchivedAt.lt(cutoff))
            .exec(&self.db)
            .await?;
        Ok(deleted.rows_affected)
    }

    /// Gives a claim back on shutdown: the operation stays InProgress with an expired lease, so the next process
    /// resumes it at once instead of waiting for the lease to run out, and that resume uses no attempt.
    pub async fn release(&self, operation_id: Uuid, token: Uuid) -> Result<()> {
        let mut sql = Sql::new(self.db.get_database_backend());
        sql.push("UPDATE operation SET lease_expires_at = ")
            .now()
            .push(", progress_since_claim = ")
            .param(true)
            .push(" WHERE id = ")
            .param(operation_id)
            .push(" AND claim_token = ")
            .param(token);
        self.db.execute_raw(sql.statement()).await?;
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
        preview: runtime.preview,
        hibernated: runtime.hibernated,
        state_bucket: Some(runtime.state_bucket.clone()),
        tenant: runtime.tenant.as_ref().map(|tenant| tenant.as_str().to_owned()),
    })
}

fn runtime_from_model(model: runtime::Model) -> Result<Runtime> {
    let labels: Labels = serde_json::from_value(model.labels)
        .map_err(|error| Error::Corrupt(format!("runtime {} labels: {error}", model.id)))?;
    let cluster_config: ClusterConfig = serde_json::from_value(model.cluster_config)
        .map_err(|error| Error::Corrupt(format!("runtime {} cluster config: {error}", model.id)))?;
    // Runtimes recorded before they recorded their bucket keep the name they were given.
    let state_bucket = model
        .state_bucket
        .unwrap_or_else(|| state_bucket::legacy_state_bucket_name(&cluster_config.environment, &model.name));
    let tenant = model
        .tenant
        .map(|tenant| Tenant::parse(&tenant))
        .transpose()
        .map_err(|error| Error::Corrupt(format!("runtime {} tenant: {error}", model.id)))?;
    Ok(Runtime {
        id: model.id,
        name: model.name,
        description: model.description,
        labels,
        last_operation_id: model.last_operation_id,
        created_at: model.created_at,
        updated_at: model.updated_at,
        deleted_at: model.deleted_at,
        state_bucket,
        tenant,
        preview: model.preview,
        hibernated: model.hibernated,
        cluster_config,
    })
}

fn operation_to_model(operation: &Operation) -> Result<operation::Model> {
    let last_error = operation.last_error.as_ref();
    let target_config = operation
        .target_config
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .map_err(|error| Error::Corrupt(error.to_string()))?;
    Ok(operation::Model {
        id: operation.id,
        runtime_id: operation.runtime_id,
        operation_type: operation.operation_type.as_str().to_owned(),
        state: operation.state.as_str().to_owned(),
        stage: operation.stage.as_str().to_owned(),
        message: operation.message.clone(),
        last_error_message: last_error.map(|error| error.err_message.clone()),
        last_error_reason: last_error.map(|error| error.reason.as_str().to_owned()),
        last_error_component: last_error.map(|error| error.component.as_str().to_owned()),
        attempts: operation.attempts,
        claims: operation.claims,
        terraform_provider: operation.terraform_provider.as_ref().map(ProviderVersion::to_string),
        plan_summary: operation.plan_summary.as_ref().map(|summary| serde_json::json!(summary).to_string()),
        target_config,
        dry_run: operation.dry_run,
        requested_by: operation.requested_by.clone(),
        cancel_requested_by: operation.cancel_requested_by.clone(),
        kubeconfig_sha256: None,
        claim_token: None,
        progress_since_claim: false,
        owner: None,
        lease_expires_at: None,
        created_at: operation.created_at,
        started_at: operation.started_at,
        updated_at: operation.updated_at,
        finished_at: operation.finished_at,
    })
}

fn operation_from_model(model: operation::Model) -> Result<Operation> {
    let last_error = match (model.last_error_message, model.last_error_reason, model.last_error_component) {
        (Some(err_message), Some(reason), Some(component)) => Some(LastError {
            err_message,
            reason: FailureReason::parse(&reason).ok_or_else(|| corrupt("failure reason", &reason))?,
            component: Component::parse(&component).ok_or_else(|| corrupt("component", &component))?,
        }),
        (None, _, _) => None,
        (Some(_), _, _) => {
            return Err(Error::Corrupt(format!("operation {} has an error without reason or component", model.id)));
        }
    };
    Ok(Operation {
        id: model.id,
        runtime_id: model.runtime_id,
        operation_type: type_from_str(&model.operation_type)?,
        state: state_from_str(&model.state)?,
        stage: Stage::parse(&model.stage).ok_or_else(|| corrupt("stage", &model.stage))?,
        message: model.message,
        last_error,
        attempts: model.attempts,
        claims: model.claims,
        terraform_provider: model.terraform_provider.as_deref().map(provider_from_str).transpose()?,
        plan_summary: model
            .plan_summary
            .as_deref()
            .map(|summary| serde_json::from_str(summary).map_err(|_| corrupt("plan summary", summary)))
            .transpose()?,
        target_config: model
            .target_config
            .map(|config| {
                serde_json::from_value(config)
                    .map_err(|error| Error::Corrupt(format!("operation {} target config: {error}", model.id)))
            })
            .transpose()?,
        dry_run: model.dry_run,
        requested_by: model.requested_by,
        cancel_requested_by: model.cancel_requested_by,
        created_at: model.created_at,
        started_at: model.started_at,
        updated_at: model.updated_at,
        finished_at: model.finished_at,
    })
}

/// Records that the operation entered `stage`, in the caller's transaction; a stage entered again (a resumed run)
/// keeps its first time.
async fn enter_stage(
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

fn corrupt(what: &str, value: &str) -> Error {
    Error::Corrupt(format!("unknown {what} {value:?}"))
}

/// `hashicorp/aws 6.47.0`, as `ProviderVersion`'s `Display` writes it.
fn provider_from_str(value: &str) -> Result<ProviderVersion> {
    let (source, version) = value.split_once(' ').ok_or_else(|| corrupt("Terraform provider", value))?;
    let provider = ProviderVersion { source: source.to_owned(), version: version.to_owned() };
    if !provider.is_exact() {
        return Err(corrupt("Terraform provider", value));
    }
    Ok(provider)
}

fn type_from_str(value: &str) -> Result<OperationType> {
    OperationType::parse(value).ok_or_else(|| corrupt("operation type", value))
}

fn state_from_str(value: &str) -> Result<OperationState> {
    OperationState::parse(value).ok_or_else(|| corrupt("operation state", value))
}

/// The current time, truncated to microseconds: both databases store that precision, so values read back
/// compare equal to the ones written.
fn gzip(text: &str) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).and_then(|()| encoder.finish()).expect("compressing into memory cannot fail")
}

/// The size a gzip member says its content has (its trailer's ISIZE: the length modulo 2^32; kept logs are far
/// smaller), read without decompressing.
fn gzip_size(content: &[u8]) -> Option<usize> {
    let trailer: [u8; 4] = content.get(content.len().checked_sub(4)?..)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(trailer)).ok()
}

/// The decompressed text, or `None` when it is longer than `max_bytes` (it is not decompressed further).
fn gunzip(content: &[u8], max_bytes: usize) -> std::io::Result<Option<String>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::GzDecoder::new(content).take(limit).read_to_end(&mut bytes)?;
    if bytes.len() > max_bytes {
        return Ok(None);
    }
    String::from_utf8(bytes).map(Some).map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}

pub fn now() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}
