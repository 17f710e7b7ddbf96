//! Idempotency keys belong to a caller and expire: a key is looked up with the caller who sent it (two callers
//! using the same key get their own answers), and records older than `APP_IDEMPOTENCY_KEY_TTL` are deleted. The
//! global `idempotency_key` table of the release before stays for its replicas during a rolling upgrade; nothing
//! reads it any more, and a later release drops it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum CallerIdempotencyKey {
    Table,
    /// The authenticated caller (its Kubernetes user name), or `anonymous` without authentication.
    Caller,
    Key,
    RequestFingerprint,
    RuntimeId,
    OperationId,
    CreatedAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let table = Table::create()
            .table(CallerIdempotencyKey::Table)
            .col(ColumnDef::new(CallerIdempotencyKey::Caller).string_len(512).not_null())
            .col(ColumnDef::new(CallerIdempotencyKey::Key).string_len(255).not_null())
            .col(ColumnDef::new(CallerIdempotencyKey::RequestFingerprint).string_len(64).not_null())
            .col(ColumnDef::new(CallerIdempotencyKey::RuntimeId).uuid().not_null())
            .col(ColumnDef::new(CallerIdempotencyKey::OperationId).uuid().not_null())
            .col(ColumnDef::new(CallerIdempotencyKey::CreatedAt).timestamp_with_time_zone().not_null())
            .primary_key(Index::create().col(CallerIdempotencyKey::Caller).col(CallerIdempotencyKey::Key))
            .to_owned();
        // The clean-up deletes by age.
        let by_age = Index::create()
            .name("caller_idempotency_key_created_at_idx")
            .table(CallerIdempotencyKey::Table)
            .col(CallerIdempotencyKey::CreatedAt)
            .to_owned();
        vec![backend.build(&table).to_string(), backend.build(&by_age).to_string()]
    }
}

crate::run_statements!(Migration);
