use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    Id,
    Name,
    Description,
    Labels,
    Topology,
    Cloud,
    Region,
    Environment,
    CredentialId,
    ClusterConfig,
    LastOperationId,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

// The column is `operation_type`, so the variant has to repeat the table's name.
#[allow(clippy::enum_variant_names)]
#[derive(DeriveIden)]
enum Operation {
    Table,
    Id,
    RuntimeId,
    OperationType,
    State,
    Stage,
    Message,
    LastErrorMessage,
    LastErrorReason,
    LastErrorComponent,
    Attempts,
    Owner,
    LeaseExpiresAt,
    CreatedAt,
    StartedAt,
    UpdatedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum IdempotencyKey {
    Table,
    Key,
    RequestFingerprint,
    RuntimeId,
    OperationId,
    CreatedAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let runtime = Table::create()
            .table(Runtime::Table)
            .col(ColumnDef::new(Runtime::Id).uuid().not_null().primary_key())
            .col(ColumnDef::new(Runtime::Name).string_len(63).not_null())
            .col(ColumnDef::new(Runtime::Description).text())
            .col(ColumnDef::new(Runtime::Labels).json_binary().not_null())
            .col(ColumnDef::new(Runtime::Topology).string_len(32).not_null())
            .col(ColumnDef::new(Runtime::Cloud).string_len(16).not_null())
            .col(ColumnDef::new(Runtime::Region).string_len(64).not_null())
            .col(ColumnDef::new(Runtime::Environment).string_len(63).not_null())
            .col(ColumnDef::new(Runtime::CredentialId).string_len(255).not_null())
            .col(ColumnDef::new(Runtime::ClusterConfig).json_binary().not_null())
            .col(ColumnDef::new(Runtime::LastOperationId).uuid())
            .col(ColumnDef::new(Runtime::CreatedAt).timestamp_with_time_zone().not_null())
            .col(ColumnDef::new(Runtime::UpdatedAt).timestamp_with_time_zone().not_null())
            .col(ColumnDef::new(Runtime::DeletedAt).timestamp_with_time_zone())
            .to_owned();

        let operation = Table::create()
            .table(Operation::Table)
            .col(ColumnDef::new(Operation::Id).uuid().not_null().primary_key())
            .col(ColumnDef::new(Operation::RuntimeId).uuid().not_null())
            .col(ColumnDef::new(Operation::OperationType).string_len(16).not_null())
            .col(ColumnDef::new(Operation::State).string_len(16).not_null())
            .col(ColumnDef::new(Operation::Stage).string_len(64).not_null())
            .col(ColumnDef::new(Operation::Message).text().not_null())
            .col(ColumnDef::new(Operation::LastErrorMessage).text())
            .col(ColumnDef::new(Operation::LastErrorReason).string_len(64))
            .col(ColumnDef::new(Operation::LastErrorComponent).string_len(64))
            .col(ColumnDef::new(Operation::Attempts).integer().not_null().default(0))
            .col(ColumnDef::new(Operation::Owner).string_len(255))
            .col(ColumnDef::new(Operation::LeaseExpiresAt).timestamp_with_time_zone())
            .col(ColumnDef::new(Operation::CreatedAt).timestamp_with_time_zone().not_null())
            .col(ColumnDef::new(Operation::StartedAt).timestamp_with_time_zone())
            .col(ColumnDef::new(Operation::UpdatedAt).timestamp_with_time_zone().not_null())
            .col(ColumnDef::new(Operation::FinishedAt).timestamp_with_time_zone())
            .foreign_key(
                ForeignKey::create()
                    .name("operation_runtime_id_fkey")
                    .from(Operation::Table, Operation::RuntimeId)
                    .to(Runtime::Table, Runtime::Id)
                    .on_delete(ForeignKeyAction::Restrict),
            )
            .to_owned();

        let idempotency_key = Table::create()
            .table(IdempotencyKey::Table)
            .col(ColumnDef::new(IdempotencyKey::Key).string_len(255).not_null().primary_key())
            .col(ColumnDef::new(IdempotencyKey::RequestFingerprint).string_len(64).not_null())
            .col(ColumnDef::new(IdempotencyKey::RuntimeId).uuid().not_null())
            .col(ColumnDef::new(IdempotencyKey::OperationId).uuid().not_null())
            .col(ColumnDef::new(IdempotencyKey::CreatedAt).timestamp_with_time_zone().not_null())
            .foreign_key(
                ForeignKey::create()
                    .name("idempotency_key_runtime_id_fkey")
                    .from(IdempotencyKey::Table, IdempotencyKey::RuntimeId)
                    .to(Runtime::Table, Runtime::Id)
                    .on_delete(ForeignKeyAction::Cascade),
            )
            .to_owned();

        // Last operation of a runtime, newest first (status reads and the deprovision check).
        let operation_by_runtime = Index::create()
            .name("operation_runtime_id_created_at_idx")
            .table(Operation::Table)
            .col(Operation::RuntimeId)
            .col(Operation::CreatedAt)
            .to_owned();
        // Claiming work: Pending operations oldest first, and InProgress ones whose lease expired.
        let operation_by_state = Index::create()
            .name("operation_state_created_at_idx")
            .table(Operation::Table)
            .col(Operation::State)
            .col(Operation::CreatedAt)
            .to_owned();

        let mut statements: Vec<String> = vec![
            backend.build(&runtime).to_string(),
            backend.build(&operation).to_string(),
            backend.build(&idempotency_key).to_string(),
            backend.build(&operation_by_runtime).to_string(),
            backend.build(&operation_by_state).to_string(),
        ];
        // Partial unique indexes (same syntax on PostgreSQL and SQLite): the database itself refuses a second
        // active operation for a runtime and a second live runtime with the same name.
        statements.push(
            "CREATE UNIQUE INDEX \"operation_one_active_per_runtime_idx\" ON \"operation\" (\"runtime_id\") \
             WHERE \"state\" IN ('Pending', 'InProgress')"
                .to_owned(),
        );
        statements.push(
            "CREATE UNIQUE INDEX \"runtime_live_name_idx\" ON \"runtime\" (\"name\") WHERE \"deleted_at\" IS NULL"
                .to_owned(),
        );
        statements
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
