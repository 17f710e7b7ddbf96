//! Logs that outlive the pod: when a run ends, the worker keeps what each container of its pod printed (redacted,
//! capped, gzip-compressed), one row per container, before it lets the Job go.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum OperationLog {
    Table,
    OperationId,
    /// `init` or `terraform-runner`.
    Container,
    /// The gzip-compressed log as kept (after redaction and the cap).
    Content,
    /// Bytes the container printed; more than the kept log holds when it was capped.
    PrintedBytes,
    ArchivedAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let logs = Table::create()
            .table(OperationLog::Table)
            .col(ColumnDef::new(OperationLog::OperationId).uuid().not_null())
            .col(ColumnDef::new(OperationLog::Container).string_len(64).not_null())
            .col(ColumnDef::new(OperationLog::Content).blob().not_null())
            .col(ColumnDef::new(OperationLog::PrintedBytes).big_integer().not_null())
            .col(ColumnDef::new(OperationLog::ArchivedAt).timestamp_with_time_zone().not_null())
            // Archived once: a clean-up step that runs again (a restart, a retry) keeps the first archive.
            .primary_key(Index::create().col(OperationLog::OperationId).col(OperationLog::Container))
            .foreign_key(
                ForeignKey::create()
                    .name("operation_log_operation_id_fkey")
                    .from(OperationLog::Table, OperationLog::OperationId)
                    .to(Operation::Table, Operation::Id)
                    .on_delete(ForeignKeyAction::Cascade),
            )
            .to_owned();
        // The retention clean-up deletes by age.
        let by_age = Index::create()
            .name("operation_log_archived_at_idx")
            .table(OperationLog::Table)
            .col(OperationLog::ArchivedAt)
            .to_owned();
        vec![backend.build(&logs).to_string(), backend.build(&by_age).to_string()]
    }
}

crate::run_statements!(Migration);
