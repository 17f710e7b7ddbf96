//! Logs (tracing, JSON or text) and Prometheus metrics.

mod certificates;
mod outage;
mod process;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::domain::run::Stage;
use crate::domain::{FailureReason, OperationState, OperationType};
use crate::store::{OperationCount, StatementMetrics};

pub use certificates::{CertificateMetrics, CertificateRead};
pub use outage::Dependency;
/// The same logs and traces as terraform-runner's.
pub use process_support::logging::{LineFilter, LogFormat, Tracing};
pub use process_support::traces::{SPAN_TARGET, TraceSettings, continue_trace, current_traceparent};

/// sqlx warns of every pooled connection an outage broke; [`Dependency::failed`] tells of the outage once.
const QUIET_DEPENDENCIES: &str = "sqlx_core::pool::connection=error";

/// [`process_support::logging::init_tracing`] with [`QUIET_DEPENDENCIES`] after `level`, unless `level` names sqlx.
pub fn init_tracing(level: &str, format: LogFormat, traces: &TraceSettings, filter: Option<LineFilter>) -> Tracing {
    let quiet = level.trim().is_empty() || level.contains("sqlx");
    let level = if quiet { level.to_owned() } else { format!("{level},{QUIET_DEPENDENCIES}") };
    process_support::logging::init_tracing(&level, format, traces, filter)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    /// [`method_label`]: a caller can send any method name.
    method: &'static str,
    route: String,
    status: u16,
}

/// The standard methods by name; anything a caller invents is `other`, so that no request adds a series.
fn method_label(method: &str) -> &'static str {
    const KNOWN: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"];
    KNOWN.into_iter().find(|known| *known == method).unwrap_or("other")
}

// Labels from enums (their `as_str()`), never free text.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    r#type: &'static str,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabels {
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FinishedLabels {
    r#type: &'static str,
    state: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OrphanLabels {
    outcome: &'static str,
}

/// What became of resources a deprovisioning found carrying the runtime's tag that no state knew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrphanOutcome {
    /// The runner deleted it.
    Deleted,
    /// It is still there: the deprovisioning failed as `leftovers`.
    Left,
    /// An apply found it (left by an earlier run killed before it saved its state); the deprovisioning deletes it.
    Recorded,
    /// It carries the runtime's tag but no run of the runtime created it: named, never deleted.
    Foreign,
}

impl OrphanOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            OrphanOutcome::Deleted => "deleted",
            OrphanOutcome::Left => "left",
            OrphanOutcome::Recorded => "recorded",
            OrphanOutcome::Foreign => "foreign",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

