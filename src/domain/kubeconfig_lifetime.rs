//! Kubeconfigs with a lifetime: what the service hands out for a cluster signed in with a client certificate is
//! a certificate the cluster issues for a limited time, rotated once most of its life has passed (as Kyma's
//! infrastructure-manager does at 60 %), so that a reader always gets one with at least 40 % of its life left.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The shortest lifetime (`APP_KUBECONFIG_LIFETIME`): the certificate signing request API's minimum.
pub const MIN_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// The longest lifetime: a month, far below the year of kubeadm's own admin certificate.
pub const MAX_LIFETIME: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// The share of its life after which a kubeconfig is replaced by a new one.
const ROTATE_AT_PERCENT: i64 = 60;

/// The Secret of the service's namespace that keeps the kubeconfig last minted for a runtime.
pub fn kept_secret_name(runtime_id: uuid::Uuid) -> String {
    format!("kubeconfig-{runtime_id}")
}

/// Whether a kubeconfig valid from `issued_at` to `expires_at` is due for a new one at `now`.
pub fn due_for_rotation(issued_at: DateTime<Utc>, expires_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    let life = expires_at - issued_at;
    now >= issued_at + life * i32::try_from(ROTATE_AT_PERCENT).unwrap_or(60) / 100
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    #[test]
    fn a_kubeconfig_is_replaced_once_sixty_percent_of_its_life_has_passed() {
        let issued = DateTime::parse_from_rfc3339("2026-12-07T10:00:00Z").unwrap().with_timezone(&Utc);
        let expires = issued + TimeDelta::hours(10);
        assert!(!due_for_rotation(issued, expires, issued));
        assert!(!due_for_rotation(issued, expires, issued + TimeDelta::minutes(359)));
        assert!(due_for_rotation(issued, expires, issued + TimeDelta::hours(6)));
        assert!(due_for_rotation(issued, expires, expires + TimeDelta::hours(1)), "an expired one above all");
    }
}
