//! Runtimes: recorded with their first operation, read one at a time or by the page.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use sea_orm::sea_query::{Condition, Expr, SimpleExpr};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, FromQueryResult, IdenStatic,
    IntoActiveModel, JoinType, QueryFilter, QueryOrder, QuerySelect, QueryTrait, RelationDef, SelectA, SelectB,
    SelectTwo, Statement, TransactionTrait,
};
use uuid::Uuid;

use crate::domain::approval::ApprovalPolicy;
use crate::domain::managed_by::ResourceRef;

use super::convert::{operation_from_model, provider_from_str, runtime_from_model, runtime_to_model};
use super::entity::{operation, operation_stage, runtime};
use super::operations::{insert_with_first_stage, stage_entry, stages_relation};
use super::{Error, IdempotencyRecord, Result, Store, page, unique_violation_as};
use crate::domain::tenant::Tenant;
use crate::domain::{
    Operation, OperationState, OperationType, ProviderVersion, Runtime, RuntimePage, RuntimeState, StageEntry,
};

/// A runtime as one read found it: its record, its last operation with when it entered each of its stages (in
/// stage order), and when its provisioning succeeded.
#[derive(Debug, Clone)]
pub struct RuntimeRecord {
    pub runtime: Runtime,
    pub last_operation: Option<(Operation, Vec<StageEntry>)>,
    pub provisioned_at: Option<DateTime<Utc>>,
}

/// Which runtimes a list holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeFilter<'a> {
    /// Only this tenant's.
    pub tenant: Option<&'a Tenant>,
    /// Only those whose last operation is in this state.
    pub last_operation_state: Option<OperationState>,
    /// Only those in this state.
    pub state: Option<RuntimeState>,
    /// Only those with this label (key, value).
    pub label: Option<(&'a str, &'a str)>,
    /// Only those of this name.
    pub name: Option<&'a str>,
    /// Deprovisioned ones too.
    pub include_deleted: bool,
    /// Only previews (`true`) or only runtimes that are none (`false`); both when `None`.
    pub preview: Option<bool>,
    /// Only those whose record or last operation changed at or after this time.
    pub updated_since: Option<DateTime<Utc>>,
}

impl Store {
    /// Turns the deletion protection of a live runtime on or off; false when there is no such runtime.
    pub async fn set_deletion_protection(&self, runtime_id: Uuid, enabled: bool, now: DateTime<Utc>) -> Result<bool> {
        let updated = runtime::Entity::update_many()
            .col_expr(runtime::Column::DeletionProtection, Expr::value(enabled))
            .col_expr(runtime::Column::UpdatedAt, Expr::value(now))
            .filter(runtime::Column::Id.eq(runtime_id))
            .filter(runtime::Column::DeletedAt.is_null())
            .exec(&self.db)
            .await?;
        Ok(updated.rows_affected == 1)
    }

    /// Sets which plans of a live runtime's runs wait for approval; false when the runtime is gone or deleted.
    pub async fn set_approval_policy(
        &self,
        runtime_id: Uuid,
        policy: ApprovalPolicy,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let updated = runtime::Entity::update_many()
            .col_expr(runtime::Column::ApprovalPolicy, Expr::value(policy.as_str()))
            .col_expr(runtime::Column::UpdatedAt, Expr::value(now))
            .filter(runtime::Column::Id.eq(runtime_id))
            .filter(runtime::Column::DeletedAt.is_null())
            .exec(&self.db)
            .await?;
        Ok(updated.rows_affected == 1)
    }

    /// Makes `manager` the manager of a live runtime that no other resource manages; false when it is gone or
    /// another manages it (the condition is in the statement: two adoptions cannot both win).
    pub async fn adopt_runtime(&self, runtime_id: Uuid, manager: &ResourceRef, now: DateTime<Utc>) -> Result<bool> {
        let manager = manager.to_string();
        let updated = runtime::Entity::update_many()
            .col_expr(runtime::Column::ManagedBy, Expr::value(manager.clone()))
            .col_expr(runtime::Column::UpdatedAt, Expr::value(now))
            .filter(runtime::Column::Id.eq(runtime_id))
            .filter(runtime::Column::DeletedAt.is_null())
            .filter(
                Condition::any().add(runtime::Column::ManagedBy.is_null()).add(runtime::Column::ManagedBy.eq(manager)),
            )
            .exec(&self.db)
            .await?;
        Ok(updated.rows_affected == 1)
    }

