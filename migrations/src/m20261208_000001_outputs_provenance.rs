//! Outputs provenance: an apply records the digest of the kubeconfig its own pod reported, once the outputs
//! Secret was checked to hold exactly that; the service serves a runtime's kubeconfig only when it still does.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// Lowercase hex SHA-256 of the kubeconfig the apply published; null for every other run and before the
    /// check passed.
    KubeconfigSha256,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Operation::KubeconfigSha256).string_len(64).null().to_owned();
        vec![backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string()]
    }
}

crate::run_statements!(Migration);
