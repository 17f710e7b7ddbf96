//! Durable storage of runtimes and operations with sea-orm, on PostgreSQL or SQLite.
//!
//! Invariants live in the database itself (see the migrations crate): one active operation per runtime and unique
//! names among live runtimes are partial unique indexes, so two concurrent requests cannot both win.

mod approvals;
mod certificates;
mod claims;
mod convert;
mod entity;
mod idempotency;
mod managed_changes;
mod operations;
mod prepared;
mod progress;
mod run_logs;
mod runtime_states;
mod runtimes;
mod schema;
mod statement_metrics;

use chrono::{DateTime, Utc};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr, SqlErr};
use uuid::Uuid;

pub use certificates::DueForCertificates;
pub use claims::{Claim, RenewedLease};
pub use idempotency::IdempotencyRecord;
pub use operations::{Cancel, OperationCount};
pub use progress::Progress;
pub use run_logs::ArchivedLog;
pub use runtimes::{RuntimeFilter, RuntimeRecord};
pub use schema::Migrations;
pub use statement_metrics::StatementMetrics;

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
    /// A deprovisioning of a runtime whose deletion protection is on (checked in the statement that queues it).
    #[error("the runtime {0} has deletion protection")]
    DeletionProtected(Uuid),
    #[error("stored data is not readable: {0}")]
    Corrupt(String),
    /// The database's schema does not fit this release ([`schema`]).
    #[error("database schema: {0}")]
    Schema(String),
    #[error("database error: {0}")]
    Database(#[from] DbErr),
}

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
            sea_orm::RuntimeErr::SqlxError(sqlx) => match &**sqlx {
                sea_orm::sqlx::Error::Io(_)
                | sea_orm::sqlx::Error::PoolTimedOut
                | sea_orm::sqlx::Error::PoolClosed
                | sea_orm::sqlx::Error::Tls(_)
                | sea_orm::sqlx::Error::WorkerCrashed => true,
                sea_orm::sqlx::Error::Database(refusal) => refusal.code().is_some_and(|code| ends_the_session(&code)),
                _ => false,
            },
            _ => false,
        }
    }
}

/// Whether an SQLSTATE says the server ended or refused the session rather than the statement: a connection
/// exception (class 08), or a shutdown or restart (57P01-57P03, also sent on a connection that was in the pool
/// while an administrator ended it).
fn ends_the_session(sqlstate: &str) -> bool {
    sqlstate.starts_with("08") || matches!(sqlstate, "57P01" | "57P02" | "57P03")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How long an SQLite connection waits for another process's write lock before it reports SQLITE_BUSY. Within this
/// process writes never wait for it: they share one connection.
const SQLITE_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A pooled connection idle this long is pinged before it is handed out; one in use more recently is not. The
/// library's default pings on every acquire, a round trip to the database before each statement (on PostgreSQL
/// over TLS, a quarter of a status read's CPU). A connection that breaks while in use is found anyway: the pool
/// pings every connection as it is returned, and discards it when that fails.
const PING_IF_IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone)]
pub struct Store {
    /// Every write goes here. On SQLite this pool has one connection: SQLite has one writer at a time, and a queue
    /// in the pool is fair and bounded by the acquire timeout, where competing connections would sleep in
    /// SQLite's busy handler and could fail with SQLITE_BUSY.
    db: DatabaseConnection,
    /// Reads. On SQLite a pool of its own, so that in WAL mode readers never queue behind the writer; on
    /// PostgreSQL the same pool as `db`.
    reads: DatabaseConnection,
    prepared: prepared::Prepared,
}

impl Store {
    /// Connects and applies pending migrations, so a new database is ready on first start. SQLite is opened as a
    /// server database: WAL journal (readers and the writer do not block each other), `synchronous=NORMAL`
    /// (durable across process crashes in WAL mode; a power loss may lose the last transactions, never corrupt
    /// the file), a busy timeout, and foreign keys on.
    pub async fn connect(url: &str, max_connections: u32, acquire_timeout: std::time::Duration) -> Result<Self> {
        Self::connect_with(url, max_connections, acquire_timeout, Migrations::Apply, &StatementMetrics::default()).await
    }

    /// [`Store::connect`], applying this release's missing migrations or only checking for them ([`Migrations`]),
    /// with every statement counted in `statements`.
    pub async fn connect_with(
        url: &str,
        max_connections: u32,
        acquire_timeout: std::time::Duration,
        migrations: Migrations,
        statements: &StatementMetrics,
    ) -> Result<Self> {
        let options = |max_connections: u32| {
            let mut options = ConnectOptions::new(url.to_owned());
            // Without a short acquire timeout a database outage makes every request hang for the library's 30 s.
            options
                .max_connections(max_connections)
                .acquire_timeout(acquire_timeout)
                .connect_timeout(acquire_timeout)
                .test_before_acquire_if_idle_for(PING_IF_IDLE_FOR)
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
            let mut db = Database::connect(options(1)).await?;
            schema::prepare(&db, migrations).await?;
            let mut reads = Database::connect(options(max_connections)).await?;
            statements.observe(&mut db);
            statements.observe(&mut reads);
            let prepared = prepared::Prepared::for_backend(db.get_database_backend());
            return Ok(Store { db, reads, prepared });
        }
        let mut db = Database::connect(options(max_connections)).await?;
        schema::prepare(&db, migrations).await?;
        statements.observe(&mut db);
        let prepared = prepared::Prepared::for_backend(db.get_database_backend());
        Ok(Store { reads: db.clone(), db, prepared })
    }

    pub async fn ping(&self) -> Result<()> {
        Ok(self.reads.ping().await?)
    }
}

/// Maps a unique-constraint violation of one insert to the domain meaning of that table's constraint.
fn unique_violation_as(error: DbErr, meaning: Error) -> Error {
    match error.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => meaning,
        _ => Error::Database(error),
    }
}

/// Rows read with a limit of `limit + 1`: the page (at most `limit` of them), and whether another page follows.
fn page<T>(mut rows: Vec<T>, limit: u64) -> (Vec<T>, bool) {
    let has_next_page = rows.len() as u64 > limit;
    rows.truncate(limit as usize);
    (rows, has_next_page)
}

/// The current time, truncated to microseconds: both databases store that precision, so values read back
/// compare equal to the ones written.
pub fn now() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::ends_the_session;

    #[test]
    fn a_connection_exception_or_a_shutdown_ends_the_session_and_a_refused_statement_does_not() {
        for code in ["08006", "08001", "57P01", "57P02", "57P03"] {
            assert!(ends_the_session(code), "{code}");
        }
        for code in ["23505", "40001", "57014", "42P01"] {
            assert!(!ends_the_session(code), "{code}");
        }
    }
}