    /// Records a new runtime with its first operation (and the idempotency record, if any) atomically.
    pub async fn insert_runtime(
        &self,
        runtime: &Runtime,
        operation: &Operation,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<()> {
        let txn = self.db.begin().await?;
        runtime_to_model(runtime)?
            .into_active_model()
            .insert(&txn)
            .await
            .map_err(|error| unique_violation_as(error, Error::NameTaken))?;
        insert_with_first_stage(&txn, operation).await?;
        if let Some(record) = idempotency {
            super::idempotency::insert_record(&txn, record, operation.created_at).await?;
        }
        txn.commit().await?;
        Ok(())
    }

    pub async fn find_runtime(&self, id: Uuid) -> Result<Option<Runtime>> {
        runtime::Entity::find_by_id(id).one(&self.reads).await?.map(runtime_from_model).transpose()
    }

    /// A runtime with its last operation, that operation's stages and when its provisioning succeeded, in one
    /// statement: all as one moment left them (an operation's end and what it changed of the runtime are written
    /// in one transaction). A row for each stage; the runtime and its operation are read from the first.
    pub async fn find_runtime_record(&self, id: Uuid) -> Result<Option<RuntimeRecord>> {
        let rows = self.reads.query_all_raw(self.prepared.runtime_record(id)).await?;
        let Some(first) = rows.first() else { return Ok(None) };
        let runtime = runtime::Model::from_query_result(first, SelectA.as_str())?;
        let last_operation = operation::Model::from_query_result_optional(first, SelectB.as_str())?;
        let mut stages = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(stage) = row.try_get::<Option<String>>("", STAGE)? else { continue };
            let entered_at = row.try_get("", ENTERED_AT)?;
            stages.push(stage_entry(&stage, entered_at)?);
        }
        stages.sort_by_key(|entry| entry.stage);
        Ok(Some(RuntimeRecord {
            runtime: runtime_from_model(runtime)?,
            last_operation: last_operation.map(operation_from_model).transpose()?.map(|operation| (operation, stages)),
            provisioned_at: first.try_get("", PROVISIONED_AT)?,
        }))
    }

    /// Runtimes after the cursor in id order that `filter` lets through.
    pub async fn list_runtimes(
        &self,
        filter: &RuntimeFilter<'_>,
        after: Option<Uuid>,
        limit: u64,
    ) -> Result<RuntimePage> {
        let query = self.runtime_page(filter, after, limit);
        let (rows, has_next_page) = page(query.all(&self.reads).await?, limit);
        let runtimes = rows
            .into_iter()
            .map(|(runtime, operation)| {
                Ok((runtime_from_model(runtime)?, operation.map(operation_from_model).transpose()?))
            })
            .collect::<Result<_>>()?;
        Ok(RuntimePage { runtimes, has_next_page })
    }

    /// The statement [`Store::list_runtimes`] sends, for its plan (`EXPLAIN`).
    pub fn runtime_page_statement(&self, filter: &RuntimeFilter<'_>, after: Option<Uuid>, limit: u64) -> Statement {
        self.runtime_page(filter, after, limit).build(self.db.get_database_backend())
    }

    fn runtime_page(
        &self,
        filter: &RuntimeFilter<'_>,
        after: Option<Uuid>,
        limit: u64,
    ) -> SelectTwo<runtime::Entity, operation::Entity> {
        let mut query = runtime::Entity::find()
            .select_also(operation::Entity)
            .join(JoinType::LeftJoin, last_operation_relation())
            .order_by_asc(runtime::Column::Id)
            .limit(limit + 1);
        if let Some(tenant) = filter.tenant {
            query = query.filter(runtime::Column::Tenant.eq(tenant.as_str()));
        }
        if let Some(state) = filter.last_operation_state {
            query = query.filter(operation::Column::State.eq(state.as_str()));
        }
        if let Some(state) = filter.state {
            query = query.filter(super::runtime_states::in_state(state));
        }
        if let Some(name) = filter.name {
            query = query.filter(runtime::Column::Name.eq(name));
        }
        if !filter.include_deleted {
            query = query.filter(runtime::Column::DeletedAt.is_null());
        }
        if let Some(preview) = filter.preview {
            query = query.filter(runtime::Column::Preview.eq(preview));
        }
        if let Some(since) = filter.updated_since {
            let changed = Condition::any()
                .add(runtime::Column::UpdatedAt.gte(since))
                .add(operation::Column::UpdatedAt.gte(since));
            query = query.filter(changed);
        }
        if let Some(after) = after {
            query = query.filter(runtime::Column::Id.gt(after));
        }
        if let Some((key, value)) = filter.label {
            // Label keys are validated (no quote can end the JSON path); both are bound as values.
            let condition = match self.db.get_database_backend() {
                // Containment, which the GIN index on the labels answers.
                DbBackend::Postgres => Expr::cust_with_values(
                    r#""runtime"."labels" @> jsonb_build_object($1::text, $2::text)"#,
                    [key.to_owned(), value.to_owned()],
                ),
                _ => Expr::cust_with_values(
                    r#"json_extract("runtime"."labels", '$."' || ? || '"') = ?"#,
                    [key.to_owned(), value.to_owned()],
                ),
            };
            query = query.filter(condition);
        }
        query
    }

