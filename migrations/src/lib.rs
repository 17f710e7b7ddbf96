//! Database schema of the provisioner, shared by the service (which migrates at start-up) and the `migrations`
//! binary. Every migration is a list of statements per backend, so the PostgreSQL schema file in
//! `assets/database/provisioner.sql` is generated from exactly what the migrations execute.
#![forbid(unsafe_code)]

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

mod m20261129_000001_create_runtime_and_operation;
mod m20261201_000001_claim_tokens;
mod m20261202_000001_operation_run_record;
mod m20261203_000001_day_two;
mod m20261204_000001_hibernation;
mod m20261205_000001_operation_history;
mod m20261206_000001_cancel;
mod m20261207_000001_run_logs;
mod m20261208_000001_outputs_provenance;
mod m20261209_000001_runtime_state_bucket;
mod m20261210_000001_caller_idempotency_keys;
mod m20261211_000001_runtime_tenant;
mod m20261212_000001_operation_retry_of;
mod m20261213_000001_runtime_deletion_protection;
mod m20261214_000001_plan_approval;
mod m20261215_000001_operation_forced;
mod m20261216_000001_operation_approval_policy;
mod m20261217_000001_operation_trace_parent;
mod m20261218_000001_runtime_labels_index;
mod m20261219_000001_runtime_name_per_tenant;
mod m20261220_000001_api_allowed_cidrs;
mod m20261221_000001_runtime_managed_by;
mod m20261222_000001_managed_operation_changes;
mod m20261223_000001_chained_upgrades;
mod m20261224_000001_kubeconfig_expiry;
mod m20261225_000001_certificates;

pub use sea_orm_migration::MigratorTrait;

pub struct Migrator;

/// A migration described as plain SQL statements for a backend, so they can both be executed and printed.
pub(crate) trait SchemaStatements {
    fn statements(&self, backend: DbBackend) -> Vec<String>;
}

/// A migration that runs and that the schema file shows.
pub(crate) trait Listed: MigrationTrait + SchemaStatements {}

impl<T: MigrationTrait + SchemaStatements> Listed for T {}

/// Every migration, in order: what runs and what `assets/database/provisioner.sql` shows come from this one list.
fn all() -> Vec<Box<dyn Listed>> {
    vec![
        Box::new(m20261129_000001_create_runtime_and_operation::Migration),
        Box::new(m20261201_000001_claim_tokens::Migration),
        Box::new(m20261202_000001_operation_run_record::Migration),
        Box::new(m20261203_000001_day_two::Migration),
        Box::new(m20261204_000001_hibernation::Migration),
        Box::new(m20261205_000001_operation_history::Migration),
        Box::new(m20261206_000001_cancel::Migration),
        Box::new(m20261207_000001_run_logs::Migration),
        Box::new(m20261208_000001_outputs_provenance::Migration),
        Box::new(m20261209_000001_runtime_state_bucket::Migration),
        Box::new(m20261210_000001_caller_idempotency_keys::Migration),
        Box::new(m20261211_000001_runtime_tenant::Migration),
        Box::new(m20261212_000001_operation_retry_of::Migration),
        Box::new(m20261213_000001_runtime_deletion_protection::Migration),
        Box::new(m20261214_000001_plan_approval::Migration),
        Box::new(m20261215_000001_operation_forced::Migration),
        Box::new(m20261216_000001_operation_approval_policy::Migration),
        Box::new(m20261217_000001_operation_trace_parent::Migration),
        Box::new(m20261218_000001_runtime_labels_index::Migration),
        Box::new(m20261219_000001_runtime_name_per_tenant::Migration),
        Box::new(m20261220_000001_api_allowed_cidrs::Migration),
        Box::new(m20261221_000001_runtime_managed_by::Migration),
        Box::new(m20261222_000001_managed_operation_changes::Migration),
        Box::new(m20261223_000001_chained_upgrades::Migration),
        Box::new(m20261224_000001_kubeconfig_expiry::Migration),
        Box::new(m20261225_000001_certificates::Migration),
    ]
}

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        all().into_iter().map(|migration| migration as Box<dyn MigrationTrait>).collect()
    }
}

/// Implements `MigrationTrait` for a migration given as [`SchemaStatements`]: its statements run in one
/// transaction. (Migrations that landed before this macro spell the same out by hand; they are never edited.)
#[macro_export]
macro_rules! run_statements {
    ($migration:ty) => {
        #[async_trait::async_trait]
        impl MigrationTrait for $migration {
            async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
                $crate::execute_all(manager, self.statements(manager.get_database_backend())).await
            }

            fn use_transaction(&self) -> Option<bool> {
                Some(true)
            }
        }
    };
}

/// Runs the statements of one migration inside the migration's transaction.
pub(crate) async fn execute_all(manager: &SchemaManager<'_>, statements: Vec<String>) -> Result<(), DbErr> {
    let connection = manager.get_connection();
    for statement in statements {
        connection.execute_unprepared(&statement).await?;
    }
    Ok(())
}

/// The PostgreSQL schema produced by all migrations, as written to `assets/database/provisioner.sql`.
pub fn postgres_schema_sql() -> String {
    let mut sql = String::from(
        "-- Generated from the migrations crate by `make generate`; do not edit by hand.\n\
         -- The service applies these migrations itself at start-up (or run `cargo run -p migrations -- up`).\n",
    );
    for migration in all() {
        for statement in migration.statements(DbBackend::Postgres) {
            sql.push('\n');
            sql.push_str(&statement);
            sql.push_str(";\n");
        }
    }
    sql
}
