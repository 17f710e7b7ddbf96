//! REST status reads on PostgreSQL and on SQLite, idle and under a write load (issue 31 item 2), each row with
//! where its time went (`profile`): the CPU of each process, the statements by kind, PostgreSQL's waits.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use provisioner::store::Store;
use serde_json::{Value, json};
use test_control_plane::ControlPlane;
use test_support::provision_body;

use crate::profile::{Profile, listed};
use crate::{
    Args, CONCURRENCIES, Databases, MODULES_REPO_COMMIT, MODULES_REPO_URL, Result, Server, Stats, Target,
    in_fresh_namespace, load, seed,
};

/// Both databases' rows.
pub async fn reads_under_write_load(
    args: &Args,
    work: &Path,
    server_bin: &Path,
    http: &reqwest::Client,
    control_plane: &ControlPlane,
    base_env: &dyn Fn(&str) -> Vec<(String, String)>,
    databases: &mut Databases,
) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    for backend in [Backend::Postgres, Backend::Sqlite] {
        let database_url = match backend {
            Backend::Postgres => databases.create("load").await?,
            Backend::Sqlite => format!("sqlite://{}?mode=rwc", work.join("load.db").display()),
        };
        let env = in_fresh_namespace(control_plane, work, &format!("load-{}", backend.name()), base_env(&database_url))
            .await?;
        rows.extend(on_one_database(args, work, server_bin, http, env, backend).await?);
    }
    Ok(rows)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }
}

/// REST status reads at each concurrency on one database: first with the server idle (no worker), then with the
/// worker following `load_runs` runs (their Jobs never finish: no kubelet), renewing their leases,
/// and provisioning requests arriving at a fixed rate.
async fn on_one_database(
    args: &Args,
    work: &Path,
    server_bin: &Path,
    http: &reqwest::Client,
    env: Vec<(String, String)>,
    backend: Backend,
) -> Result<Vec<Value>> {
    let log = |phase: &str| work.join(format!("server-{}-{phase}.log", backend.name()));
    let mut rows = Vec::new();
    let row = |load: &str, concurrency: usize, stats: &Stats, profile: Value, rss_kib: u64| {
        json!({
            "backend": backend.name(), "load": load, "concurrency": concurrency, "requests": stats.ok,
            "errors": stats.errors, "requests_per_second": stats.rps(), "p50_ms": stats.p50, "p99_ms": stats.p99,
            "p999_ms": stats.p999, "profile": profile, "server_rss_kib": rss_kib,
        })
    };
    let database_url = env.iter().find(|(key, _)| key == "DATABASE_URL").ok_or("no DATABASE_URL")?.1.clone();
    let pg_url = (backend == Backend::Postgres).then_some(database_url.as_str());

    // Idle: runtimes written straight through the store, read by a server without a worker.
    let mut idle_env = env.clone();
    idle_env.push(("APP_DATABASE_MAX_CONNECTIONS".to_owned(), "16".to_owned()));
    let server = Server::start(server_bin, idle_env, &log("idle"), http).await?;
    let url = format!("http://{}/api/v1/provisions/", server.api);
    let store = Store::connect(&database_url, 4, Duration::from_secs(10)).await?;
    let ids = Arc::new(seed(&store, 1_000).await?);
    drop(store);
    for concurrency in CONCURRENCIES {
        eprintln!("reads on {} (idle) at concurrency {concurrency}...", backend.name());
        let metrics = vec![format!("http://{}/metrics", server.metrics)];
        let profile = Profile::start(http, vec![server.pid], metrics, pg_url).await?;
        let stats = load(http, Target::Rest, &url, &ids, concurrency, args.duration).await;
        rows.push(row("idle", concurrency, &stats, profile.stop(http).await, server.rss_kib()?));
    }
    server.stop().await;

    // Under load: the worker follows the runs, which heartbeat; POSTs keep coming.
    let mut load_env = env;
    load_env.extend(
        [
            ("MODULES_REPO_URL", MODULES_REPO_URL.to_owned()),
            ("MODULES_REPO_COMMIT", MODULES_REPO_COMMIT.to_owned()),
            ("APP_DATABASE_MAX_CONNECTIONS", "16".to_owned()),
            ("APP_WORKER_LEASE", "3s".to_owned()),
            ("APP_WORKER_MAX_RUNS", (args.load_runs * 4).to_string()),
            ("APP_WORKER_CONCURRENCY", args.worker_concurrency.to_string()),
        ]
        .map(|(key, value)| (key.to_owned(), value)),
    );
    let server = Server::start(server_bin, load_env, &log("load"), http).await?;
    let posts = format!("http://{}/api/v1/provisions", server.api);
    eprintln!("{}: starting {} runs for the worker to follow...", backend.name(), args.load_runs);
    let started: Vec<Result<reqwest::Response, reqwest::Error>> = futures::stream::iter(0..args.load_runs)
        .map(|index| http.post(&posts).json(&provision_body(&format!("load-{index}"))).send())
        .buffer_unordered(16)
        .collect()
        .await;
    let accepted = started.iter().filter(|answer| answer.as_ref().is_ok_and(|a| a.status().is_success())).count();
    eprintln!("  {accepted} accepted; waiting until the worker follows them, each waiting for its Job...");
    let metrics = format!("http://{}/metrics", server.metrics);
    let deadline = Instant::now() + Duration::from_secs(120);
    // Claimed is not enough: a claimed run still records its stages and creates its Job, which would count as load
    // of the first loaded row. The worker also runs the seeded runtimes' provisionings.
    while Instant::now() < deadline {
        let in_flight = metric(http, &metrics, IN_FLIGHT).await;
        if in_flight >= accepted as f64 && metric(http, &metrics, WAITING_FOR_JOBS).await >= in_flight {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stop_posting = Arc::new(AtomicBool::new(false));
    let poster = {
        let (http, posts, stop) = (http.clone(), posts.clone(), stop_posting.clone());
        let interval = Duration::from_secs_f64(1.0 / args.load_posts_per_second.max(0.1));
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            let mut index = 0;
            while !stop.load(Ordering::Relaxed) {
                ticker.tick().await;
                let body = provision_body(&format!("load-post-{index}"));
                let _ = http.post(&posts).json(&body).send().await;
                index += 1;
            }
            index
        })
    };
    for concurrency in CONCURRENCIES {
        eprintln!("reads on {} (under write load) at concurrency {concurrency}...", backend.name());
        let url = format!("http://{}/api/v1/provisions/", server.api);
        let profile = Profile::start(http, vec![server.pid], vec![metrics.clone()], pg_url).await?;
        let stats = load(http, Target::Rest, &url, &ids, concurrency, args.duration).await;
        rows.push(row("write load", concurrency, &stats, profile.stop(http).await, server.rss_kib()?));
    }
    stop_posting.store(true, Ordering::Relaxed);
    let posted = poster.await.unwrap_or(0);
    eprintln!("  {posted} provisioning requests posted during the reads");
    server.stop().await;
    Ok(rows)
}

