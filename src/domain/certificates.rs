//! The certificates of a provisioned cluster the provisioner watches: what it can see of them from outside (the
//! API server's serving certificate in the TLS handshake, the cluster's CA and the admin client certificate of the
//! kubeconfig its apply published), read on a budget, and whether one of them expires within
//! [`EXPIRING_WITHIN`], which the runtime's `CertificatesExpiring` condition tells.

use async_graphql::{Enum, SimpleObject};
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// How long before a certificate's end the runtime says it expires (Cluster API's `certificatesExpiryDays`
/// default is 7; kubeadm's certificates live a year, and a renewal wants a maintenance window).
pub const EXPIRING_WITHIN: TimeDelta = TimeDelta::days(30);

super::spelled! {
    /// Which of a cluster's certificates.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Enum, ToSchema)]
    #[graphql(rename_items = "PascalCase")]
    pub enum WatchedCertificate {
        /// The API server's serving certificate, as its TLS handshake presents it.
        ApiServerServing => "ApiServerServing",
        /// The cluster's CA, which the kubeconfig trusts.
        ClusterCa => "ClusterCa",
        /// The admin client certificate of the kubeconfig the apply published (vanilla's kubeadm admin; EKS and
        /// GKE kubeconfigs have none).
        AdminClient => "AdminClient",
    }
}

/// Until when one certificate is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateExpiry {
    pub certificate: WatchedCertificate,
    pub not_after: DateTime<Utc>,
}

/// What the last read of a runtime's certificates saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, SimpleObject, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedCertificates {
    pub read_at: DateTime<Utc>,
    /// Soonest expiry first.
    pub expiries: Vec<CertificateExpiry>,
}

impl ObservedCertificates {
    /// `expiries` in the order they run out.
    pub fn new(read_at: DateTime<Utc>, mut expiries: Vec<CertificateExpiry>) -> Self {
        expiries.sort_by_key(|expiry| (expiry.not_after, expiry.certificate));
        ObservedCertificates { read_at, expiries }
    }

    /// The certificate that runs out first, if that is within [`EXPIRING_WITHIN`] of `now` (or has already).
    pub fn expiring(&self, now: DateTime<Utc>) -> Option<CertificateExpiry> {
        self.expiries.first().copied().filter(|soonest| soonest.not_after - EXPIRING_WITHIN <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_soonest_certificate_expires_within_thirty_days_or_none_does() {
        let now = at("2026-12-07T12:00:00Z");
        let expiry = |certificate, not_after| CertificateExpiry { certificate, not_after: at(not_after) };
        let observed = ObservedCertificates::new(
            now,
            vec![
                expiry(WatchedCertificate::ClusterCa, "2035-12-01T00:00:00Z"),
                expiry(WatchedCertificate::ApiServerServing, "2027-01-06T12:00:01Z"),
                expiry(WatchedCertificate::AdminClient, "2027-03-01T00:00:00Z"),
            ],
        );
        assert_eq!(observed.expiries[0].certificate, WatchedCertificate::ApiServerServing, "soonest first");
        assert_eq!(observed.expiring(now), None, "30 days and a second left");
        let day_later = now + TimeDelta::days(1);
        assert_eq!(
            observed.expiring(day_later).map(|expiry| expiry.certificate),
            Some(WatchedCertificate::ApiServerServing)
        );
        assert!(observed.expiring(at("2028-01-01T00:00:00Z")).is_some(), "an expired one above all");
        assert_eq!(ObservedCertificates::new(now, Vec::new()).expiring(now), None);
    }
}
