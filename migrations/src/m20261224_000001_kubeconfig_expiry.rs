//! When the kubeconfig the service last minted for a runtime expires (a client certificate the cluster issued for
//! `APP_KUBECONFIG_LIFETIME`). Null for runtimes whose kubeconfig holds no credential (EKS, GKE) and until one was
//! minted; an older replica neither reads nor writes it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    KubeconfigExpiresAt,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let expires = ColumnDef::new(Runtime::KubeconfigExpiresAt).timestamp_with_time_zone().null().to_owned();
        vec![backend.build(Table::alter().table(Runtime::Table).add_column(expires)).to_string()]
    }
}

crate::run_statements!(Migration);
