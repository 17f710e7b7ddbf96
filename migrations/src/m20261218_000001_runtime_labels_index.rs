//! A page of runtimes filtered by a label is found through an index on PostgreSQL (GIN over the labels, which the
//! store's filter reads by containment: `labels @> {"key": "value"}`), not by reading every runtime. SQLite has no
//! such index; its filter reads the labels of each runtime, as before.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        match backend {
            DbBackend::Postgres => {
                vec![r#"CREATE INDEX "runtime_labels_idx" ON "runtime" USING GIN ("labels" jsonb_path_ops)"#.to_owned()]
            }
            _ => Vec::new(),
        }
    }
}

crate::run_statements!(Migration);
