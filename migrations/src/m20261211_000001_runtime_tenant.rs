//! A runtime records the tenant it was created for (Kyma's `Tenant` header); requests that name a tenant see only
//! its runtimes. Runtimes recorded before have none (null) and are seen only by requests that name no tenant.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::SchemaStatements;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Runtime {
    Table,
    Id,
    Tenant,
}

impl SchemaStatements for Migration {
    fn statements(&self, backend: DbBackend) -> Vec<String> {
        let column = ColumnDef::new(Runtime::Tenant).string_len(64).null().to_owned();
        // A tenant's page of runtimes, in the id order every list uses.
        let by_tenant = Index::create()
            .name("runtime_by_tenant")
            .table(Runtime::Table)
            .col(Runtime::Tenant)
            .col(Runtime::Id)
            .to_owned();
        vec![
            backend.build(Table::alter().table(Runtime::Table).add_column(column)).to_string(),
            backend.build(&by_tenant).to_string(),
        ]
    }
}

crate::run_statements!(Migration);
