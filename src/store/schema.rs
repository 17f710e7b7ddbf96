//! The schema a replica finds: migrations it applies (or, when another step runs them, only checks), and those of a
//! newer release it runs beside, as during a rolling update or a rollback (migrations are additive across one
//! release, so a replica of release N-1 works on the schema of N).

use migrations::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, Statement, TransactionTrait};

use super::{Error, Result};

/// What a replica does with migrations of its own release that the database lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrations {
    /// Applies them at start-up (the default; one replica at a time on PostgreSQL).
    Apply,
    /// Refuses to start without them: a separate step (`provisioner migrate`, the chart's migration Job) runs them
    /// once per upgrade.
    Check,
}

/// Any constant works as long as nothing else in the database takes the same advisory lock.
const MIGRATION_LOCK: i64 = 0x6b75_6265_6f70_6572;

/// Brings the schema to this release's, or checks that it is there; migrations of a newer release are left alone.
pub(super) async fn prepare(db: &DatabaseConnection, mode: Migrations) -> Result<()> {
    // In one transaction (both databases' DDL is transactional), so an upgrade is applied whole or not at all.
    let transaction = db.begin().await?;
    if db.get_database_backend() == DbBackend::Postgres {
        // Replicas starting together apply the migrations one after the other, not racing on the same DDL.
        let lock = format!("SELECT pg_advisory_xact_lock({MIGRATION_LOCK})");
        transaction.execute_raw(Statement::from_string(DbBackend::Postgres, lock)).await?;
    }
    compare(&transaction, mode).await?;
    Ok(transaction.commit().await?)
}

async fn compare(db: &DatabaseTransaction, mode: Migrations) -> Result<()> {
    let applied: Vec<String> =
        Migrator::get_migration_models(db).await?.into_iter().map(|model| model.version).collect();
    let known: Vec<String> = Migrator::migrations().iter().map(|migration| migration.name().to_owned()).collect();
    let newer: Vec<&String> = applied.iter().filter(|version| !known.contains(version)).collect();
    let pending: Vec<&String> = known.iter().filter(|version| !applied.contains(version)).collect();
    match (pending.is_empty(), newer.is_empty()) {
        (true, true) => Ok(()),
        (true, false) => {
            tracing::info!(?newer, "the database has migrations of a newer release; this replica runs beside it");
            Ok(())
        }
        (false, false) => Err(Error::Schema(format!(
            "the database lacks migrations {pending:?} of this release but has {newer:?} of a newer one: \
             this release is older than N-1 of the database"
        ))),
        (false, true) if mode == Migrations::Check => Err(Error::Schema(format!(
            "the database lacks migrations {pending:?} of this release; run `provisioner migrate` first"
        ))),
        (false, true) => Ok(Migrator::up(db, None).await?),
    }
}
