//! `make bench`: figures for the provisioner against a real API server and PostgreSQL (issue 8).
//!
//! The server runs as a child process (the release `provisioner` binary next to this one), so its start-up time
//! and resident memory are its own. Phases: start-up; seeding N runtimes straight through the store (no worker);
//! status reads over REST and GraphQL at several concurrencies, against a bare axum baseline doing the same two
//! queries, and the same reads with the router and the baseline's handler called in-process; API-server requests
//! caused per read; a burst of provisioning requests with the worker running.
//! It prints a table and writes the same figures as JSON. It never asserts: the figures are the output.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

mod baseline;
mod fleet;
mod following;
mod in_process;
mod profile;
mod reads;
mod replicas;
mod write_load;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use provisioner::domain::{ProvisionRequest, Runtime, Topology};
use provisioner::store::{self, Store};
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use test_control_plane::ControlPlane;
use test_support::auth_service::FakeAuthService;
use test_support::provision_body;
use uuid::Uuid;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = Error> = std::result::Result<T, E>;

const MANIFEST: &str = include_str!("../../resources/cluster-provisioner.yaml");
const MODULES_REPO_URL: &str = "https://git.example.invalid/bench/terraform-modules.git";
const MODULES_REPO_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const SERVICE_ACCOUNT: &str = "cluster-provisioner";
/// The label selector of the provisioner's Jobs.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by=cluster-provisioner";
const CONCURRENCIES: [usize; 3] = [1, 16, 64];

struct Args {
    runtimes: usize,
    burst: usize,
    duration: Duration,
    /// Rounds of the idle status reads: each measures the baseline, REST and GraphQL in turn at a concurrency.
    rounds: usize,
    idle: Duration,
    worker_concurrency: usize,
    burst_timeout: Duration,
    out: PathBuf,
    server_bin: Option<PathBuf>,
    /// Runs the worker follows (each renewing its lease) during the reads under write load.
    load_runs: usize,
    /// Provisioning requests per second during the reads under write load.
    load_posts_per_second: f64,
    /// How many runs one process follows in each measure of what following costs the database.
    following: Vec<usize>,
    /// How many replicas share the burst in each row of the scale-out measure.
    replicas: Vec<usize>,
    /// Provisionings of the scale-out burst.
    scale_burst: usize,
    /// Runtimes of the fleet (each with ten operations).
    fleet_runtimes: usize,
    /// Only one measure: `reads` (start-up, seeding and the status reads), `burst`, `following`, `replicas`,
    /// `write-load` or `fleet`.
    only: Option<String>,
}

impl Args {
    fn parse() -> Result<Self> {
        let mut args = Args {
            runtimes: 10_000,
            burst: 1_000,
            duration: Duration::from_secs(5),
            rounds: 3,
            idle: Duration::from_secs(10),
            worker_concurrency: 16,
            burst_timeout: Duration::from_secs(120),
            out: PathBuf::from("target/bench/results.json"),
            server_bin: None,
            load_runs: 1_000,
            load_posts_per_second: 20.0,
            following: vec![10, 100, 1_000],
            replicas: vec![1, 2, 3],
            scale_burst: 2_000,
            fleet_runtimes: 5_000,
            only: None,
        };
        let mut raw = std::env::args().skip(1);
        while let Some(flag) = raw.next() {
            let mut value = || raw.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--runtimes" => args.runtimes = value()?.parse()?,
                "--burst" => args.burst = value()?.parse()?,
                "--duration" => args.duration = Duration::from_secs_f64(value()?.parse()?),
                "--rounds" => args.rounds = value()?.parse::<usize>()?.max(1),
                "--idle" => args.idle = Duration::from_secs_f64(value()?.parse()?),
                "--worker-concurrency" => args.worker_concurrency = value()?.parse()?,
                "--burst-timeout" => args.burst_timeout = Duration::from_secs_f64(value()?.parse()?),
                "--out" => args.out = PathBuf::from(value()?),
                "--server-bin" => args.server_bin = Some(PathBuf::from(value()?)),
                "--load-runs" => args.load_runs = value()?.parse()?,
                "--load-posts-per-second" => args.load_posts_per_second = value()?.parse()?,
                "--following" => {
                    args.following = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?;
                }
                "--replicas" => {
                    args.replicas = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?;
                }
                "--scale-burst" => args.scale_burst = value()?.parse()?,
                "--fleet-runtimes" => args.fleet_runtimes = value()?.parse()?,
                "--only" => match value()?.as_str() {
                    measure
                    @ ("reads" | "in-process" | "burst" | "following" | "replicas" | "write-load" | "fleet") => {
                        args.only = Some(measure.to_owned());
                    }
                    other => {
                        let expected = "reads, in-process, burst, following, replicas, write-load or fleet";
                        return Err(format!("--only {other:?}: expected {expected}").into());
                    }
                },
                "-h" | "--help" => {
                    println!(
                        "bench [--runtimes N (10000)] [--burst N (1000)] [--duration SECONDS per read run (5)] \
                         [--rounds N of the idle reads (3)] [--idle SECONDS of API-server background measure (10)] \
                         [--worker-concurrency N (16)] \
                         [--burst-timeout SECONDS (120)] [--out FILE (target/bench/results.json)] \
                         [--server-bin PATH (the provisioner binary next to this one)] \
                         [--load-runs N followed during the reads under write load (1000)] \
                         [--load-posts-per-second N (20)] [--following N,N,... runs followed (10,100,1000)] \
                         [--replicas N,N,... (1,2,3)] [--scale-burst N (2000)] [--fleet-runtimes N (5000)] \
                         [--only reads|in-process|burst|following|replicas|write-load|fleet]"
                    );
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument {other:?} (see --help)").into()),
            }
        }
        Ok(args)
    }
}

