//! What the certificate watch reads and writes: which live runtimes are due for a read (the longest due first),
//! taking one so that two replicas do not read the same, what a read saw, and every runtime's last reading for
//! the metrics.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Condition, Expr, NullOrdering};
use sea_orm::{ColumnTrait, EntityTrait, Order, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::entity::runtime;
use super::{Error, Result, Store};
use crate::domain::certificates::{CertificateExpiry, ObservedCertificates, WatchedCertificate};

/// A runtime due for a read, with when it became due (to take it only if no one took it since).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueForCertificates {
    pub runtime_id: Uuid,
    pub due_at: Option<DateTime<Utc>>,
}

impl Store {
    /// Up to `limit` live runtimes (no previews) due for a read at `now`, the longest due first (never read ones
    /// before all).
    pub async fn due_for_certificate_read(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<DueForCertificates>> {
        let rows: Vec<(Uuid, Option<DateTime<Utc>>)> = runtime::Entity::find()
            .select_only()
            .columns([runtime::Column::Id, runtime::Column::CertificatesDueAt])
            .filter(runtime::Column::DeletedAt.is_null())
            .filter(runtime::Column::Preview.eq(false))
            .filter(
                Condition::any()
                    .add(runtime::Column::CertificatesDueAt.is_null())
                    .add(runtime::Column::CertificatesDueAt.lte(now)),
            )
            .order_by_with_nulls(runtime::Column::CertificatesDueAt, Order::Asc, NullOrdering::First)
            .limit(limit)
            .into_tuple()
            .all(&self.reads)
            .await?;
        Ok(rows.into_iter().map(|(runtime_id, due_at)| DueForCertificates { runtime_id, due_at }).collect())
    }

    /// Takes `due` for a read, due again at `next_due`; false when another replica took it since it was found.
    pub async fn take_for_certificate_read(&self, due: DueForCertificates, next_due: DateTime<Utc>) -> Result<bool> {
        let untaken = match due.due_at {
            Some(due_at) => runtime::Column::CertificatesDueAt.eq(due_at),
            None => runtime::Column::CertificatesDueAt.is_null(),
        };
        let taken = runtime::Entity::update_many()
            .col_expr(runtime::Column::CertificatesDueAt, Expr::value(next_due))
            .filter(runtime::Column::Id.eq(due.runtime_id))
            .filter(untaken)
            .exec(&self.db)
            .await?;
        Ok(taken.rows_affected == 1)
    }

    /// Makes the runtime due for a read at `due_at` (sooner than a read would, after one that found nothing).
    pub async fn certificates_due(&self, runtime_id: Uuid, due_at: DateTime<Utc>) -> Result<()> {
        runtime::Entity::update_many()
            .col_expr(runtime::Column::CertificatesDueAt, Expr::value(due_at))
            .filter(runtime::Column::Id.eq(runtime_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Records what a read of the runtime's certificates saw.
    pub async fn record_certificates(&self, runtime_id: Uuid, observed: &ObservedCertificates) -> Result<()> {
        runtime::Entity::update_many()
            .col_expr(runtime::Column::Certificates, Expr::value(certificates_to_column(observed)?))
            .filter(runtime::Column::Id.eq(runtime_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// The last reading of every live runtime whose certificates were read.
    pub async fn observed_certificates(&self) -> Result<Vec<(Uuid, ObservedCertificates)>> {
        let rows: Vec<(Uuid, String)> = runtime::Entity::find()
            .select_only()
            .columns([runtime::Column::Id, runtime::Column::Certificates])
            .filter(runtime::Column::DeletedAt.is_null())
            .filter(runtime::Column::Certificates.is_not_null())
            .into_tuple()
            .all(&self.reads)
            .await?;
        rows.into_iter().map(|(id, stored)| Ok((id, certificates_from_column(&stored)?))).collect()
    }
}

/// [`ObservedCertificates`] as the column holds it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredCertificates {
    read_at: DateTime<Utc>,
    expiries: Vec<StoredExpiry>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredExpiry {
    certificate: String,
    not_after: DateTime<Utc>,
}

pub(super) fn certificates_to_column(observed: &ObservedCertificates) -> Result<String> {
    let stored = StoredCertificates {
        read_at: observed.read_at,
        expiries: (observed.expiries.iter())
            .map(|expiry| StoredExpiry {
                certificate: expiry.certificate.as_str().to_owned(),
                not_after: expiry.not_after,
            })
            .collect(),
    };
    serde_json::to_string(&stored).map_err(|error| Error::Corrupt(error.to_string()))
}

/// The inverse of [`certificates_to_column`]; a certificate this release does not know is an error.
pub(super) fn certificates_from_column(stored: &str) -> Result<ObservedCertificates> {
    let stored: StoredCertificates =
        serde_json::from_str(stored).map_err(|error| Error::Corrupt(format!("reading of certificates: {error}")))?;
    let expiries = (stored.expiries.into_iter())
        .map(|expiry| {
            let certificate = WatchedCertificate::parse(&expiry.certificate)
                .ok_or_else(|| Error::Corrupt(format!("unknown certificate {:?}", expiry.certificate)))?;
            Ok(CertificateExpiry { certificate, not_after: expiry.not_after })
        })
        .collect::<Result<_>>()?;
    Ok(ObservedCertificates::new(stored.read_at, expiries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_stored_and_read_back_and_an_unknown_certificate_is_an_error() {
        let read_at = DateTime::parse_from_rfc3339("2026-12-07T12:00:00Z").unwrap().with_timezone(&Utc);
        let expiry =
            |certificate, days| CertificateExpiry { certificate, not_after: read_at + chrono::TimeDelta::days(days) };
        let observed = ObservedCertificates::new(
            read_at,
            vec![expiry(WatchedCertificate::ClusterCa, 3650), expiry(WatchedCertificate::ApiServerServing, 365)],
        );
        let stored = certificates_to_column(&observed).unwrap();
        assert!(stored.contains(r#""certificate":"ApiServerServing""#), "{stored}");
        assert_eq!(certificates_from_column(&stored).unwrap(), observed);
        let unknown = stored.replace("ClusterCa", "EtcdPeer");
        assert!(
            matches!(certificates_from_column(&unknown), Err(Error::Corrupt(message)) if message.contains("EtcdPeer"))
        );
    }
}
