//! Chained minor upgrades: the minor the current run of a chained upgrade applies (`MAJOR.MINOR`) and when that
//! minor's run started (each minor has the whole run timeout). Null for every other operation, and for every
//! operation an older replica records during a rolling update: it never queues a chain.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    MinorTarget,
    MinorStartedAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        // SQLite alters one column per statement.
        let target = ColumnDef::new(Operation::MinorTarget).text().null().to_owned();
        let started = ColumnDef::new(Operation::MinorStartedAt).timestamp_with_time_zone().null().to_owned();
        vec![
            backend.build(Table::alter().table(Operation::Table).add_column(target)).to_string(),
            backend.build(Table::alter().table(Operation::Table).add_column(started)).to_string(),
        ]
    }
}

crate::run_statements!(Migration);
