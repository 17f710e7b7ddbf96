//! Every statement the store sends, counted and timed: how many statements a request costs shows on the metrics
//! endpoint, and a slow or failing database shows before requests time out.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sea_orm::DatabaseConnection;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    /// `ok` or `error`.
    result: &'static str,
}

/// The statement counter and durations of one store; cheap to clone (the clones count together).
#[derive(Clone)]
pub struct StatementMetrics {
    statements: Family<ResultLabels, Counter>,
    duration: Histogram,
}

impl Default for StatementMetrics {
    fn default() -> Self {
        StatementMetrics {
            statements: Family::default(),
            duration: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
        }
    }
}

impl StatementMetrics {
    /// Adds the metrics to `registry` (whose prefix they take).
    pub fn register(&self, registry: &mut Registry) {
        // Counters get the `_total` suffix from the encoder.
        registry.register("database_statements", "SQL statements sent, by result", self.statements.clone());
        registry.register(
            "database_statement_duration_seconds",
            "Duration of each SQL statement",
            self.duration.clone(),
        );
    }

    /// Counts and times every statement `connection` (and each of its transactions) sends from now on.
    pub(super) fn observe(&self, connection: &mut DatabaseConnection) {
        let metrics = self.clone();
        connection.set_metric_callback(move |info| {
            let result = if info.failed { "error" } else { "ok" };
            metrics.statements.get_or_create(&ResultLabels { result }).inc();
            metrics.duration.observe(info.elapsed.as_secs_f64());
        });
    }
}
