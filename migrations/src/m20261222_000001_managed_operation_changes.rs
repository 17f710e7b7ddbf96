//! The operations of managed runtimes changed since a moment are found through indexes: the reconciler of `Runtime`
//! resources reads them every second (the feed of what its runtimes' operations did), and this read must grow
//! neither with the history nor with the runtimes no resource manages.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Runtime {
    Table,
    Id,
    ManagedBy,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let index = Index::create()
            .name("operation_updated_at_idx")
            .table(Operation::Table)
            .col(Operation::UpdatedAt)
            .to_owned();
        let managed = Index::create()
            .name("runtime_managed_idx")
            .table(Runtime::Table)
            .col(Runtime::Id)
            .and_where(Expr::col(Runtime::ManagedBy).is_not_null())
            .to_owned();
        vec![backend.build(&index).to_string(), backend.build(&managed).to_string()]
    }
}

crate::run_statements!(Migration);