    /// Those of `runtime_ids` whose provisioning (not a dry run) succeeded, with when it ended, in one query.
    pub async fn provisioned_among(&self, runtime_ids: &[Uuid]) -> Result<HashMap<Uuid, DateTime<Utc>>> {
        if runtime_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let provisionings: Vec<(Uuid, Option<DateTime<Utc>>, DateTime<Utc>)> = operation::Entity::find()
            .select_only()
            .columns([operation::Column::RuntimeId, operation::Column::FinishedAt, operation::Column::UpdatedAt])
            .filter(operation::Column::RuntimeId.is_in(runtime_ids.iter().copied()))
            .filter(operation::Column::OperationType.eq(OperationType::Provision.as_str()))
            .filter(operation::Column::State.eq(OperationState::Succeeded.as_str()))
            .filter(operation::Column::DryRun.eq(false))
            .into_tuple()
            .all(&self.reads)
            .await?;
        let mut provisioned = HashMap::new();
        for (runtime_id, finished_at, updated_at) in provisionings {
            // A succeeded operation has ended; `updated_at` stands in for a row written without `finished_at`.
            let ended = finished_at.unwrap_or(updated_at);
            provisioned.entry(runtime_id).and_modify(|at: &mut DateTime<Utc>| *at = (*at).max(ended)).or_insert(ended);
        }
        Ok(provisioned)
    }

    /// The provider version of the runtime's latest operation that recorded one: what its state was last written
    /// with, so what the next run on it must install.
    pub async fn last_terraform_provider(&self, runtime_id: Uuid) -> Result<Option<ProviderVersion>> {
        let latest = operation::Entity::find()
            .select_only()
            .column(operation::Column::TerraformProvider)
            .filter(operation::Column::RuntimeId.eq(runtime_id))
            .filter(operation::Column::TerraformProvider.is_not_null())
            .order_by_desc(operation::Column::CreatedAt)
            .into_tuple::<String>()
            .one(&self.reads)
            .await?;
        latest.as_deref().map(provider_from_str).transpose()
    }

    /// When the kubeconfig last minted for the runtime expires.
    pub async fn record_kubeconfig_expiry(&self, runtime_id: Uuid, expires_at: DateTime<Utc>) -> Result<()> {
        runtime::Entity::update_many()
            .col_expr(runtime::Column::KubeconfigExpiresAt, Expr::value(expires_at))
            .filter(runtime::Column::Id.eq(runtime_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// The digest of the kubeconfig the runtime's latest checked apply published: the only content of its outputs
    /// Secret that may be served.
    pub async fn checked_kubeconfig_digest(&self, runtime_id: Uuid) -> Result<Option<String>> {
        Ok(operation::Entity::find()
            .select_only()
            .column(operation::Column::KubeconfigSha256)
            .filter(operation::Column::RuntimeId.eq(runtime_id))
            .filter(operation::Column::KubeconfigSha256.is_not_null())
            .order_by_desc(operation::Column::CreatedAt)
            .into_tuple::<String>()
            .one(&self.reads)
            .await?)
    }
}

const PROVISIONED_AT: &str = "provisioned_at";
const STAGE: &str = "stage_name";
const ENTERED_AT: &str = "stage_entered_at";

/// The statement of [`Store::find_runtime_record`] (sent as [`super::prepared::Prepared`] built it).
pub(super) fn runtime_record_query(id: Uuid) -> SelectTwo<runtime::Entity, operation::Entity> {
    runtime::Entity::find_by_id(id)
        .select_also(operation::Entity)
        .join(JoinType::LeftJoin, last_operation_relation())
        .join(JoinType::LeftJoin, stages_relation())
        .column_as(provisioned_at_of_each_runtime(), PROVISIONED_AT)
        .column_as(operation_stage::Column::Stage, STAGE)
        .column_as(operation_stage::Column::EnteredAt, ENTERED_AT)
}

/// When the runtime of each row (`"runtime"."id"`) was provisioned, as [`Store::provisioned_among`] tells it: the
/// latest end of its succeeded provisionings that were no dry run.
fn provisioned_at_of_each_runtime() -> SimpleExpr {
    Expr::cust(format!(
        r#"(SELECT max(coalesce("provisioning"."finished_at", "provisioning"."updated_at"))
        FROM "operation" AS "provisioning" WHERE "provisioning"."runtime_id" = "runtime"."id" AND "provisioning"."operation_type" = '{provision}'
        AND "provisioning"."state" = '{succeeded}' AND NOT "provisioning"."dry_run")"#,
        provision = OperationType::Provision.as_str(),
        succeeded = OperationState::Succeeded.as_str(),
    ))
}

fn last_operation_relation() -> RelationDef {
    runtime::Entity::belongs_to(operation::Entity)
        .from(runtime::Column::LastOperationId)
        .to(operation::Column::Id)
        .into()
}
