//! Hibernation: a runtime remembers that its workers are scaled to zero (and a vanilla control plane stopped)
//! until a wake-up succeeds; its configuration keeps the sizes the wake-up restores.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    /// Set in the transaction that records a hibernation's success, cleared in the one of a wake-up's.
    Hibernated,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Runtime::Hibernated).boolean().not_null().default(false).to_owned();
        vec![backend.build(Table::alter().table(Runtime::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
