//! An operation keeps the W3C trace context of the request that queued it, so that its runs continue the caller's
//! trace: null without traces, for operations recorded before, and for those an older release records.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// `00-<trace id>-<span id>-<flags>`.
    TraceParent,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Operation::TraceParent).text().null().to_owned();
        vec![backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
