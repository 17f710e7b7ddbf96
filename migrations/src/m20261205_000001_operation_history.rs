//! Every run on the record: who asked for an operation (the audit identity), and when it entered each of its
//! stages (written in the transaction that records the stage).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    Id,
    /// The authenticated caller that requested it (`system:anonymous` without authentication); empty for
    /// operations recorded before it was kept.
    RequestedBy,
}

#[derive(DeriveIden)]
enum OperationStage {
    Table,
    OperationId,
    /// A `Stage` spelling (`Queued`, `ResolveCredential`, ...).
    Stage,
    EnteredAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let requested_by = ColumnDef::new(Operation::RequestedBy).string_len(255).to_owned();
        let stages = Table::create()
            .table(OperationStage::Table)
            .col(ColumnDef::new(OperationStage::OperationId).uuid().not_null())
            .col(ColumnDef::new(OperationStage::Stage).string_len(64).not_null())
            .col(ColumnDef::new(OperationStage::EnteredAt).timestamp_with_time_zone().not_null())
            // A stage is entered once: a resumed run that records it again keeps the first time.
            .primary_key(Index::create().col(OperationStage::OperationId).col(OperationStage::Stage))
            .foreign_key(
                ForeignKey::create()
                    .name("operation_stage_operation_id_fkey")
                    .from(OperationStage::Table, OperationStage::OperationId)
                    .to(Operation::Table, Operation::Id)
                    .on_delete(ForeignKeyAction::Cascade),
            )
            .to_owned();
        vec![
            backend.build(Table::alter().table(Operation::Table).add_column(requested_by)).to_string(),
            backend.build(&stages).to_string(),
        ]
    }
}

crate::run_statements!(Migration);
