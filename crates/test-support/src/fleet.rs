//! A fleet's history on PostgreSQL, for the tests and the bench that measure a large fleet: finished upgrades of
//! every stored runtime, older than its provisioning, added in one statement (tens of thousands of them in
//! seconds; the runtimes themselves go through the store's insert path).

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr};

/// Adds `per_runtime` finished upgrades to every runtime of `database` (PostgreSQL), then fresh statistics.
pub async fn add_finished_upgrades(database: &DatabaseConnection, per_runtime: usize) -> Result<(), DbErr> {
    let history = format!(
        "INSERT INTO operation (id, runtime_id, operation_type, state, stage, message, attempts, claims, \
         progress_since_claim, dry_run, created_at, updated_at, finished_at) \
         SELECT gen_random_uuid(), runtime.id, 'Upgrade', 'Succeeded', 'Done', 'upgraded', 1, 1, true, false, \
         runtime.created_at - make_interval(days => n), runtime.created_at - make_interval(days => n), \
         runtime.created_at - make_interval(days => n) \
         FROM runtime CROSS JOIN generate_series(1, {per_runtime}) AS n"
    );
    database.execute_unprepared(&history).await?;
    database.execute_unprepared("ANALYZE").await?;
    Ok(())
}
