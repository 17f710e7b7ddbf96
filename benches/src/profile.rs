//! Where the time of a measured row goes (issue 31 item 2): the CPU seconds of each process on the machine that
//! takes part (the service, PostgreSQL, the control plane, the bench itself), the statements the service sent by
//! kind, and on PostgreSQL what its active sessions waited for (sampled from `pg_stat_activity`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database, DatabaseBackend, Statement};
use serde_json::{Value, json};

use crate::Result;

/// The processes a row's CPU time is read for, by the name the kernel gives them (at most 15 characters).
const PROCESSES: [(&str, &str); 4] = [
    ("postgres", "postgres"),
    ("kube-apiserver", "kube-apiserver"),
    ("etcd", "etcd"),
    ("kube-controller-manager", "kube-controller"),
];

/// One row's readings, started before its load and stopped after it.
pub struct Profile {
    service_pids: Vec<u32>,
    metrics_urls: Vec<String>,
    started: Instant,
    cpu: BTreeMap<String, f64>,
    statements: BTreeMap<String, f64>,
    waits: Option<WaitSampler>,
}

impl Profile {
    /// `pg_admin_url` is set for a PostgreSQL row: its sessions' waits are sampled.
    pub async fn start(
        http: &reqwest::Client,
        service_pids: Vec<u32>,
        metrics_urls: Vec<String>,
        pg_admin_url: Option<&str>,
    ) -> Result<Self> {
        let waits = match pg_admin_url {
            Some(url) => Some(WaitSampler::start(url).await?),
            None => None,
        };
        Ok(Profile {
            cpu: cpu_seconds(&service_pids),
            statements: statements_by_kind(http, &metrics_urls).await,
            service_pids,
            metrics_urls,
            started: Instant::now(),
            waits,
        })
    }

    pub async fn stop(self, http: &reqwest::Client) -> Value {
        let seconds = self.started.elapsed().as_secs_f64();
        let cpu_after = cpu_seconds(&self.service_pids);
        let statements_after = statements_by_kind(http, &self.metrics_urls).await;
        let cpu: BTreeMap<&String, f64> = cpu_after
            .iter()
            .map(|(process, after)| (process, after - self.cpu.get(process).copied().unwrap_or(0.0)))
            .collect();
        let per_second = |after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
            after
                .iter()
                .map(|(key, value)| (key.clone(), (value - before.get(key).copied().unwrap_or(0.0)) / seconds))
                .collect()
        };
        let waits = match self.waits {
            Some(sampler) => sampler.stop().await,
            None => Value::Null,
        };
        // CPU seconds per second of wall time: 1.0 is one core busy for the whole row.
        let cores_busy: BTreeMap<&String, f64> = cpu.iter().map(|(process, used)| (*process, used / seconds)).collect();
        json!({
            "seconds": seconds,
            "cores_busy": cores_busy,
            "statements_per_second": per_second(&statements_after, &self.statements),
            "active_sessions_by_wait": waits,
        })
    }
}

/// The CPU seconds (user and system) the service's processes and each of `PROCESSES` have used so far.
fn cpu_seconds(service_pids: &[u32]) -> BTreeMap<String, f64> {
    let ticks_per_second = clock_ticks_per_second();
    let own_pid = std::process::id();
    let mut used: BTreeMap<String, f64> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return used };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
        let Some((name, ticks)) = process_ticks(pid) else { continue };
        let process = if service_pids.contains(&pid) {
            "service"
        } else if pid == own_pid {
            "bench"
        } else if let Some((process, _)) = PROCESSES.iter().find(|(_, kernel_name)| *kernel_name == name) {
            process
        } else {
            continue;
        };
        *used.entry(process.to_owned()).or_default() += ticks as f64 / ticks_per_second;
    }
    used
}

/// The CPU seconds (user and system) one process has used so far.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    process_ticks(pid).map(|(_, ticks)| ticks as f64 / clock_ticks_per_second())
}

/// A process's name and its user plus system clock ticks, from `/proc/<pid>/stat`.
fn process_ticks(pid: u32) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may hold spaces: the fields after it start past the last `)`.
    let (head, tail) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_owned();
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // After the name: state (index 0), ... utime (11), stime (12).
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some((name, user + system))
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The statements the services have sent so far, by kind (`select`, `update`, ...), from their metrics.
async fn statements_by_kind(http: &reqwest::Client, metrics_urls: &[String]) -> BTreeMap<String, f64> {
    let mut by_kind: BTreeMap<String, f64> = BTreeMap::new();
    for url in metrics_urls {
        let Ok(response) = http.get(url).send().await else { continue };
        let text = response.text().await.unwrap_or_default();
        for line in text.lines().filter(|line| line.starts_with("provisioner_database_statements_total{")) {
            let kind = line.split("kind=\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("?");
            let count: f64 = line.rsplit(' ').next().and_then(|count| count.parse().ok()).unwrap_or(0.0);
            *by_kind.entry(kind.to_owned()).or_default() += count;
        }
    }
    by_kind
}

/// Samples, ten times a second, what PostgreSQL's active sessions wait for (`Lock`, `LWLock`, `IO`, ..., or
/// `cpu` when they wait for nothing).
struct WaitSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(u64, BTreeMap<String, u64>)>,
}

impl WaitSampler {
    async fn start(admin_url: &str) -> Result<Self> {
        let admin = Database::connect(admin_url).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let stop = stop.clone();
            tokio::spawn(async move {
                let query = "SELECT coalesce(wait_event_type, 'cpu') AS wait, count(*) AS sessions \
                             FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() GROUP BY 1";
                let (mut samples, mut sessions) = (0_u64, BTreeMap::<String, u64>::new());
                while !stop.load(Ordering::Relaxed) {
                    let statement = Statement::from_string(DatabaseBackend::Postgres, query);
                    if let Ok(rows) = admin.query_all_raw(statement).await {
                        samples += 1;
                        for row in rows {
                            let wait: String = row.try_get("", "wait").unwrap_or_default();
                            let count: i64 = row.try_get("", "sessions").unwrap_or_default();
                            *sessions.entry(wait).or_default() += count as u64;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (samples, sessions)
            })
        };
        Ok(WaitSampler { stop, task })
    }

    /// The mean number of active sessions by what they waited for.
    async fn stop(self) -> Value {
        self.stop.store(true, Ordering::Relaxed);
        let (samples, sessions) = self.task.await.unwrap_or_default();
        let mean: BTreeMap<String, f64> =
            sessions.into_iter().map(|(wait, total)| (wait, total as f64 / samples.max(1) as f64)).collect();
        json!(mean)
    }
}

/// `name figure, name figure, ...` of an object of figures, leaving out those below 0.005.
pub fn listed(value: &Value, precision: usize) -> String {
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    let entries = value.as_object().into_iter().flatten();
    let parts: Vec<String> = entries
        .filter(|(_, amount)| number(amount) >= 0.005)
        .map(|(name, amount)| format!("{name} {:.*}", precision, number(amount)))
        .collect();
    if parts.is_empty() { "-".to_owned() } else { parts.join(", ") }
}
