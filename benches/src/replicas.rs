//! Scale-out: one, two and three replicas of the service (child processes over one PostgreSQL database, each in a
//! namespace of its own on the one test control plane) take a burst of provisionings, sent round-robin; the figure
//! is Jobs created per second (runs past `CreateJob`, read from the database), and the double claims (operations
//! claimed more than once, which a clean burst never needs) must be zero.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::following::post_until_accepted;
use crate::profile::{Profile, listed};
use crate::{Args, Databases, MODULES_REPO_COMMIT, MODULES_REPO_URL, Result, Server};
use futures::StreamExt;
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};
use serde_json::{Value, json};
use test_control_plane::ControlPlane;

/// One row per replica count of `args.replicas`, each taking a burst of `args.scale_burst`.
pub(crate) async fn scale_out(
    args: &Args,
    server_bin: &Path,
    work: &Path,
    http: &reqwest::Client,
    control_plane: &ControlPlane,
    base_env: &dyn Fn(&str) -> Vec<(String, String)>,
    databases: &mut Databases,
) -> Result<Vec<Value>> {
    let burst = args.scale_burst;
    let mut rows: Vec<Value> = Vec::new();
    for &count in &args.replicas {
        let database_url = databases.create("scale").await?;
        // A namespace of its own, so that the Jobs of an earlier row neither count nor slow this one.
        let env =
            crate::in_fresh_namespace(control_plane, work, &format!("scale{count}"), base_env(&database_url)).await?;
        let folder = work.join(format!("scale-{count}"));
        std::fs::create_dir_all(&folder)?;
        let mut servers = Vec::new();
        for replica in 0..count {
            let mut env = env.clone();
            env.extend(
                [
                    ("MODULES_REPO_URL", MODULES_REPO_URL.to_owned()),
                    ("MODULES_REPO_COMMIT", MODULES_REPO_COMMIT.to_owned()),
                    ("APP_WORKER_MAX_RUNS", (burst + 16).to_string()),
                ]
                .map(|(key, value)| (key.to_owned(), value)),
            );
            let log = folder.join(format!("server-{replica}.log"));
            servers.push(Server::start(server_bin, env, &log, http).await?);
        }
        eprintln!("scale-out: {burst} provisionings across {count} replica(s)...");
        let urls: Vec<String> =
            servers.iter().map(|server| format!("http://{}/api/v1/provisions", server.api)).collect();
        let pids = servers.iter().map(|server| server.pid).collect();
        let metrics = servers.iter().map(|server| format!("http://{}/metrics", server.metrics)).collect();
        let profile = Profile::start(http, pids, metrics, Some(&database_url)).await?;
        let started = Instant::now();
        let posting = futures::stream::iter(0..burst)
            .map(|index| post_until_accepted(http, &urls[index % urls.len()], format!("scale-{index}")))
            .buffer_unordered(64)
            .filter(|accepted| std::future::ready(*accepted))
            .count();
        let (accepted, created) = tokio::join!(posting, jobs_created(&database_url, burst, started));
        let (jobs, last_job_seconds, double_claims) = created?;
        let profile = profile.stop(http).await;
        for server in servers {
            server.stop().await;
        }
        let jobs_per_second = last_job_seconds.filter(|seconds| *seconds > 0.0).map(|seconds| jobs as f64 / seconds);
        eprintln!(
            "  {accepted} accepted, {jobs} Jobs, the last at {:.1} s ({:.0} Jobs/s); {double_claims} double claims",
            last_job_seconds.unwrap_or(f64::NAN),
            jobs_per_second.unwrap_or(f64::NAN)
        );
        let one = rows.first().and_then(|row| row["jobs_per_second"].as_f64());
        let ratio = match (jobs_per_second, one.or(jobs_per_second)) {
            (Some(value), Some(base)) if base > 0.0 => Some(value / base),
            _ => None,
        };
        rows.push(json!({
            "replicas": count,
            "requests": burst,
            "accepted": accepted,
            "jobs_created": jobs,
            "last_job_seconds": last_job_seconds,
            "jobs_per_second": jobs_per_second,
            "ratio_to_one_replica": ratio,
            "double_claims": double_claims,
            "profile": profile,
        }));
    }
    Ok(rows)
}

/// Polls the database until `expected` runs are past `CreateJob` (or nothing moves for 30 s): how many, when the
/// last got there, and how many operations were claimed more than once.
async fn jobs_created(database_url: &str, expected: usize, started: Instant) -> Result<(i64, Option<f64>, i64)> {
    let database = Database::connect(database_url).await?;
    let query = |sql: &str| Statement::from_string(DbBackend::Postgres, sql.to_owned());
    let created =
        query("SELECT count(*) AS n FROM operation WHERE stage IN ('WaitForJob', 'Finalize', 'Cleanup', 'Done')");
    let (mut last_count, mut last_seconds, mut last_change) = (0, None, Instant::now());
    loop {
        let row = database.query_one_raw(created.clone()).await?.ok_or("no count")?;
        let count: i64 = row.try_get("", "n")?;
        if count != last_count {
            (last_count, last_seconds, last_change) = (count, Some(started.elapsed().as_secs_f64()), Instant::now());
        }
        if count >= expected as i64 || last_change.elapsed() > Duration::from_secs(30) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let row = database.query_one_raw(query("SELECT count(*) AS n FROM operation WHERE claims > 1")).await?;
    let double_claims: i64 = row.ok_or("no count")?.try_get("", "n")?;
    database.close().await?;
    Ok((last_count, last_seconds, double_claims))
}

/// The table's rows for this phase.
pub(crate) fn print(rows: &[Value]) {
    if rows.is_empty() {
        return;
    }
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    println!(
        "\n{:<9} {:>8} {:>8} {:>12} {:>8} {:>9} {:>13}",
        "replicas", "accepted", "Jobs", "last Job s", "Jobs/s", "vs one", "double claims"
    );
    for row in rows {
        println!(
            "{:<9} {:>8} {:>8} {:>12.1} {:>8.0} {:>8.2}x {:>13}",
            count(&row["replicas"]),
            count(&row["accepted"]),
            count(&row["jobs_created"]),
            number(&row["last_job_seconds"]),
            number(&row["jobs_per_second"]),
            number(&row["ratio_to_one_replica"]),
            count(&row["double_claims"]),
        );
    }
    println!("where the time went: cores busy by process (the replicas together as the service)");
    for row in rows {
        println!("{:<9} {}", count(&row["replicas"]), listed(&row["profile"]["cores_busy"], 2));
    }
}
