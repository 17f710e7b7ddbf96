//! Every statement the store sends, counted and timed: how many statements a request costs shows on the metrics
//! endpoint, and a slow or failing database shows before requests time out.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sea_orm::DatabaseConnection;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatementLabels {
    /// What the statement does, from its first word.
    kind: &'static str,
    /// `ok` or `error`.
    result: &'static str,
}

/// What a statement does: which statements a load sends shows where the database's time goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StatementKind {
    Select,
    Insert,
    Update,
    Delete,
    /// Anything else: `WITH`, DDL, `PRAGMA`.
    Other,
}

impl StatementKind {
    fn of(sql: &str) -> Self {
        let first = sql.trim_start().split(|c: char| !c.is_ascii_alphabetic()).next().unwrap_or_default();
        match first.to_ascii_uppercase().as_str() {
            "SELECT" => StatementKind::Select,
            "INSERT" => StatementKind::Insert,
            "UPDATE" => StatementKind::Update,
            "DELETE" => StatementKind::Delete,
            _ => StatementKind::Other,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            StatementKind::Select => "select",
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
            StatementKind::Other => "other",
        }
    }
}

/// The statement counter and durations of one store; cheap to clone (the clones count together).
#[derive(Clone)]
pub struct StatementMetrics {
    statements: Family<StatementLabels, Counter>,
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
        registry.register("database_statements", "SQL statements sent, by kind and result", self.statements.clone());
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
            let kind = StatementKind::of(&info.statement.sql).as_str();
            metrics.statements.get_or_create(&StatementLabels { kind, result }).inc();
            metrics.duration.observe(info.elapsed.as_secs_f64());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::StatementKind;

    #[test]
    fn a_statement_is_of_the_kind_its_first_word_says() {
        assert_eq!(StatementKind::of("SELECT \"runtime\".\"id\" FROM \"runtime\""), StatementKind::Select);
        assert_eq!(StatementKind::of("  insert INTO operation VALUES ($1)"), StatementKind::Insert);
        assert_eq!(StatementKind::of("UPDATE \"operation\" SET"), StatementKind::Update);
        assert_eq!(StatementKind::of("DELETE FROM job_log"), StatementKind::Delete);
        assert_eq!(StatementKind::of("WITH due AS (SELECT 1) UPDATE operation"), StatementKind::Other);
        assert_eq!(StatementKind::of("PRAGMA foreign_keys = ON"), StatementKind::Other);
    }
}
