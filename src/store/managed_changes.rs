//! The feed of the `Runtime` resources' reconciler: the operations of managed runtimes written since a moment, in
//! one indexed read however many runtimes there are.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, EntityTrait, JoinType, QueryFilter, QueryOrder, QuerySelect, QueryTrait, RelationDef, Select,
    Statement,
};
use uuid::Uuid;

use super::entity::{operation, runtime};
use super::{Error, Result, Store};
use crate::domain::OperationId;
use crate::domain::managed_by::{ManagedOperationChange, ResourceRef};

impl Store {
    /// The operations of runtimes a resource manages whose record was written after `since`, oldest write first,
    /// at most `limit`.
    pub async fn managed_operation_changes(
        &self,
        since: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ManagedOperationChange>> {
        let rows: Vec<(Uuid, DateTime<Utc>, String)> =
            managed_operation_writes(since, limit).into_tuple().all(&self.reads).await?;
        rows.into_iter()
            .map(|(operation_id, updated_at, managed_by)| {
                let resource = ResourceRef::parse(&managed_by).map_err(|error| {
                    Error::Corrupt(format!("operation {operation_id}'s runtime managed_by: {error}"))
                })?;
                Ok(ManagedOperationChange { resource, operation_id: OperationId(operation_id), updated_at })
            })
            .collect()
    }

    /// The statement [`Store::managed_operation_changes`] sends, for its plan (`EXPLAIN`).
    pub fn managed_operation_changes_statement(&self, since: DateTime<Utc>, limit: u64) -> Statement {
        managed_operation_writes(since, limit).build(self.db.get_database_backend())
    }
}

fn managed_operation_writes(since: DateTime<Utc>, limit: u64) -> Select<operation::Entity> {
    operation::Entity::find()
        .select_only()
        .column(operation::Column::Id)
        .column(operation::Column::UpdatedAt)
        .column(runtime::Column::ManagedBy)
        .join(JoinType::InnerJoin, operation_runtime())
        .filter(operation::Column::UpdatedAt.gt(since))
        .filter(runtime::Column::ManagedBy.is_not_null())
        .order_by_asc(operation::Column::UpdatedAt)
        .limit(limit)
}

fn operation_runtime() -> RelationDef {
    operation::Entity::belongs_to(runtime::Entity).from(operation::Column::RuntimeId).to(runtime::Column::Id).into()
}
