//! Claims and leases: which worker runs an operation, until when, written in raw SQL that reads the database's
//! clock.

use sea_orm::{ConnectionTrait, DbBackend, EntityTrait, Statement};
use uuid::Uuid;

use super::convert::operation_from_model;
use super::entity::operation;
use super::{Result, Store};
use crate::domain::run::Stage;
use crate::domain::{Operation, OperationState, OperationType};

/// A worker's hold on an operation: `token` is new for every claim and fences every write of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub operation: Operation,
    pub token: Uuid,
}

/// A claim whose lease was renewed, and who asked to cancel its operation (any process may record that).
#[derive(Debug, Clone, PartialEq)]
pub struct RenewedLease {
    pub operation_id: Uuid,
    pub cancel_requested_by: Option<String>,
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

    /// `column` is one of `values`: on PostgreSQL one array parameter, so that the statement's text (and its
    /// prepared plan) is the same whatever their number; on SQLite, which has no arrays, a list of parameters.
    fn one_of(&mut self, column: &str, values: &[Uuid]) -> &mut Self {
        self.push("(").push(column);
        match self.backend {
            DbBackend::Postgres => self.push(" = ANY(").param(values.to_vec()),
            _ => self.push(" IN (").params(values.iter().copied()),
        };
        self.push("))")
    }

    /// `(first, second)` is one of `pairs`: on PostgreSQL two array parameters unnested side by side, so that
    /// the statement's text is the same whatever their number; on SQLite a list of row values.
    fn pairs_among(&mut self, first: &str, second: &str, pairs: &[(Uuid, Uuid)]) -> &mut Self {
        self.push("(").push(first).push(", ").push(second).push(") IN (");
        match self.backend {
            DbBackend::Postgres => {
                let (firsts, seconds): (Vec<Uuid>, Vec<Uuid>) = pairs.iter().copied().unzip();
                self.push("SELECT * FROM unnest(").param(firsts).push("::uuid[], ").param(seconds).push("::uuid[])");
            }
            _ => {
                self.push("VALUES ");
                for (index, (first, second)) in pairs.iter().enumerate() {
                    self.push(if index > 0 { ", (" } else { "(" }).param(*first).push(", ").param(*second).push(")");
                }
            }
        }
        self.push(")")
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

impl Store {
    /// Claims up to `limit` of the oldest Pending operations, or (with `enqueue_in_progress`) InProgress ones whose
    /// lease expired, except those in `exclude` (the runs this process still follows), marking them InProgress
    /// under a new claim token with a lease of `lease` from the database's clock, all in one statement (one commit
    /// for a burst's claims, not one each). The claims of one statement share their token: a token is still new
    /// for every claim of an operation, and every write of a run is fenced by its operation's id and the token.
    /// A claim uses an attempt when the operation was Pending, or when the previous holder recorded no progress
    /// and was not waiting for its Job. On PostgreSQL the row locks with SKIP LOCKED make concurrent claims skip
    /// each other's rows; SQLite serialises writers. The claims come oldest first.
    pub async fn claim_operations(
        &self,
        owner: &str,
        lease: std::time::Duration,
        enqueue_in_progress: bool,
        exclude: &[Uuid],
        limit: u64,
    ) -> Result<Vec<Claim>> {
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
            .push(" WHERE id IN (SELECT id FROM operation WHERE (state = ")
            .param(pending)
            .push(" OR (state = ")
            .param(in_progress)
            .push(" AND ")
            .param(enqueue_in_progress)
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
            sql.push(" AND NOT ").one_of("id", exclude);
        }
        sql.push(" ORDER BY created_at, id LIMIT ").param(i64::try_from(limit).unwrap_or(i64::MAX));
        if backend == DbBackend::Postgres {
            sql.push(" FOR UPDATE SKIP LOCKED");
        }
        sql.push(") RETURNING *");
        let claimed = operation::Entity::find().from_raw_sql(sql.statement()).all(&self.db).await?;
        let mut claims = claimed
            .into_iter()
            .map(|model| Ok(Claim { operation: operation_from_model(model)?, token }))
            .collect::<Result<Vec<_>>>()?;
        claims.sort_by_key(|claim| (claim.operation.created_at, claim.operation.id));
        Ok(claims)
    }

    /// Extends every lease in `claims` (operation id and claim token) by `lease` from the database's clock, all in
    /// one statement whatever their number, and returns the claims still current with their cancel requests. A
    /// claim missing from the answer is no longer current: another claim took over, or the operation ended.
    pub async fn renew_leases(&self, claims: &[(Uuid, Uuid)], lease: std::time::Duration) -> Result<Vec<RenewedLease>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(self.db.get_database_backend());
        sql.push("UPDATE operation SET lease_expires_at = ")
            .now_plus(lease)
            .push(" WHERE state = ")
            .param(OperationState::InProgress.as_str())
            .push(" AND ")
            .pairs_among("id", "claim_token", claims);
        sql.push(" RETURNING id, cancel_requested_by");
        let rows = self.db.query_all_raw(sql.statement()).await?;
        rows.iter()
            .map(|row| {
                Ok(RenewedLease {
                    operation_id: row.try_get("", "id")?,
                    cancel_requested_by: row.try_get("", "cancel_requested_by")?,
                })
            })
            .collect()
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