/// The runs the worker follows.
const IN_FLIGHT: &str = "provisioner_operations_in_flight ";
/// The runs past `CreateJob` (each waits for its Job then): the steps of that stage the worker finished.
const WAITING_FOR_JOBS: &str = "provisioner_operation_step_duration_seconds_count{stage=\"CreateJob\"} ";

/// The value of the metric whose line starts with `line_prefix`; 0 when the server does not show it (yet).
async fn metric(http: &reqwest::Client, metrics_url: &str, line_prefix: &str) -> f64 {
    let Ok(response) = http.get(metrics_url).send().await else { return 0.0 };
    let text = response.text().await.unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(line_prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The rows as a table: each row against the idle row of its database and concurrency, then where each row's time
/// went.
pub fn print(figures: &Value) {
    let rows = figures["reads_under_write_load"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return;
    }
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    let parameters = &figures["parameters"];
    println!(
        "\nREST status reads by database, idle and under write load ({} runs followed, {} POSTs/s):",
        parameters["load_runs"], parameters["load_posts_per_second"]
    );
    println!(
        "{:<9} {:<11} {:>4} {:>9} {:>8} {:>8} {:>7}  {:>15}  {:>15}",
        "database", "load", "conc", "req/s", "p50 ms", "p99 ms", "errors", "vs idle rps/p99", "vs postgres rps"
    );
    let find = |backend: &Value, load: &str, concurrency: &Value| {
        rows.iter().find(|row| row["backend"] == *backend && row["load"] == load && row["concurrency"] == *concurrency)
    };
    for row in &rows {
        let idle = find(&row["backend"], "idle", &row["concurrency"]);
        let postgres = find(&Value::from("postgres"), row["load"].as_str().unwrap_or_default(), &row["concurrency"]);
        let of = |other: &Value, field: &str| number(&row[field]) / number(&other[field]);
        let vs_idle = idle.map_or("-".to_owned(), |idle| {
            format!("{:.2}x/{:.2}x", of(idle, "requests_per_second"), of(idle, "p99_ms"))
        });
        let vs_postgres = postgres.map_or("-".to_owned(), |pg| format!("{:.2}x", of(pg, "requests_per_second")));
        println!(
            "{:<9} {:<11} {:>4} {:>9.0} {:>8.2} {:>8.2} {:>7}  {:>15}  {:>15}",
            row["backend"].as_str().unwrap_or_default(),
            row["load"].as_str().unwrap_or_default(),
            row["concurrency"].as_u64().unwrap_or(0),
            number(&row["requests_per_second"]),
            number(&row["p50_ms"]),
            number(&row["p99_ms"]),
            row["errors"].as_u64().unwrap_or(0),
            vs_idle,
            vs_postgres,
        );
    }
    println!("\nwhere each row's time went: cores busy by process; statements/s the service sent, by kind;");
    println!("PostgreSQL's active sessions (mean) by what they waited for");
    for row in &rows {
        let profile = &row["profile"];
        println!(
            "{:<9} {:<11} {:>4}  server RSS {:.1} MiB; cores: {}\n{:>27}  statements/s: {}\n{:>27}  sessions: {}",
            row["backend"].as_str().unwrap_or_default(),
            row["load"].as_str().unwrap_or_default(),
            row["concurrency"].as_u64().unwrap_or(0),
            number(&row["server_rss_kib"]) / 1024.0,
            listed(&profile["cores_busy"], 2),
            "",
            listed(&profile["statements_per_second"], 0),
            "",
            listed(&profile["active_sessions_by_wait"], 2),
        );
    }
}
