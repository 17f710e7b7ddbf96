//! Exponential backoff with jitter for retrying transient failures.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Delays that double from `initial` up to `max`; each is drawn uniformly from its upper half, so that callers
/// retrying after the same outage spread out instead of hitting the recovered service together.
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempts: u32,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff { initial, max, attempts: 0 }
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.initial.saturating_mul(1 << self.attempts.min(16)).min(self.max);
        self.attempts += 1;
        let half = ceiling / 2;
        half + half.mul_f64(random_fraction())
    }
}

/// `period` give or take a quarter, drawn uniformly: periodic work of several processes started together drifts
/// apart instead of arriving at once.
pub fn jittered(period: Duration) -> Duration {
    period.mul_f64(0.75 + random_fraction() / 2.0)
}

/// A uniformly distributed fraction in [0, 1) from the standard library's randomly seeded hasher; good enough
/// for jitter, and it saves a dependency.
fn random_fraction() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const INITIAL: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(30);

    #[test]
    fn a_jittered_period_stays_within_a_quarter_of_it() {
        let period = Duration::from_secs(20);
        let drawn: Vec<Duration> = (0..200).map(|_| jittered(period)).collect();
        assert!(drawn.iter().all(|delay| (Duration::from_secs(15)..=Duration::from_secs(25)).contains(delay)));
        assert!(drawn.iter().any(|delay| *delay != drawn[0]), "not all the same");
    }

    #[test]
    fn delays_grow_exponentially_within_jittered_bounds_and_cap() {
        let mut backoff = Backoff::new(INITIAL, MAX);
        for attempt in 0..12u32 {
            let ceiling = INITIAL.saturating_mul(1 << attempt).min(MAX);
            let delay = backoff.next_delay();
            assert!(delay >= ceiling / 2 && delay <= ceiling, "attempt {attempt}: {delay:?} outside {ceiling:?}");
        }
        assert_eq!(backoff.attempts(), 12);
    }

    #[test]
    fn jitter_spreads_delays() {
        let delays: std::collections::HashSet<_> =
            (0..20).map(|_| Backoff { initial: INITIAL, max: MAX, attempts: 5 }.next_delay()).collect();
        assert!(delays.len() > 10, "{delays:?}");
    }
}