/// The service's allocator, so that the baseline (this binary) differs from the service only in what it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    provisioner::install_crypto_provider();
    let mut raw = std::env::args().skip(1);
    if raw.next().as_deref() == Some(baseline::SERVE_FLAG) {
        if let Err(error) = baseline::serve(&raw.next().unwrap_or_default()).await {
            eprintln!("baseline: {error}");
            std::process::exit(1);
        }
        return;
    }
    let args = match Args::parse() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("bench: {error}");
            std::process::exit(2);
        }
    };
    if let Err(error) = run(args).await {
        eprintln!("bench failed: {error}");
        std::process::exit(1);
    }
}

/// Everything that must be cleaned up whatever happens: the databases.
struct Databases {
    admin_url: String,
    names: Vec<String>,
}

impl Databases {
    async fn create(&mut self, purpose: &str) -> Result<String> {
        let name = format!("provisioner_bench_{purpose}_{}", Uuid::new_v4().simple());
        let admin = Database::connect(&self.admin_url).await?;
        admin.execute_unprepared(&format!("CREATE DATABASE \"{name}\"")).await?;
        self.names.push(name.clone());
        let (base, _) = self.admin_url.rsplit_once('/').ok_or("TEST_DATABASE_URL must end with a database name")?;
        Ok(format!("{base}/{name}"))
    }

    async fn drop_all(&self) {
        let Ok(admin) = Database::connect(&self.admin_url).await else { return };
        for name in &self.names {
            if let Err(error) =
                admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await
            {
                eprintln!("could not drop database {name}: {error}");
            }
        }
    }
}

