//! Fencing per claim rather than per process, and an attempt budget that counts failures, not restarts.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    Attempts,
    /// Written by every claim; every write of a run is fenced by it.
    ClaimToken,
    /// Every claim, including resumes that used no attempt (for operators and the credential reuse check).
    Claims,
    /// Whether the holder of the current claim recorded a stage or gave the claim back gracefully; a claim after
    /// an expired lease uses an attempt only when this is false.
    ProgressSinceClaim,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        // SQLite alters one column per statement.
        let add =
            |column: ColumnDef| backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string();
        vec![
            add(ColumnDef::new(Operation::ClaimToken).uuid().to_owned()),
            add(ColumnDef::new(Operation::Claims).integer().not_null().default(0).to_owned()),
            add(ColumnDef::new(Operation::ProgressSinceClaim).boolean().not_null().default(false).to_owned()),
            // Before this migration every claim used an attempt.
            backend
                .build(Query::update().table(Operation::Table).value(Operation::Claims, Expr::col(Operation::Attempts)))
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