/// The build's constants ([`crate::build_info`]), never anything a caller sends.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
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
    awaiting_approval: Gauge,
    oldest_age: Family<OperationLabels, Gauge<f64, AtomicU64>>,
    orphans_found: Family<OrphanLabels, Counter>,
    step_duration: Family<StageLabels, Histogram>,
    token_reviews: Family<ResultLabels, Counter>,
    statements: StatementMetrics,
    certificates: CertificateMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub const CONTENT_TYPE: &'static str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    pub fn new() -> Self {
        // The process's own metrics have their standard names; the service's carry its prefix.
        let mut root = Registry::default();
        root.register_collector(Box::new(process::ProcessCollector));
        let registry = root.sub_registry_with_prefix("provisioner");
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
        let awaiting_approval = Gauge::default();
        registry.register(
            "operations_awaiting_approval",
            "Operations whose plan waits for a person's approval",
            awaiting_approval.clone(),
        );
        let oldest_age = Family::<OperationLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "operations_oldest_age_seconds",
            "Age of the oldest active operation (queued, running, or awaiting approval), by type and state",
            oldest_age.clone(),
        );
        let orphans_found = Family::<OrphanLabels, Counter>::default();
        // Both series exist from the start, so that `increase()` sees the first orphan.
        for outcome in [OrphanOutcome::Deleted, OrphanOutcome::Left, OrphanOutcome::Recorded, OrphanOutcome::Foreign] {
            drop(orphans_found.get_or_create(&OrphanLabels { outcome: outcome.as_str() }));
        }
        registry.register(
            "orphans_found",
            "Resources a deprovisioning found carrying the runtime's tag that no state knew, by what became of them",
            orphans_found.clone(),
        );
        let step_duration = Family::<StageLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.01, 3.0, 12))
        });
        registry.register("operation_step_duration_seconds", "Duration of each run step", step_duration.clone());
        let token_reviews = Family::<ResultLabels, Counter>::default();
        registry.register("token_reviews", "TokenReviews sent (cache misses), by result", token_reviews.clone());
        let statements = StatementMetrics::default();
        statements.register(registry);
        let certificates = CertificateMetrics::default();
        certificates.register(registry);
        outage::PROCESS.register(registry);
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels { version: crate::build_info::VERSION, commit: crate::build_info::COMMIT })
            .set(1);
        registry.register(
            "build_info",
            "The running build: always 1, labelled with its version and commit",
            build_info,
        );
        Metrics {
            inner: Arc::new(Inner {
                registry: root,
                http_requests,
                http_duration,
                operations,
                runs_started,
                runs_finished,
                runs_in_flight,
                queued,
                awaiting_approval,
                oldest_age,
                orphans_found,
                step_duration,
                token_reviews,
                statements,
                certificates,
            }),
        }
    }

    pub fn observe_http(&self, method: &str, route: &str, status: u16, duration: Duration) {
        let labels = HttpLabels { method: method_label(method), route: route.to_owned(), status };
        self.inner.http_requests.get_or_create(&labels).inc();
        self.inner.http_duration.get_or_create(&labels).observe(duration.as_secs_f64());
    }

    /// Refreshes the stored-operation gauges, including the queue depth (the Pending ones), the operations
    /// waiting for an approval, and the age of the oldest active ones (a queue that does not move, a run stuck).
    pub fn set_operation_counts(&self, counts: &[OperationCount]) {
        let in_state = |state: OperationState| -> i64 {
            let total: u64 = counts.iter().filter(|count| count.state == state).map(|count| count.count).sum();
            i64::try_from(total).unwrap_or(i64::MAX)
        };
        self.inner.queued.set(in_state(OperationState::Pending));
        self.inner.awaiting_approval.set(in_state(OperationState::AwaitingApproval));
        self.inner.operations.clear();
        self.inner.oldest_age.clear();
        let now = chrono::Utc::now();
        for count in counts {
            let labels = OperationLabels { r#type: count.operation_type.as_str(), state: count.state.as_str() };
            self.inner.operations.get_or_create(&labels).set(count.count as i64);
            if count.state.is_active() {
                let age = (now - count.oldest_created_at).to_std().unwrap_or_default();
                self.inner.oldest_age.get_or_create(&labels).set(age.as_secs_f64());
            }
        }
    }

    pub fn run_started(&self, operation_type: OperationType) {
        self.inner.runs_started.get_or_create(&TypeLabels { r#type: operation_type.as_str() }).inc();
        self.inner.runs_in_flight.inc();
    }

    /// `finished` is the end state and the failure's reason, or `None` when the run stopped early and will be
    /// resumed. A success is counted with reason `succeeded`.
    pub fn run_ended(&self, operation_type: OperationType, finished: Option<(OperationState, Option<FailureReason>)>) {
        self.inner.runs_in_flight.dec();
        if let Some((state, reason)) = finished {
            let labels = FinishedLabels {
                r#type: operation_type.as_str(),
                state: state.as_str(),
                reason: reason.map_or("succeeded", FailureReason::as_str),
            };
            self.inner.runs_finished.get_or_create(&labels).inc();
        }
    }

    pub fn orphans_found(&self, outcome: OrphanOutcome, resources: usize) {
        let labels = OrphanLabels { outcome: outcome.as_str() };
        self.inner.orphans_found.get_or_create(&labels).inc_by(u64::try_from(resources).unwrap_or(u64::MAX));
    }

    pub fn observe_step(&self, stage: Stage, duration: Duration) {
        self.inner.step_duration.get_or_create(&StageLabels { stage: stage.as_str() }).observe(duration.as_secs_f64());
    }

    /// `result` is `authenticated`, `rejected` or `error`.
    pub fn token_reviewed(&self, result: &str) {
        self.inner.token_reviews.get_or_create(&ResultLabels { result: result.to_owned() }).inc();
    }

    /// Where the store counts its statements.
    pub fn statements(&self) -> &StatementMetrics {
        &self.inner.statements
    }

    /// The certificate watch's.
    pub fn certificates(&self) -> &CertificateMetrics {
        &self.inner.certificates
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// Whether the process is shutting down, for `/readyz`: set once on the shutdown signal, before anything stops.
#[derive(Clone, Default)]
pub struct Draining(Arc<std::sync::atomic::AtomicBool>);

impl Draining {
    pub fn start(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Whether this process's worker is alive, for `/healthz`: the worker ticks it on every turn of its loop, the
/// supervisor marks it stopped when the worker's task ends.
#[derive(Clone)]
pub struct WorkerHealth {
    inner: Arc<WorkerHealthInner>,
}

struct WorkerHealthInner {
    started: std::time::Instant,
    /// Milliseconds after `started` of the last tick.
    last_tick_ms: std::sync::atomic::AtomicU64,
    state: std::sync::atomic::AtomicU8,
    /// A running worker that has not ticked for this long counts as stalled.
    stall_after: Duration,
}

/// What `/healthz` says about the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerStatus {
    /// This process runs no worker (no cluster or no modules repository configured); not a failure.
    Disabled,
    Running,
    /// Running, but its loop has not turned for longer than it ever should.
    Stalled,
    /// Its task ended: the process is going down.
    Stopped,
}

impl WorkerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerStatus::Disabled => "disabled",
            WorkerStatus::Running => "ok",
            WorkerStatus::Stalled => "stalled",
            WorkerStatus::Stopped => "stopped",
        }
    }

    pub fn is_healthy(self) -> bool {
        matches!(self, WorkerStatus::Disabled | WorkerStatus::Running)
    }
}

const WORKER_DISABLED: u8 = 0;
const WORKER_RUNNING: u8 = 1;
const WORKER_STOPPED: u8 = 2;

impl WorkerHealth {
    /// For a process that runs no worker.
    pub fn disabled() -> Self {
        Self::with_state(WORKER_DISABLED, Duration::MAX)
    }

    pub fn running(stall_after: Duration) -> Self {
        Self::with_state(WORKER_RUNNING, stall_after)
    }

    fn with_state(state: u8, stall_after: Duration) -> Self {
        WorkerHealth {
            inner: Arc::new(WorkerHealthInner {
                started: std::time::Instant::now(),
                last_tick_ms: Default::default(),
                state: state.into(),
                stall_after,
            }),
        }
    }

    pub fn tick(&self) {
        let elapsed = u64::try_from(self.inner.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.inner.last_tick_ms.store(elapsed, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn stopped(&self) {
        self.inner.state.store(WORKER_STOPPED, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn status(&self) -> WorkerStatus {
        match self.inner.state.load(std::sync::atomic::Ordering::Relaxed) {
            WORKER_DISABLED => WorkerStatus::Disabled,
            WORKER_STOPPED => WorkerStatus::Stopped,
            _ => {
                let last_tick =
                    Duration::from_millis(self.inner.last_tick_ms.load(std::sync::atomic::Ordering::Relaxed));
                if self.inner.started.elapsed().saturating_sub(last_tick) > self.inner.stall_after {
                    WorkerStatus::Stalled
                } else {
                    WorkerStatus::Running
                }
            }
        }
    }
}

#[cfg(test)]
mod worker_health_tests {
    use super::*;

    #[test]
    fn a_worker_is_healthy_while_it_ticks_and_not_once_stopped_or_stalled() {
        assert_eq!(WorkerHealth::disabled().status(), WorkerStatus::Disabled);
        let health = WorkerHealth::running(Duration::from_secs(60));
        health.tick();
        assert_eq!(health.status(), WorkerStatus::Running);
        health.stopped();
        assert_eq!(health.status(), WorkerStatus::Stopped);
        assert!(!health.status().is_healthy());

        // Ticks are kept in whole milliseconds: a bound of a few would make the check after a tick flaky.
        let stalled = WorkerHealth::running(Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(stalled.status(), WorkerStatus::Stalled);
        stalled.tick();
        assert_eq!(stalled.status(), WorkerStatus::Running);
    }
}