async fn run(args: Args) -> Result<()> {
    let out_dir = args.out.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&out_dir)?;
    let work = out_dir.join(format!("run-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    // The child process resolves the kubeconfig's paths on its own: make them absolute.
    let work = work.canonicalize()?;
    let server_bin = match &args.server_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.parent().ok_or("no folder of the bench binary")?.join("provisioner"),
    };
    if !server_bin.is_file() {
        return Err(format!(
            "{} does not exist: build it with `cargo build --release --bin provisioner` (make bench does)",
            server_bin.display()
        )
        .into());
    }

    eprintln!("starting the test control plane...");
    let control_plane = ControlPlane::start().await?;
    let admin = control_plane.admin_client()?;
    let namespace = control_plane.new_namespace("bench").await?;
    control_plane.apply_rbac_manifest(MANIFEST, &namespace).await?;
    let token = control_plane.service_account_token(&namespace, SERVICE_ACCOUNT, &[]).await?;
    let kubeconfig = write_token_kubeconfig(&work, &control_plane, &token)?;

    let auth = FakeAuthService::start(&work).await;
    let mut databases = Databases {
        admin_url: std::env::var("TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres:postgres@127.0.0.1:5432/postgres".to_owned()),
        names: Vec::new(),
    };
    let result =
        phases(&args, &work, &server_bin, &control_plane, &admin, &namespace, &kubeconfig, &auth, &mut databases).await;
    databases.drop_all().await;
    let figures = result?;

    print_table(&figures);
    std::fs::write(&args.out, serde_json::to_string_pretty(&figures)?)?;
    println!("\nfigures written to {}", args.out.display());
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn phases(
    args: &Args,
    work: &Path,
    server_bin: &Path,
    control_plane: &ControlPlane,
    admin: &Client,
    namespace: &str,
    kubeconfig: &Path,
    auth: &FakeAuthService,
    databases: &mut Databases,
) -> Result<Value> {
    let http = reqwest::Client::builder().pool_max_idle_per_host(256).timeout(Duration::from_secs(30)).build()?;
    let base_env = |database_url: &str| -> Vec<(String, String)> {
        [
            ("DATABASE_URL", database_url),
            ("AUTH_SERVICE_BASE_URL", auth.base_url.as_str()),
            ("APP_AUTH_OAUTH_PATH", auth.client_file.to_str().unwrap_or_default()),
            ("JOB_NAMESPACE", namespace),
            ("KUBECONFIG", kubeconfig.to_str().unwrap_or_default()),
            // Reads measure the status path, not the caller authentication (a TokenReview per new token).
            ("APP_AUTH_ENABLED", "false"),
            // The requests name no ranges for their clusters' APIs, as Kyma's do.
            ("APP_API_ALLOWED_CIDRS", test_support::TEST_API_ALLOWED_CIDRS),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
    };

    // One measure alone: what following runs costs the database, reads under write load, or the scale-out.
    match args.only.as_deref() {
        Some("write-load") => {
            let rows =
                write_load::reads_under_write_load(args, work, server_bin, &http, control_plane, &base_env, databases)
                    .await?;
            return Ok(json!({ "machine": machine(), "parameters": parameters(args), "reads_under_write_load": rows }));
        }
        Some("burst") => {
            let (burst, rss, _) =
                burst_phase(args, work, server_bin, &http, admin, namespace, &base_env, databases).await?;
            return Ok(json!({ "machine": machine(), "burst": burst, "memory_kib": { "after_burst": rss } }));
        }
        Some("fleet") => {
            let rows = fleet::fleet(args, server_bin, work, &http, control_plane, &base_env, databases).await?;
            return Ok(json!({ "machine": machine(), "fleet": rows }));
        }
        Some("following") => {
            let rows =
                following::following_cost(&args.following, server_bin, work, &http, &base_env, databases).await?;
            return Ok(json!({ "machine": machine(), "following": rows }));
        }
        Some("replicas") => {
            let rows = replicas::scale_out(args, server_bin, work, &http, control_plane, &base_env, databases).await?;
            return Ok(json!({ "machine": machine(), "replicas": rows }));
        }
        Some("in-process") => {
            return Ok(json!({ "machine": machine(), "reads_in_process": in_process::measure().await? }));
        }
        _ => {}
    }

    // Phase 1: start-up on a fresh database (migrations included), no worker (no MODULES_REPO_URL).
    let reads_db = databases.create("reads").await?;
    eprintln!("starting the server (no worker)...");
    let server = Server::start(server_bin, base_env(&reads_db), &work.join("server-reads.log"), &http).await?;
    let startup = (server.ready_ms, server.healthy_ms);
    eprintln!("  /healthz 200 after {:.0} ms, Job cache synced after {:.0} ms", startup.0, startup.1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = server.rss_kib()?;

    // Phase 2: seeding through the store, concurrently.
    eprintln!("seeding {} runtimes through the store...", args.runtimes);
    let store = Store::connect(&reads_db, 16, std::time::Duration::from_secs(3)).await?;
    let started = Instant::now();
    let seeded = seed(&store, args.runtimes).await?;
    let seed_secs = started.elapsed().as_secs_f64();
    eprintln!("  {:.1} s ({:.0} runtimes/s)", seed_secs, args.runtimes as f64 / seed_secs);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_seeded = server.rss_kib()?;

    // The baseline: the same two queries behind a bare axum handler, in a process of its own as the server is.
    let baseline_server = baseline::BaselineServer::start(&reads_db).await?;
    let baseline = baseline_server.address.clone();

    // Background API-server traffic while nothing is asked of the server.
    eprintln!("measuring the API server's idle background for {:?}...", args.idle);
    let before = apiserver_requests(admin).await?;
    let idle_started = Instant::now();
    tokio::time::sleep(args.idle).await;
    let background_per_sec = (apiserver_requests(admin).await? - before) / idle_started.elapsed().as_secs_f64();

    // Phase 3: status reads, the baseline, REST and GraphQL interleaved in rounds.
    let read_targets = reads::ReadTargets {
        baseline: &baseline,
        baseline_pid: baseline_server.pid,
        api: &server.api,
        server_pid: server.pid,
        seeded: Arc::new(seeded),
    };
    let (reads_json, rss_reads_max) =
        reads::measure(&http, admin, &read_targets, args.rounds, args.duration, background_per_sec).await?;
    let rss_after = server.rss_kib()?;
    let reads_server_stats = server.stop().await;
    // The same reads with the router called directly, beside them.
    let reads_in_process = in_process::measure().await?;

    // `--only reads` stops here.
    let full = args.only.is_none();
    // Phase 4: the burst, on a fresh database with the worker running.
    let (burst, rss_burst, burst_server_stats) = if full {
        burst_phase(args, work, server_bin, &http, admin, namespace, &base_env, databases).await?
    } else {
        (Value::Null, Value::Null, Value::Null)
    };
    let (mut under_load, mut fleet, mut following, mut scale) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if full {
        // Phase 5: the same status reads on PostgreSQL and on SQLite, idle and under a write load.
        under_load =
            write_load::reads_under_write_load(args, work, server_bin, &http, control_plane, &base_env, databases)
                .await?;
        // Phase 6: a fleet of 5,000 runtimes and 50,000 operations, against one a tenth of its size.
        fleet = fleet::fleet(args, server_bin, work, &http, control_plane, &base_env, databases).await?;
        // Phase 7: what following 10, 100 and 1,000 runs costs the database.
        following = following::following_cost(&args.following, server_bin, work, &http, &base_env, databases).await?;
        // Phase 8: one, two and three replicas taking a burst.
        scale = replicas::scale_out(args, server_bin, work, &http, control_plane, &base_env, databases).await?;
    }

    Ok(json!({
        "machine": machine(),
        "parameters": parameters(args),
        "startup": {
            "healthz_ok_ms": startup.0,
            "job_cache_synced_ms": startup.1,
        },
        "seeding": { "runtimes": args.runtimes, "seconds": seed_secs, "per_second": args.runtimes as f64 / seed_secs },
        "apiserver_background_requests_per_second": background_per_sec,
        "reads": reads_json,
        "reads_in_process": reads_in_process,
        "memory_kib": {
            "idle": rss_idle,
            "after_seeding": rss_seeded,
            "under_read_load_max": rss_reads_max,
            "after_reads": rss_after,
            "after_burst": rss_burst,
            "reads_server_exit": reads_server_stats,
            "burst_server_exit": burst_server_stats,
        },
        "burst": burst,
        "reads_under_write_load": under_load,
        "fleet": fleet,
        "following": following,
        "replicas": scale,
    }))
}

/// The burst on a fresh database with the worker running: its figures, the server's RSS after it, and its exit.
#[allow(clippy::too_many_arguments)]
async fn burst_phase(
    args: &Args,
    work: &Path,
    server_bin: &Path,
    http: &reqwest::Client,
    admin: &Client,
    namespace: &str,
    base_env: &dyn Fn(&str) -> Vec<(String, String)>,
    databases: &mut Databases,
) -> Result<(Value, Value, Value)> {
    let burst_db = databases.create("burst").await?;
    let mut env = base_env(&burst_db);
    env.push(("MODULES_REPO_URL".to_owned(), MODULES_REPO_URL.to_owned()));
    env.push(("MODULES_REPO_COMMIT".to_owned(), MODULES_REPO_COMMIT.to_owned()));
    env.push(("APP_WORKER_CONCURRENCY".to_owned(), args.worker_concurrency.to_string()));
    eprintln!("starting the server with the worker (concurrency {})...", args.worker_concurrency);
    let worker_server = Server::start(server_bin, env, &work.join("server-burst.log"), http).await?;
    let metrics = vec![format!("http://{}/metrics", worker_server.metrics)];
    let profile = profile::Profile::start(http, vec![worker_server.pid], metrics, Some(&burst_db)).await?;
    let requests_before = apiserver_requests_by_kind(admin).await?;
    let mut figures = burst(http, &worker_server, admin, namespace, args).await?;
    figures["profile"] = profile.stop(http).await;
    let jobs = figures["jobs_created"].as_f64().unwrap_or(0.0).max(1.0);
    let per_job: BTreeMap<String, f64> = apiserver_requests_by_kind(admin)
        .await?
        .into_iter()
        .map(|(kind, after)| (kind.clone(), (after - requests_before.get(&kind).copied().unwrap_or(0.0)) / jobs))
        .filter(|(_, per_job)| *per_job >= 0.05)
        .collect();
    figures["apiserver_requests_per_job"] = json!(per_job.values().sum::<f64>());
    figures["apiserver_requests_per_job_by_kind"] = json!(per_job);
    let rss_burst = worker_server.rss_kib()?;
    Ok((figures, json!(rss_burst), worker_server.stop().await))
}

fn parameters(args: &Args) -> Value {
    json!({
        "runtimes": args.runtimes,
        "burst": args.burst,
        "read_seconds": args.duration.as_secs_f64(),
        "worker_concurrency": args.worker_concurrency,
        "load_runs": args.load_runs,
        "load_posts_per_second": args.load_posts_per_second,
    })
}

fn machine() -> Value {
    json!({ "cores": std::thread::available_parallelism().map(usize::from).unwrap_or(0) })
}

// ---------------------------------------------------------------------------------------------------------------
// The server as a child process.

struct Server {
    child: tokio::process::Child,
    pid: u32,
    api: String,
    metrics: String,
    ready_ms: f64,
    healthy_ms: f64,
}

impl Server {
    async fn start(bin: &Path, env: Vec<(String, String)>, log: &Path, http: &reqwest::Client) -> Result<Self> {
        let api_port = test_control_plane::free_port();
        let metrics_port = test_control_plane::free_port();
        let log_file = std::fs::File::create(log)?;
        let mut command = tokio::process::Command::new(bin);
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("APP_ADDRESS", format!("127.0.0.1:{api_port}"))
            .env("APP_METRICS_ADDRESS", format!("127.0.0.1:{metrics_port}"))
            .envs(env)
            .stdin(std::process::Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true);
        let started = Instant::now();
        let mut child = command.spawn()?;
        let pid = child.id().ok_or("the server exited at once")?;
        let api = format!("127.0.0.1:{api_port}");
        let healthz = format!("http://{api}/healthz");
        let mut ready_ms = None;
        let deadline = started + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait()? {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                return Err(format!("the server exited with {status}:\n{log}").into());
            }
            if let Ok(response) = http.get(&healthz).send().await
                && response.status().is_success()
            {
                let body: Value = response.json().await.unwrap_or_default();
                let elapsed = started.elapsed().as_secs_f64() * 1000.0;
                ready_ms.get_or_insert(elapsed);
                if body["kubernetes"] == "ok" {
                    let metrics = format!("127.0.0.1:{metrics_port}");
                    let ready_ms = ready_ms.unwrap_or(elapsed);
                    return Ok(Server { child, pid, api, metrics, ready_ms, healthy_ms: elapsed });
                }
            }
            if Instant::now() > deadline {
                return Err(format!("the server was not ready within 60 s; see {}", log.display()).into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn rss_kib(&self) -> Result<u64> {
        rss_of(self.pid).ok_or_else(|| format!("cannot read /proc/{}/status", self.pid).into())
    }

    /// SIGTERM (a graceful stop), then the peak RSS and exit status.
    async fn stop(mut self) -> Value {
        let peak = hwm_of(self.pid);
        let _ = std::process::Command::new("kill").arg("-TERM").arg(self.pid.to_string()).status();
        let status = match tokio::time::timeout(Duration::from_secs(40), self.child.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            _ => {
                let _ = self.child.start_kill();
                "killed after 40 s".to_owned()
            }
        };
        json!({ "peak_rss_kib": peak, "exit": status })
    }
}

fn proc_status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rss_of(pid: u32) -> Option<u64> {
    proc_status_field(pid, "VmRSS:")
}

fn hwm_of(pid: u32) -> Option<u64> {
    proc_status_field(pid, "VmHWM:")
}

/// Samples a process's RSS every 100 ms and keeps the largest value.
struct RssSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut max = 0;
            while !flag.load(Ordering::Relaxed) {
                max = max.max(rss_of(pid).unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            max
        });
        RssSampler { stop, task }
    }

    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Kubernetes set-up.

/// A namespace of its own for a measure, so that the Jobs of an earlier one neither count, nor fill the Job cache
/// whose memory it reads: `env` with `JOB_NAMESPACE` and `KUBECONFIG` pointing at it.
async fn in_fresh_namespace(
    control_plane: &ControlPlane,
    work: &Path,
    purpose: &str,
    mut env: Vec<(String, String)>,
) -> Result<Vec<(String, String)>> {
    let namespace = control_plane.new_namespace(purpose).await?;
    control_plane.apply_rbac_manifest(MANIFEST, &namespace).await?;
    let token = control_plane.service_account_token(&namespace, SERVICE_ACCOUNT, &[]).await?;
    let folder = work.join(&namespace);
    std::fs::create_dir_all(&folder)?;
    let kubeconfig = write_token_kubeconfig(&folder, control_plane, &token)?;
    env.retain(|(key, _)| key != "JOB_NAMESPACE" && key != "KUBECONFIG");
    env.push(("JOB_NAMESPACE".to_owned(), namespace));
    env.push(("KUBECONFIG".to_owned(), kubeconfig.display().to_string()));
    Ok(env)
}

/// A kubeconfig for the ServiceAccount token (the child process reads it through KUBECONFIG).
fn write_token_kubeconfig(work: &Path, control_plane: &ControlPlane, token: &str) -> Result<PathBuf> {
    let ca = work.join("ca.crt");
    std::fs::write(&ca, control_plane.ca_pem())?;
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": control_plane.server_url(), "certificate-authority": ca}}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": SERVICE_ACCOUNT}}],
        "current-context": "bench",
    });
    let path = work.join("cluster-provisioner.kubeconfig");
    std::fs::write(&path, serde_json::to_string_pretty(&kubeconfig)?)?;
    Ok(path)
}

