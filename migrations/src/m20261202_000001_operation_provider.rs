//! The Terraform provider (and its exact version) an operation runs with, so that a destroy months later uses the
//! provider version that created the cluster.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// `hashicorp/aws 6.47.0`; empty for operations recorded before providers were pinned.
    TerraformProvider,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        vec![
            backend
                .build(
                    Table::alter()
                        .table(Operation::Table)
                        .add_column(ColumnDef::new(Operation::TerraformProvider).string().to_owned()),
                )
                .to_string(),
        ]
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::execute_all(manager, self.statements(manager.get_database_backend())).await
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
