//! A runtime's name is unique within its tenant, not across all of them: a 409 no longer tells one tenant that
//! another uses a name. Runtimes without a tenant keep the old rule among themselves. An older replica inserting
//! a runtime still meets a unique violation for a taken name of the same tenant, so it keeps answering 409.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

impl SchemaStatements for Migration {
    fn statements(&self, _backend: DbBackend) -> Vec<String> {
        // Same syntax on both backends; a preview still takes no name.
        vec![
            "DROP INDEX \"runtime_live_name_idx\"".to_owned(),
            "CREATE UNIQUE INDEX \"runtime_live_name_idx\" ON \"runtime\" (\"name\") \
             WHERE \"deleted_at\" IS NULL AND NOT \"preview\" AND \"tenant\" IS NULL"
                .to_owned(),
            "CREATE UNIQUE INDEX \"runtime_live_tenant_name_idx\" ON \"runtime\" (\"tenant\", \"name\") \
             WHERE \"deleted_at\" IS NULL AND NOT \"preview\" AND \"tenant\" IS NOT NULL"
                .to_owned(),
        ]
    }
}

crate::run_statements!(Migration);