/// The API server's `apiserver_request_total`, summed over all labels.
async fn apiserver_requests(admin: &Client) -> Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = admin.request_text(request).await?;
    Ok(text
        .lines()
        .filter(|line| line.starts_with("apiserver_request_total{") || line.starts_with("apiserver_request_total "))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// The API server's `apiserver_request_total` by `verb resource[/subresource]`.
async fn apiserver_requests_by_kind(admin: &Client) -> Result<BTreeMap<String, f64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = admin.request_text(request).await?;
    let label = |line: &str, name: &str| -> String {
        let quoted = format!("{name}=\"");
        line.split(&quoted).nth(1).and_then(|rest| rest.split('"').next()).unwrap_or_default().to_owned()
    };
    let mut by_kind = BTreeMap::new();
    for line in text.lines().filter(|line| line.starts_with("apiserver_request_total{")) {
        let Some(count) = line.rsplit(' ').next().and_then(|count| count.parse::<f64>().ok()) else { continue };
        let subresource = label(line, "subresource");
        let resource = label(line, "resource");
        let kind = match subresource.as_str() {
            "" => format!("{} {resource}", label(line, "verb")),
            _ => format!("{} {resource}/{subresource}", label(line, "verb")),
        };
        *by_kind.entry(kind).or_insert(0.0) += count;
    }
    Ok(by_kind)
}

