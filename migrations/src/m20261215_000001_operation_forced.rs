//! A forced deprovisioning (of a runtime whose credential is gone) ends without a run and keeps what may remain
//! in the cloud: a JSON object, null for every other operation and for those recorded before.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// `{"remaining": [...], "inventoryRecorded": bool}` of a forced deprovisioning.
    Forced,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Operation::Forced).text().null().to_owned();
        vec![backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
