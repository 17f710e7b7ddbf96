//! The idle status reads against the baseline, in interleaved rounds: at each concurrency every round measures the
//! baseline, REST and GraphQL one after another, and a figure's ratio is the median of its rounds' ratios. A
//! shared two-core host drifts by a third between minutes; a round's three runs lie seconds apart, so the ratios
//! hold where figures measured minutes apart did not. Each run also gives the CPU time its server spent per read,
//! which depends on what a read does far more than on what else the host runs.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::profile::process_cpu_seconds;
use crate::{CONCURRENCIES, Result, RssSampler, Stats, Target, apiserver_requests, load};

/// The targets of each round, the baseline first.
const TARGETS: [Target; 3] = [Target::Baseline, Target::Rest, Target::Graphql];

/// Where the reads are sent and what they read.
pub struct ReadTargets<'a> {
    pub baseline: &'a str,
    pub baseline_pid: u32,
    pub api: &'a str,
    pub server_pid: u32,
    pub seeded: Arc<Vec<(Uuid, Uuid)>>,
}

/// One target's runs at one concurrency, a run per round.
struct Runs {
    target: Target,
    concurrency: usize,
    stats: Vec<Stats>,
    apiserver_requests: Vec<f64>,
    /// The CPU time of the run's server per read, in microseconds.
    cpu_us_per_read: Vec<f64>,
}

/// Every round's reads; the rows of the table, and the server's largest RSS under the reads.
pub async fn measure(
    http: &reqwest::Client,
    admin: &Client,
    targets: &ReadTargets<'_>,
    rounds: usize,
    duration: Duration,
    background_per_sec: f64,
) -> Result<(Vec<Value>, u64)> {
    let mut runs = Vec::new();
    let mut rss_max = 0;
    for concurrency in CONCURRENCIES {
        let first = runs.len();
        runs.extend(TARGETS.map(|target| Runs {
            target,
            concurrency,
            stats: vec![],
            apiserver_requests: vec![],
            cpu_us_per_read: vec![],
        }));
        for round in 1..=rounds {
            for (index, target) in TARGETS.into_iter().enumerate() {
                eprintln!("reads: {} at concurrency {concurrency}, round {round} of {rounds}...", target.name());
                let url = match target {
                    Target::Baseline => format!("http://{}/runtimes/", targets.baseline),
                    Target::Graphql => format!("http://{}/graphql", targets.api),
                    _ => format!("http://{}/api/v1/provisions/", targets.api),
                };
                let pid = if target == Target::Baseline { targets.baseline_pid } else { targets.server_pid };
                let sampler = RssSampler::start(targets.server_pid);
                let before = apiserver_requests(admin).await?;
                let cpu_before = process_cpu_seconds(pid).unwrap_or(f64::NAN);
                let stats = load(http, target, &url, &targets.seeded, concurrency, duration).await;
                // Includes the warm-up's reads, as the CPU time does.
                let reads = (stats.ok + stats.warmup_ok).max(1) as f64;
                let cpu_us_per_read = (process_cpu_seconds(pid).unwrap_or(f64::NAN) - cpu_before) * 1e6 / reads;
                let during = apiserver_requests(admin).await? - before;
                let rss = sampler.stop().await;
                if target != Target::Baseline {
                    rss_max = rss_max.max(rss);
                }
                eprintln!(
                    "  {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, errors {}, server CPU {:.0} us/read",
                    stats.rps(),
                    stats.p50,
                    stats.p99,
                    stats.p999,
                    stats.errors,
                    cpu_us_per_read
                );
                let target_runs = &mut runs[first + index];
                target_runs.stats.push(stats);
                target_runs.apiserver_requests.push(during);
                target_runs.cpu_us_per_read.push(cpu_us_per_read);
            }
        }
    }
    let rows = runs.iter().map(|target_runs| row(target_runs, &runs, background_per_sec)).collect();
    Ok((rows, rss_max))
}

