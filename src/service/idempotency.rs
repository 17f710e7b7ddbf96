//! `Idempotency-Key` on every change: a retry of a keyed request within the key's lifetime gets the operation the
//! first one queued, never a second one; the same key sent by the same caller for another request is refused
//! (422). A key is its caller's.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::validation::{Invalid, InvalidReason};
use super::{Error, Result, Service};
use crate::domain::Operation;
use crate::store::{self, IdempotencyRecord};

/// A change request's checked `Idempotency-Key`, its caller and a digest of what it asks.
pub(super) struct Keyed<'a> {
    caller: &'a str,
    key: &'a str,
    fingerprint: String,
}

impl Keyed<'_> {
    /// The record that keeps this key's answer: `operation`, queued on its runtime.
    pub(super) fn record(&self, operation: &Operation) -> IdempotencyRecord {
        IdempotencyRecord {
            caller: self.caller.to_owned(),
            key: self.key.to_owned(),
            request_fingerprint: self.fingerprint.clone(),
            runtime_id: operation.runtime_id,
            operation_id: operation.id,
        }
    }
}

fn check_idempotency_key(key: &str) -> Result<(), Invalid> {
    let valid = !key.is_empty() && key.len() <= 255 && key.bytes().all(|byte| byte.is_ascii_graphic());
    if !valid {
        return Err(Invalid {
            field: "Idempotency-Key".into(),
            reason: InvalidReason::Format,
            message: "must be 1 to 255 visible ASCII characters".into(),
        });
    }
    Ok(())
}

/// A digest of a request, to tell a retry from another request under the same key.
pub(super) fn fingerprint(request: &impl Serialize) -> String {
    let canonical = serde_json::to_vec(request).unwrap_or_default();
    Sha256::digest(canonical).iter().map(|byte| format!("{byte:02x}")).collect()
}

impl Service {
    /// Records made before this time have expired.
    pub(super) fn idempotency_not_before(&self) -> DateTime<Utc> {
        store::now().checked_sub_signed(self.idempotency_ttl).unwrap_or(DateTime::<Utc>::MIN_UTC)
    }

    /// For a keyed request (`fingerprint` is a digest of what it asks): the operation an earlier request with the
    /// key queued (422 when that one asked for something else), or the key to record with the operation it queues.
    pub(super) async fn keyed<'a>(
        &self,
        caller: &'a str,
        key: Option<&'a str>,
        fingerprint: String,
    ) -> Result<(Option<Keyed<'a>>, Option<Operation>)> {
        let Some(key) = key else { return Ok((None, None)) };
        check_idempotency_key(key)?;
        let keyed = Keyed { caller, key, fingerprint };
        let earlier = self.earlier_answer(&keyed).await?;
        Ok((Some(keyed), earlier))
    }

    /// The operation an earlier request with `keyed`'s key queued, if its record has not expired (an expired one
    /// is forgotten, so the key can be used anew).
    pub(super) async fn earlier_answer(&self, keyed: &Keyed<'_>) -> Result<Option<Operation>> {
        let not_before = self.idempotency_not_before();
        let Some(record) = self.store.find_idempotency_record(keyed.caller, keyed.key, not_before).await? else {
            self.store.forget_expired_idempotency_record(keyed.caller, keyed.key, not_before).await?;
            return Ok(None);
        };
        if record.request_fingerprint != keyed.fingerprint {
            return Err(Error::IdempotencyKeyReused);
        }
        let operation = self.store.find_operation(record.operation_id).await?;
        Ok(Some(operation.ok_or_else(|| Error::NotFound { what: "operation", id: record.operation_id.to_string() })?))
    }
}
