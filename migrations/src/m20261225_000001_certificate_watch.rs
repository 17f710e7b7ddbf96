//! Certificates watched: what the last read of a runtime's cluster certificates saw (a JSON object
//! `{"readAt": ..., "expiries": [{"certificate": "ApiServerServing", "notAfter": ...}]}`), and when the runtime is
//! due for its next read (null: now; the watch reads the longest due first). Both null until the first read; an
//! older replica neither reads nor writes them.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

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
        vec![
            backend.build(Table::alter().table(Runtime::Table).add_column(certificates)).to_string(),
            backend.build(Table::alter().table(Runtime::Table).add_column(due_at)).to_string(),
            backend.build(&by_due_at).to_string(),
        ]
    }
}

crate::run_statements!(Migration);
