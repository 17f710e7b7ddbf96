//! What the worker makes of a store call that failed: a database it cannot reach is the database's outage, told
//! once by [`Dependency::Database`] (not once per poll, renewal and run); any other failure is the call's own.

use crate::store;
use crate::telemetry::Dependency;

/// `error` is `None` when the call timed out; `call` says what it was for, such as "claiming an operation".
pub(super) fn failed(error: Option<&store::Error>, call: &str) {
    match error {
        Some(error) if !error.is_unavailable() => tracing::warn!(%error, "{call} failed"),
        Some(error) => Dependency::Database.failed(&format_args!("{call}: {error}")),
        None => Dependency::Database.failed(&format_args!("{call}: no answer in time")),
    }
}

/// A WARN line, or INFO while the database is away: a run that stops because of the outage needs nobody (it is
/// resumed once the database is back), and the outage itself is told once.
macro_rules! warn_unless_database_away {
    ($($line:tt)+) => {
        if $crate::telemetry::Dependency::Database.is_down() {
            tracing::info!($($line)+)
        } else {
            tracing::warn!($($line)+)
        }
    };
}
pub(super) use warn_unless_database_away;
