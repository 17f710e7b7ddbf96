//! A retry of a failed operation records which one it retries, so a repeated retry request finds the retry it
//! queued and the history shows what came of a failure. Operations recorded before have none (null).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// The failed operation this one retries; null for an operation a caller asked for directly.
    RetryOf,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Operation::RetryOf).uuid().null().to_owned();
        vec![backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
