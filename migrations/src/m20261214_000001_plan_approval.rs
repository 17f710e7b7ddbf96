//! Plan approval: a runtime's approval policy (`auto` for every runtime recorded before, and for those an older
//! release records), and an operation's saved plan waiting for approval. An operation waiting for approval is
//! still the runtime's active one, so the index that allows one active operation per runtime counts it too (an
//! older release never writes that state, so the stricter index changes nothing for it).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    ApprovalPolicy,
}

#[derive(DeriveIden)]
enum Operation {
    Table,
    SavedPlanSha256,
    ApprovalExpiresAt,
    ApprovedBy,
    ApprovedAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let policy = ColumnDef::new(Runtime::ApprovalPolicy).text().not_null().default("auto").to_owned();
        let mut statements = vec![backend.build(Table::alter().table(Runtime::Table).add_column(policy)).to_string()];
        let columns = [
            ColumnDef::new(Operation::SavedPlanSha256).text().to_owned(),
            ColumnDef::new(Operation::ApprovalExpiresAt).timestamp_with_time_zone().to_owned(),
            ColumnDef::new(Operation::ApprovedBy).text().to_owned(),
            ColumnDef::new(Operation::ApprovedAt).timestamp_with_time_zone().to_owned(),
        ];
        // SQLite adds one column per ALTER TABLE.
        statements.extend(
            columns
                .into_iter()
                .map(|column| backend.build(Table::alter().table(Operation::Table).add_column(column)).to_string()),
        );
        statements.push("DROP INDEX \"operation_one_active_per_runtime_idx\"".to_owned());
        statements.push(
            "CREATE UNIQUE INDEX \"operation_one_active_per_runtime_idx\" ON \"operation\" (\"runtime_id\") \
             WHERE \"state\" IN ('Pending', 'InProgress', 'AwaitingApproval')"
                .to_owned(),
        );
        statements
    }
}

crate::run_statements!(Migration);
