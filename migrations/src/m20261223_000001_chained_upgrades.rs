//! Chained minor upgrades: the minors of a chained upgrade so far, each with when its run started (a JSON array
//! of `{"version": "1.35", "startedAt": ...}`; the last is the minor the current run applies). Null for every other
//! operation, and for every operation an older replica records during a rolling update: it never queues a chain.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    Minors,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let minors = ColumnDef::new(Operation::Minors).text().null().to_owned();
        vec![backend.build(Table::alter().table(Operation::Table).add_column(minors)).to_string()]
    }
}

crate::run_statements!(Migration);
