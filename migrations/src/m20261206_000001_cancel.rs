//! Cancelling a running operation: the caller's request is recorded on the operation, and the worker that runs it
//! (this process or another, now or after a restart) stops its Job and fails it with reason `cancelled`.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// Who asked to cancel it while it ran; empty otherwise (a queued operation is failed at once instead).
    CancelRequestedBy,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Operation::CancelRequestedBy).string_len(255).to_owned();
        vec![backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
