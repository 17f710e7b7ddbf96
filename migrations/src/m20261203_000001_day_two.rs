//! Day-2 changes: an operation may carry the configuration it applies (an upgrade's target, which becomes the
//! runtime's only when the upgrade succeeded) and may be a dry run (plan only); a runtime may be a preview (the
//! dry run of a provisioning), which does not hold its name.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// The cluster configuration the run renders (JSON, as `runtime.cluster_config`); empty when the run renders
    /// the runtime's own.
    TargetConfig,
    /// Plan only: nothing is applied and the runtime's configuration stays as it is.
    DryRun,
}

#[derive(DeriveIden)]
enum Runtime {
    Table,
    /// Recorded by a dry-run provisioning: never built, and its name stays free.
    Preview,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        // SQLite alters one column per statement.
        let operation =
            |column: ColumnDef| backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string();
        let runtime =
            |column: ColumnDef| backend.build(Table::alter().table(Runtime::Table).add_column(column)).to_string();
        vec![
            operation(ColumnDef::new(Operation::TargetConfig).json().to_owned()),
            operation(ColumnDef::new(Operation::DryRun).boolean().not_null().default(false).to_owned()),
            runtime(ColumnDef::new(Runtime::Preview).boolean().not_null().default(false).to_owned()),
            // A preview does not take its name from a cluster that will be built (same syntax on both backends).
            "DROP INDEX \"runtime_live_name_idx\"".to_owned(),
            "CREATE UNIQUE INDEX \"runtime_live_name_idx\" ON \"runtime\" (\"name\") \
             WHERE \"deleted_at\" IS NULL AND NOT \"preview\""
                .to_owned(),
        ]
    }
}

crate::run_statements!(Migration);
