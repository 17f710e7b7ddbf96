//! What an operation's run used and did: the Terraform provider (and its exact version) it installs, so that a
//! destroy months later uses the provider version that created the cluster; and what its plan changed (counts and
//! addresses, as JSON), recorded when its Job succeeded.

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
    /// `{"add": 30, "change": 0, "destroy": 0, "replaced": [], "destroyed": []}`; empty until the Job succeeded.
    PlanSummary,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        // SQLite alters one column per statement.
        let add =
            |column: ColumnDef| backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string();
        vec![
            add(ColumnDef::new(Operation::TerraformProvider).string().to_owned()),
            add(ColumnDef::new(Operation::PlanSummary).text().to_owned()),
        ]
    }
}

crate::run_statements!(Migration);
