//! Deletion protection: a protected runtime refuses deprovisionings until someone turns the protection off.
//! Runtimes recorded before, and those an older release records, are unprotected (the default).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    DeletionProtection,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Runtime::DeletionProtection).boolean().not_null().default(false).to_owned();
        vec![backend.build(Table::alter().table(Runtime::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
