//! An upgrade may carry its own approval policy, overriding the runtime's for its run: null for every other
//! operation, for those recorded before, and for those an older release records (which use the runtime's).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// `auto`, `manual` or `safeOnly`; null: the runtime's.
    ApprovalPolicy,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Operation::ApprovalPolicy).text().null().to_owned();
        vec![backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