/// A target's row at one concurrency: the figures of its median round by req/s, and each ratio the median of the
/// rounds' ratios to the baseline's run of the same round.
fn row(target_runs: &Runs, all: &[Runs], background_per_sec: f64) -> Value {
    let Runs { target, concurrency, stats, apiserver_requests, cpu_us_per_read } = target_runs;
    let baseline = all
        .iter()
        .find(|runs| runs.target == Target::Baseline && runs.concurrency == *concurrency)
        .expect("every concurrency has a baseline");
    let ratio = |of: fn(&Stats) -> f64| {
        median(
            stats.iter().zip(&baseline.stats).filter(|(_, base)| of(base) > 0.0).map(|(run, base)| of(run) / of(base)),
        )
    };
    let cpu_ratio = median(cpu_us_per_read.iter().zip(&baseline.cpu_us_per_read).map(|(run, base)| run / base));
    let middle = median_index(stats);
    let median_run = &stats[middle];
    let caused = apiserver_requests[middle] - background_per_sec * median_run.wall_secs;
    let per_read = (*target != Target::Baseline).then(|| caused / median_run.ok as f64);
    json!({
        "target": target.name(),
        "concurrency": concurrency,
        "rounds": stats.len(),
        "requests_per_second_by_round": stats.iter().map(Stats::rps).collect::<Vec<_>>(),
        "requests": median_run.ok,
        "errors": stats.iter().map(|run| run.errors).sum::<u64>(),
        "seconds": median_run.wall_secs,
        "requests_per_second": median_run.rps(),
        "p50_ms": median_run.p50,
        "p99_ms": median_run.p99,
        "p999_ms": median_run.p999,
        "max_ms": median_run.max,
        "server_cpu_us_per_read": median(cpu_us_per_read.iter().copied()),
        "ratio_to_baseline": {
            "requests_per_second": ratio(Stats::rps),
            "p50": ratio(|run| run.p50),
            "p99": ratio(|run| run.p99),
            "p999": ratio(|run| run.p999),
            "server_cpu_per_read": cpu_ratio,
        },
        "apiserver_requests_during_run": apiserver_requests[middle],
        "apiserver_requests_per_read": per_read,
    })
}

/// The index of the run with the median req/s (the lower middle of an even count).
fn median_index(stats: &[Stats]) -> usize {
    let mut order: Vec<usize> = (0..stats.len()).collect();
    order.sort_by(|a, b| stats[*a].rps().total_cmp(&stats[*b].rps()));
    order[(order.len() - 1) / 2]
}

/// The median of some values (the mean of the middle two of an even count); `None` for none.
pub(crate) fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let half = values.len() / 2;
    Some(if values.len() % 2 == 1 { values[half] } else { (values[half - 1] + values[half]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three rounds at 16 clients, each run answering `ok` reads in a second at `cpu_us_per_read`.
    fn runs(target: Target, ok: [u64; 3], cpu_us_per_read: [f64; 3]) -> Runs {
        Runs {
            target,
            concurrency: 16,
            stats: ok.map(|ok| Stats { ok, wall_secs: 1.0, ..Stats::default() }).to_vec(),
            apiserver_requests: vec![0.0; 3],
            cpu_us_per_read: cpu_us_per_read.to_vec(),
        }
    }

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_value_and_of_an_even_count_the_mean_of_the_middle_two() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), Some(2.0));
        assert_eq!(median([4.0, 1.0, 3.0, 2.0].into_iter()), Some(2.5));
        assert_eq!(median(std::iter::empty()), None);
    }

    #[test]
    fn a_ratio_is_the_median_of_the_rounds_ratios_not_the_ratio_of_the_medians() {
        // The host's speed differs between rounds; REST reaches 0.9, 0.5 and 1.0 of each round's baseline. The
        // ratio of the two medians (1500 / 2000) would say 0.75.
        let baseline = runs(Target::Baseline, [2000, 3000, 500], [100.0, 200.0, 50.0]);
        let rest = runs(Target::Rest, [1800, 1500, 500], [120.0, 240.0, 60.0]);
        let row = row(&rest, &[baseline], 0.0);
        assert!((row["ratio_to_baseline"]["requests_per_second"].as_f64().unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(row["requests_per_second"].as_f64(), Some(1500.0), "the median round's figures");
        assert!((row["ratio_to_baseline"]["server_cpu_per_read"].as_f64().unwrap() - 1.2).abs() < 1e-9);
    }
}
