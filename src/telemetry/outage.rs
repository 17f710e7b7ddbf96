//! Whether this process can reach each dependency, told once per outage (issue #54 item 6): one WARN line when a
//! dependency goes away (its first failed call), one INFO line when it is back (its first answer after), with the
//! outage's duration and how many calls failed meanwhile. Every other failure of the same outage is logged at
//! DEBUG, so that an outage is one signal rather than a line per request, probe and worker loop. The state is the
//! process's ([`PROCESS`]), as its log is; `provisioner_dependency_up` and `provisioner_dependency_outages_total`
//! show it to Prometheus.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// What this process calls and can lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependency {
    Database,
    /// The API server of the cluster the Jobs run in.
    Kubernetes,
}

impl Dependency {
    const ALL: [Dependency; 2] = [Dependency::Database, Dependency::Kubernetes];

    pub fn as_str(self) -> &'static str {
        match self {
            Dependency::Database => "database",
            Dependency::Kubernetes => "kubernetes",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Its first failure logs that it went away; later ones of the same outage only at DEBUG.
    pub fn failed(self, error: &dyn Display) {
        PROCESS.failed(self, error);
    }

    /// It answered: the first answer after an outage logs that it is back, with the outage's duration.
    pub fn answered(self) {
        PROCESS.answered(self);
    }

    /// Whether its last call failed: a consequence of the outage (a run stopping) then need not warn again.
    pub fn is_down(self) -> bool {
        PROCESS.is_down(self)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DependencyLabels {
    dependency: &'static str,
}

/// The process's dependencies: what its log and metrics say of them.
pub static PROCESS: LazyLock<Availability> = LazyLock::new(Availability::default);

/// The state of each [`Dependency`], and its metrics.
#[derive(Default)]
pub struct Availability {
    states: [State; Dependency::ALL.len()],
    up: Family<DependencyLabels, Gauge>,
    outages: Family<DependencyLabels, Counter>,
}

#[derive(Default)]
struct State {
    /// Read without the lock, so that an answer while all is well costs one load.
    down: AtomicBool,
    outage: Mutex<Option<Outage>>,
}

struct Outage {
    since: Instant,
    failures: u64,
}

impl Availability {
    /// Registers its metrics in `registry` (the service's, under its prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "dependency_up",
            "Whether the dependency answered this process's last call to it (1) or not (0)",
            self.up.clone(),
        );
        registry.register(
            "dependency_outages",
            "Outages of the dependency this process saw: a failed call after an answer",
            self.outages.clone(),
        );
    }

    pub fn failed(&self, dependency: Dependency, error: &dyn Display) {
        let labels = DependencyLabels { dependency: dependency.as_str() };
        self.up.get_or_create(&labels).set(0);
        let state = &self.states[dependency.index()];
        let mut outage = state.outage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match outage.as_mut() {
            Some(outage) => {
                outage.failures += 1;
                tracing::debug!(dependency = dependency.as_str(), %error, "dependency still unavailable");
            }
            None => {
                *outage = Some(Outage { since: Instant::now(), failures: 1 });
                state.down.store(true, Ordering::Relaxed);
                self.outages.get_or_create(&labels).inc();
                tracing::warn!(dependency = dependency.as_str(), %error, "dependency unavailable");
            }
        }
    }

    pub fn answered(&self, dependency: Dependency) {
        let labels = DependencyLabels { dependency: dependency.as_str() };
        self.up.get_or_create(&labels).set(1);
        let state = &self.states[dependency.index()];
        if !state.down.load(Ordering::Relaxed) {
            return;
        }
        let mut outage = state.outage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(ended) = outage.take() {
            state.down.store(false, Ordering::Relaxed);
            tracing::info!(
                dependency = dependency.as_str(),
                duration_seconds = ended.since.elapsed().as_secs_f64(),
                failed_calls = ended.failures,
                "dependency available again"
            );
        }
    }

    pub fn is_down(&self, dependency: Dependency) -> bool {
        self.states[dependency.index()].down.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(availability: &Availability) -> String {
        let mut registry = Registry::default();
        availability.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn an_outage_is_counted_once_and_ends_at_the_first_answer() {
        let availability = Availability::default();
        availability.answered(Dependency::Database);
        assert!(!availability.is_down(Dependency::Database));
        for _ in 0..5 {
            availability.failed(Dependency::Database, &"connection refused");
        }
        assert!(availability.is_down(Dependency::Database));
        assert!(!availability.is_down(Dependency::Kubernetes));
        let text = metric(&availability);
        assert!(text.contains("dependency_up{dependency=\"database\"} 0"), "{text}");
        assert!(text.contains("dependency_outages_total{dependency=\"database\"} 1"), "{text}");
        availability.answered(Dependency::Database);
        availability.answered(Dependency::Database);
        assert!(!availability.is_down(Dependency::Database));
        availability.failed(Dependency::Database, &"connection refused");
        let text = metric(&availability);
        assert!(text.contains("dependency_outages_total{dependency=\"database\"} 2"), "{text}");
    }

    /// The level and message of every event logged at INFO or above.
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<Mutex<Vec<(tracing::Level, String)>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Lines {
        fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            struct Message(String);
            impl tracing::field::Visit for Message {
                fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                    if field.name() == "message" {
                        self.0 = format!("{value:?}");
                    }
                }
            }
            let level = *event.metadata().level();
            if level <= tracing::Level::INFO {
                let mut message = Message(String::new());
                event.record(&mut message);
                self.0.lock().unwrap().push((level, message.0));
            }
        }
    }

    #[test]
    fn an_outage_writes_one_line_when_it_starts_and_one_when_it_ends() {
        use tracing_subscriber::layer::SubscriberExt;
        let lines = Lines::default();
        let availability = Availability::default();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(lines.clone()), || {
            availability.answered(Dependency::Database);
            for _ in 0..100 {
                availability.failed(Dependency::Database, &"connection refused");
            }
            for _ in 0..10 {
                availability.answered(Dependency::Database);
            }
        });
        let lines = lines.0.lock().unwrap().clone();
        assert_eq!(
            lines,
            [
                (tracing::Level::WARN, "dependency unavailable".to_owned()),
                (tracing::Level::INFO, "dependency available again".to_owned())
            ]
        );
    }

    #[test]
    fn the_state_of_one_dependency_is_its_own() {
        let availability = Availability::default();
        availability.failed(Dependency::Kubernetes, &"timed out");
        availability.answered(Dependency::Database);
        assert!(availability.is_down(Dependency::Kubernetes));
        let text = metric(&availability);
        assert!(text.contains("dependency_up{dependency=\"database\"} 1"), "{text}");
        assert!(text.contains("dependency_up{dependency=\"kubernetes\"} 0"), "{text}");
    }
}
