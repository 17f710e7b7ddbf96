//! The `Runtime` resource that manages a runtime (`namespace/name`), from then on the only writer of its changes.
//! Null for runtimes created through the APIs (and by a replica of the previous release, which writes no value).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    ManagedBy,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Runtime::ManagedBy).string().null().to_owned();
        vec![backend.build(Table::alter().table(Runtime::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