// ---------------------------------------------------------------------------------------------------------------
// Seeding and the baseline.

/// (runtime id, operation id) of each seeded runtime.
async fn seed(store: &Store, count: usize) -> Result<Vec<(Uuid, Uuid)>> {
    let results: Vec<Result<(Uuid, Uuid)>> = futures::stream::iter(0..count)
        .map(|index| async move {
            let request = ProvisionRequest::example_named(Topology::VanillaKubeadm, &format!("seed-{index}"));
            let (runtime, operation) = Runtime::requested(request, false, store::now());
            store.insert_runtime(&runtime, &operation, None).await?;
            Ok((runtime.id, operation.id))
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect()
}

// ---------------------------------------------------------------------------------------------------------------
// Load generation.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Baseline,
    Rest,
    Graphql,
    /// A GET of a path whose `{id}` is each runtime's id in turn.
    Page(&'static str),
    /// A GraphQL query; one declaring `$id` gets each runtime's id in turn.
    GraphqlQuery(&'static str),
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Baseline => "baseline (bare axum + store)",
            Target::Rest => "REST GET /api/v1/provisions/{id}",
            Target::Graphql => "GraphQL runtimeOperationStatus",
            Target::Page(path) => path,
            Target::GraphqlQuery(query) => query,
        }
    }

    fn short(self) -> &'static str {
        match self {
            Target::Baseline => "baseline",
            Target::Rest => "REST",
            Target::Graphql | Target::GraphqlQuery(_) => "GraphQL",
            Target::Page(_) => "REST",
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Stats {
    ok: u64,
    /// Reads answered during the warm-up, which the figures leave out.
    warmup_ok: u64,
    errors: u64,
    wall_secs: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

impl Stats {
    fn rps(&self) -> f64 {
        if self.wall_secs > 0.0 { self.ok as f64 / self.wall_secs } else { 0.0 }
    }
}

const GRAPHQL_QUERY: &str =
    "query($id: String!) { runtimeOperationStatus(id: $id) { id operation state message runtimeID stage } }";

/// `concurrency` closed-loop clients for `duration` (after a warm-up of a fifth of it, at most 1 s).
async fn load(
    http: &reqwest::Client,
    target: Target,
    url: &str,
    ids: &Arc<Vec<(Uuid, Uuid)>>,
    concurrency: usize,
    duration: Duration,
) -> Stats {
    let warmup = (duration / 5).min(Duration::from_secs(1));
    let next = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let warmup_ok = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let measure_from = Instant::now() + warmup;
    let deadline = measure_from + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (http, url, ids, next, errors, first_error, warmup_ok) = (
            http.clone(),
            url.to_owned(),
            ids.clone(),
            next.clone(),
            errors.clone(),
            first_error.clone(),
            warmup_ok.clone(),
        );
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(65_536);
            loop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                // A spread over all runtimes (a large odd stride visits every index).
                let index = next.fetch_add(1, Ordering::Relaxed).wrapping_mul(7919) % ids.len();
                let (runtime_id, operation_id) = ids[index];
                let request = match target {
                    Target::Baseline | Target::Rest => http.get(format!("{url}{runtime_id}")),
                    Target::Graphql => http
                        .post(&url)
                        .json(&json!({"query": GRAPHQL_QUERY, "variables": {"id": operation_id.to_string()}})),
                    Target::Page(_) => http.get(url.replace("{id}", &runtime_id.to_string())),
                    Target::GraphqlQuery(query) if query.contains("$id") => {
                        http.post(&url).json(&json!({"query": query, "variables": {"id": runtime_id.to_string()}}))
                    }
                    Target::GraphqlQuery(query) => http.post(&url).json(&json!({ "query": query })),
                };
                let started = Instant::now();
                let outcome = match request.send().await {
                    Ok(response) => {
                        let status = response.status();
                        match response.bytes().await {
                            Ok(body) if status.is_success() && !(target.short() == "GraphQL" && has_errors(&body)) => {
                                Ok(())
                            }
                            Ok(body) => Err(format!("{status}: {}", String::from_utf8_lossy(&body))),
                            Err(error) => Err(error.to_string()),
                        }
                    }
                    Err(error) => Err(error.to_string()),
                };
                let elapsed = started.elapsed();
                if started < measure_from {
                    warmup_ok.fetch_add(u64::from(outcome.is_ok()), Ordering::Relaxed);
                    continue;
                }
                match outcome {
                    Ok(()) => latencies.push(elapsed.as_micros() as u32),
                    Err(error) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        first_error.lock().unwrap().get_or_insert(error);
                    }
                }
            }
            latencies
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = tasks.join_next().await {
        latencies.extend(done.unwrap_or_default());
    }
    let wall_secs = (Instant::now() - measure_from).as_secs_f64();
    latencies.sort_unstable();
    let percentile = |q: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let rank = ((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
        latencies[rank - 1] as f64 / 1000.0
    };
    if let Some(error) = first_error.lock().unwrap().take() {
        eprintln!("  first error: {error}");
    }
    Stats {
        ok: latencies.len() as u64,
        warmup_ok: warmup_ok.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        wall_secs,
        p50: percentile(0.50),
        p99: percentile(0.99),
        p999: percentile(0.999),
        max: latencies.last().map(|max| *max as f64 / 1000.0).unwrap_or(0.0),
    }
}

fn has_errors(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).map(|value| value.get("errors").is_some()).unwrap_or(true)
}

// ---------------------------------------------------------------------------------------------------------------
// The burst.

async fn burst(http: &reqwest::Client, server: &Server, admin: &Client, namespace: &str, args: &Args) -> Result<Value> {
    let jobs: Api<PartialObjectMeta<Job>> = Api::namespaced(admin.clone(), namespace);
    let url = format!("http://{}/api/v1/provisions", server.api);
    eprintln!("burst: POSTing {} provisioning requests (64 in flight)...", args.burst);
    let started = Instant::now();
    let posting = futures::stream::iter(0..args.burst)
        .map(|index| {
            let request = http.post(&url).json(&provision_body(&format!("burst-{index}")));
            async move {
                match request.send().await {
                    Ok(response) if response.status() == StatusCode::ACCEPTED => Ok(()),
                    Ok(response) => {
                        Err(format!("{}: {}", response.status(), response.text().await.unwrap_or_default()))
                    }
                    Err(error) => Err(error.to_string()),
                }
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>();
    // Watch the Jobs appear while the requests go in: one watch of their metadata, so that counting them costs the
    // API server little (a list of every Job ten times a second cost it more than the provisioner's requests).
    let counting = async {
        let mut names = std::collections::HashSet::new();
        let mut seen = BTreeMap::<usize, f64>::new();
        let stream =
            watcher(jobs.clone(), watcher::Config::default().labels(MANAGED_BY)).default_backoff().applied_objects();
        futures::pin_mut!(stream);
        let deadline = started + args.burst_timeout;
        loop {
            let patience = Duration::from_secs(15).min(deadline.saturating_duration_since(Instant::now()));
            match tokio::time::timeout(patience, stream.next()).await {
                Ok(Some(Ok(job))) => {
                    if names.insert(job.name_any()) {
                        seen.insert(names.len(), started.elapsed().as_secs_f64());
                    }
                }
                Ok(Some(Err(_))) => {}
                // No new Job for 15 s once some exist: stalled.
                Err(_) if !names.is_empty() && Instant::now() < deadline => return (names.len(), seen, true),
                Ok(None) | Err(_) => return (names.len(), seen, false),
            }
            if names.len() >= args.burst {
                return (names.len(), seen, false);
            }
        }
    };
    let accepting = async {
        let results = posting.await;
        (results, started.elapsed().as_secs_f64())
    };
    let ((results, accepted_secs), (jobs_count, seen, stalled)) = tokio::join!(accepting, counting);
    let failures: Vec<&String> = results.iter().filter_map(|result| result.as_ref().err()).collect();
    if let Some(first) = failures.first() {
        eprintln!("  {} requests failed; first: {first}", failures.len());
    }
    let accepted = results.len() - failures.len();
    let first_job = seen.values().next().copied();
    let last_job = seen.values().last().copied();
    // Overall: Jobs per second since the first POST; creation rate: between the first and the last Job seen.
    let jobs_per_second = last_job.filter(|last| *last > 0.0).map(|last| jobs_count as f64 / last);
    let creation_rate = match (first_job, last_job) {
        (Some(first), Some(last)) if last > first && jobs_count > 1 => Some((jobs_count - 1) as f64 / (last - first)),
        _ => None,
    };
    eprintln!(
        "  accepted {accepted} in {accepted_secs:.2} s; {jobs_count} Jobs, the last at {:.2} s{}",
        last_job.unwrap_or(0.0),
        if stalled { " (then no new Job for 15 s: stalled)" } else { "" }
    );
    let timeline: HashMap<String, f64> = seen.into_iter().map(|(count, secs)| (count.to_string(), secs)).collect();
    Ok(json!({
        "requests": args.burst,
        "accepted": accepted,
        "failed": failures.len(),
        "all_accepted_seconds": accepted_secs,
        "accepted_per_second": accepted as f64 / accepted_secs,
        "jobs_created": jobs_count,
        "first_job_seconds": first_job,
        "last_job_seconds": last_job,
        "all_jobs_seconds": (jobs_count >= args.burst).then_some(last_job).flatten(),
        "jobs_per_second": jobs_per_second,
        "job_creation_rate_per_second": creation_rate,
        "stalled": stalled,
        "jobs_timeline_seconds": timeline,
    }))
}

// ---------------------------------------------------------------------------------------------------------------
// The table.

/// The burst's line, when it ran.
fn print_burst(figures: &Value) {
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    let burst = &figures["burst"];
    if burst.is_null() {
        return;
    }
    println!(
        "\nburst: {} requests, {} accepted in {:.2} s ({:.0}/s); {} Jobs created, first at {:.2} s, last at {:.2} s \
         ({:.1} Jobs/s overall, {:.0} Jobs/s between first and last){}",
        burst["requests"],
        burst["accepted"],
        number(&burst["all_accepted_seconds"]),
        number(&burst["accepted_per_second"]),
        burst["jobs_created"],
        number(&burst["first_job_seconds"]),
        number(&burst["last_job_seconds"]),
        number(&burst["jobs_per_second"]),
        number(&burst["job_creation_rate_per_second"]),
        if burst["stalled"] == true { "; STALLED: no new Job for 15 s" } else { "" }
    );
    println!("  cores busy during the burst: {}", profile::listed(&burst["profile"]["cores_busy"], 2));
    println!(
        "  API-server requests per Job: {:.1} ({})",
        number(&burst["apiserver_requests_per_job"]),
        profile::listed(&burst["apiserver_requests_per_job_by_kind"], 1)
    );
}

fn print_table(figures: &Value) {
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    let mib = |value: &Value| number(value) / 1024.0;
    println!("\n== provisioner bench ({} cores) ==", figures["machine"]["cores"]);
    let following = figures["following"].as_array().cloned().unwrap_or_default();
    let scale = figures["replicas"].as_array().cloned().unwrap_or_default();
    let fleet = figures["fleet"].as_array().cloned().unwrap_or_default();
    if figures.get("reads").is_none() {
        in_process::print(&figures["reads_in_process"]);
        print_burst(figures);
        fleet::print(&fleet);
        write_load::print(figures);
        following::print(&following);
        replicas::print(&scale);
        return;
    }
    println!(
        "start-up (spawn to /healthz 200): {:.0} ms; to Job cache synced: {:.0} ms",
        number(&figures["startup"]["healthz_ok_ms"]),
        number(&figures["startup"]["job_cache_synced_ms"])
    );
    println!(
        "seeding: {} runtimes in {:.1} s ({:.0}/s)",
        figures["seeding"]["runtimes"],
        number(&figures["seeding"]["seconds"]),
        number(&figures["seeding"]["per_second"])
    );
    println!("API-server background: {:.1} requests/s", number(&figures["apiserver_background_requests_per_second"]));
    println!(
        "\n{:<9} {:>4} {:>9} {:>8} {:>8} {:>8} {:>8}  {:>22}  {:>15}  {:>10}",
        "reads",
        "conc",
        "req/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "errors",
        "vs baseline rps/p50/p99",
        "CPU us/rd (vs)",
        "apisrv/rd"
    );
    for row in figures["reads"].as_array().into_iter().flatten() {
        let target = row["target"].as_str().unwrap_or_default();
        let short = [Target::Baseline, Target::Rest, Target::Graphql]
            .into_iter()
            .find(|target_kind| target_kind.name() == target)
            .map(Target::short)
            .unwrap_or(target);
        let ratio = &row["ratio_to_baseline"];
        let ratios = if short == "baseline" {
            "1".to_owned()
        } else {
            format!(
                "{:.2}x/{:.2}x/{:.2}x",
                number(&ratio["requests_per_second"]),
                number(&ratio["p50"]),
                number(&ratio["p99"])
            )
        };
        let per_read = row["apiserver_requests_per_read"].as_f64().map(|v| format!("{v:.4}")).unwrap_or("-".into());
        let cpu =
            format!("{:.0} ({:.2}x)", number(&row["server_cpu_us_per_read"]), number(&ratio["server_cpu_per_read"]));
        println!(
            "{:<9} {:>4} {:>9.0} {:>8.2} {:>8.2} {:>8.2} {:>8}  {:>22}  {:>15}  {:>10}",
            short,
            row["concurrency"].as_u64().unwrap_or(0),
            number(&row["requests_per_second"]),
            number(&row["p50_ms"]),
            number(&row["p99_ms"]),
            number(&row["p999_ms"]),
            row["errors"].as_u64().unwrap_or(0),
            ratios,
            cpu,
            per_read
        );
    }
    let memory = &figures["memory_kib"];
    println!(
        "\nserver RSS (MiB): idle {:.1}, after seeding {:.1}, under read load max {:.1}, after reads {:.1}, \
         after burst {:.1}",
        mib(&memory["idle"]),
        mib(&memory["after_seeding"]),
        mib(&memory["under_read_load_max"]),
        mib(&memory["after_reads"]),
        mib(&memory["after_burst"])
    );
    in_process::print(&figures["reads_in_process"]);
    print_burst(figures);
    write_load::print(figures);
    fleet::print(&fleet);
    following::print(&following);
    replicas::print(&scale);
}
