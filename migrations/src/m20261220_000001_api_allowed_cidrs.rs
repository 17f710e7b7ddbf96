//! The IPv4 ranges that may reach a cluster's Kubernetes API, recorded per runtime (the list it was built with)
//! and per upgrade (the list it applies), each in a column of its own beside the configuration's JSON: a replica
//! of the previous release reads that JSON with its own set of fields and would refuse an unknown one. Null for
//! runtimes recorded before (and by an older replica during a rolling update), which render the operator's
//! `APP_API_ALLOWED_CIDRS`, and for operations that change no list.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    /// A JSON array of IPv4 CIDRs.
    ApiAllowedCidrs,
}

#[derive(DeriveIden)]
enum Operation {
    Table,
    /// The list of the operation's `target_config` (a JSON array of IPv4 CIDRs).
    TargetApiAllowedCidrs,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        // SQLite alters one column per statement.
        let runtime = ColumnDef::new(Runtime::ApiAllowedCidrs).json().null().to_owned();
        let operation = ColumnDef::new(Operation::TargetApiAllowedCidrs).json().null().to_owned();
        vec![
            backend.build(Table::alter().table(Runtime::Table).add_column(runtime)).to_string(),
            backend.build(Table::alter().table(Operation::Table).add_column(operation)).to_string(),
        ]
    }
}

crate::run_statements!(Migration);
