//! Logs (tracing, JSON or text) and Prometheus metrics.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::domain::{OperationState, OperationType};
use crate::store::OperationCount;

/// The same logs as terraform-runner's.
pub use process_support::logging::{LogFormat, init_tracing};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    r#type: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabels {
    r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FinishedLabels {
    r#type: String,
    state: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: String,
}

/// The service's metrics; cheap to clone (shared registry).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<HttpLabels, Histogram>,
    operations: Family<OperationLabels, Gauge>,
    runs_started: Family<TypeLabels, Counter>,
    runs_finished: Family<FinishedLabels, Counter>,
    runs_in_flight: Gauge,
    queued: Gauge,
    step_duration: Family<StageLabels, Histogram>,
    token_reviews: Family<ResultLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub const CONTENT_TYPE: &'static str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("provisioner");
        let http_requests = Family::<HttpLabels, Counter>::default();
        // Counters get the `_total` suffix from the encoder.
        registry.register("http_requests", "HTTP requests by route and status", http_requests.clone());
        let http_duration = Family::<HttpLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register("http_request_duration_seconds", "HTTP request durations", http_duration.clone());
        let operations = Family::<OperationLabels, Gauge>::default();
        registry.register("operations", "Stored operations by type and state", operations.clone());
        let runs_started = Family::<TypeLabels, Counter>::default();
        registry.register("operations_started", "Runs started by the worker, by type", runs_started.clone());
        let runs_finished = Family::<FinishedLabels, Counter>::default();
        registry.register("operations_finished", "Runs finished, by type, state and reason", runs_finished.clone());
        let runs_in_flight = Gauge::default();
        registry.register("operations_in_flight", "Runs this process is driving now", runs_in_flight.clone());
        let queued = Gauge::default();
        registry.register("operations_queued", "Operations waiting for a worker", queued.clone());
        let step_duration = Family::<StageLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.01, 3.0, 12))
        });
        registry.register("operation_step_duration_seconds", "Duration of each run step", step_duration.clone());
        let token_reviews = Family::<ResultLabels, Counter>::default();
        registry.register("token_reviews", "TokenReviews sent (cache misses), by result", token_reviews.clone());
        Metrics {
            inner: Arc::new(Inner {
                registry,
                http_requests,
                http_duration,
                operations,
                runs_started,
                runs_finished,
                runs_in_flight,
                queued,
                step_duration,
                token_reviews,
            }),
        }
    }

    pub fn observe_http(&self, method: &str, route: &str, status: u16, duration: Duration) {
        let labels = HttpLabels { method: method.to_owned(), route: route.to_owned(), status };
        self.inner.http_requests.get_or_create(&labels).inc();
        self.inner.http_duration.get_or_create(&labels).observe(duration.as_secs_f64());
    }

    /// Refreshes the stored-operation gauges, including the queue depth (the Pending ones).
    pub fn set_operation_counts(&self, counts: &[OperationCount]) {
        let queued: u64 =
            counts.iter().filter(|count| count.state == OperationState::Pending).map(|count| count.count).sum();
        self.inner.queued.set(i64::try_from(queued).unwrap_or(i64::MAX));
        self.inner.operations.clear();
        for count in counts {
            let labels =
                OperationLabels { r#type: format!("{:?}", count.operation_type), state: format!("{:?}", count.state) };
            self.inner.operations.get_or_create(&labels).set(count.count as i64);
        }
    }

    pub fn run_started(&self, operation_type: OperationType) {
        self.inner.runs_started.get_or_create(&TypeLabels { r#type: format!("{operation_type:?}") }).inc();
        self.inner.runs_in_flight.inc();
    }

    /// `finished` is the end state and reason, or `None` when the run stopped early and will be resumed.
    pub fn run_ended(&self, operation_type: OperationType, finished: Option<(OperationState, &str)>) {
        self.inner.runs_in_flight.dec();
        if let Some((state, reason)) = finished {
            let labels = FinishedLabels {
                r#type: format!("{operation_type:?}"),
                state: format!("{state:?}"),
                reason: reason.to_owned(),
            };
            self.inner.runs_finished.get_or_create(&labels).inc();
        }
    }

    pub fn observe_step(&self, stage: &str, duration: Duration) {
        self.inner
            .step_duration
            .get_or_create(&StageLabels { stage: stage.to_owned() })
            .observe(duration.as_secs_f64());
    }

    /// `result` is `authenticated`, `rejected` or `error`.
    pub fn token_reviewed(&self, result: &str) {
        self.inner.token_reviews.get_or_create(&ResultLabels { result: result.to_owned() }).inc();
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)
            .expect("writing to a String cannot fail");
        text
    }
}
