//! Idempotency records: what a keyed request (a provisioning or a change) created, per caller.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseTransaction, EntityTrait, IntoActiveModel, QueryFilter};
use uuid::Uuid;

use super::entity::caller_idempotency_key;
use super::{Error, Result, Store, unique_violation_as};

/// What a request with an `Idempotency-Key` created, so that a retry gets the same answer. A key is its caller's:
/// the same key from another caller is another request.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyRecord {
    pub caller: String,
    pub key: String,
    pub request_fingerprint: String,
    pub runtime_id: Uuid,
    pub operation_id: Uuid,
}

impl Store {
    /// `caller`'s record of `key`, when it was made at `not_before` or later (older ones have expired).
    pub async fn find_idempotency_record(
        &self,
        caller: &str,
        key: &str,
        not_before: DateTime<Utc>,
    ) -> Result<Option<IdempotencyRecord>> {
        let found = caller_idempotency_key::Entity::find_by_id((caller.to_owned(), key.to_owned()))
            .filter(caller_idempotency_key::Column::CreatedAt.gte(not_before))
            .one(&self.reads)
            .await?;
        Ok(found.map(|model| IdempotencyRecord {
            caller: model.caller,
            key: model.key,
            request_fingerprint: model.request_fingerprint,
            runtime_id: model.runtime_id,
            operation_id: model.operation_id,
        }))
    }

    /// Deletes `caller`'s expired record of `key` (made before `not_before`), so that the key can be used anew.
    pub async fn forget_expired_idempotency_record(
        &self,
        caller: &str,
        key: &str,
        not_before: DateTime<Utc>,
    ) -> Result<()> {
        caller_idempotency_key::Entity::delete_many()
            .filter(caller_idempotency_key::Column::Caller.eq(caller))
            .filter(caller_idempotency_key::Column::Key.eq(key))
            .filter(caller_idempotency_key::Column::CreatedAt.lt(not_before))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Deletes the idempotency records made before `cutoff`; returns how many.
    pub async fn delete_idempotency_records_before(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        let deleted = caller_idempotency_key::Entity::delete_many()
            .filter(caller_idempotency_key::Column::CreatedAt.lt(cutoff))
            .exec(&self.db)
            .await?;
        Ok(deleted.rows_affected)
    }
}

/// Writes `record` in `txn`, made at `created_at`; `IdempotencyKeyTaken` when the caller's key is recorded already.
pub(super) async fn insert_record(
    txn: &DatabaseTransaction,
    record: &IdempotencyRecord,
    created_at: DateTime<Utc>,
) -> Result<()> {
    caller_idempotency_key::Model {
        caller: record.caller.clone(),
        key: record.key.clone(),
        request_fingerprint: record.request_fingerprint.clone(),
        runtime_id: record.runtime_id,
        operation_id: record.operation_id,
        created_at,
    }
    .into_active_model()
    .insert(txn)
    .await
    .map_err(|error| unique_violation_as(error, Error::IdempotencyKeyTaken))?;
    Ok(())
}
