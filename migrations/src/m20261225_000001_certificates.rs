//! Certificates watched: what the last read of a runtime's cluster certificates saw (a JSON object
//! `{"readAt": ..., "expiries": [{"certificate": "ApiServerServing", "notAfter": ...}]}`), and when the runtime is
//! due for its next read (null: now; the watch reads the longest due first). Both null until the first read; an
//! older replica neither reads nor writes them.
//!
//! Certificate renewals: `operation.operation_type` takes `RenewCertificates` (17 characters), so PostgreSQL's
//! column widens from 16 to 32 (SQLite does not bound it); an older replica claims only the types it knows.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Operation {
    Table,
    OperationType,
}

#[derive(DeriveIden)]
enum Runtime {
    Table,
    Certificates,
    CertificatesDueAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let certificates = ColumnDef::new(Runtime::Certificates).text().null().to_owned();
        let due_at = ColumnDef::new(Runtime::CertificatesDueAt).timestamp_with_time_zone().null().to_owned();
        // The next runtimes due for a read, without a scan of the fleet.
        let by_due_at = Index::create()
            .name("runtime_by_certificates_due_at")
            .table(Runtime::Table)
            .col(Runtime::CertificatesDueAt)
            .to_owned();
        let mut statements = vec![
            backend.build(Table::alter().table(Runtime::Table).add_column(certificates)).to_string(),
            backend.build(Table::alter().table(Runtime::Table).add_column(due_at)).to_string(),
            backend.build(&by_due_at).to_string(),
        ];
        if backend == DbBackend::Postgres {
            let wider = ColumnDef::new(Operation::OperationType).string_len(32).not_null().to_owned();
            statements.push(backend.build(Table::alter().table(Operation::Table).modify_column(wider)).to_string());
        }
        statements
    }
}

crate::run_statements!(Migration);
