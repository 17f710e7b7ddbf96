//! A runtime records its state bucket when it is created: bucket names are global across accounts and projects,
//! so new runtimes get names nobody can take first, while runtimes recorded before keep the name they were given
//! (null here: the service derives it as before).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    StateBucket,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Runtime::StateBucket).string_len(63).null().to_owned();
        vec![backend.build(Table::alter().table(Runtime::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
