//! The status reads in-process (issue 31 item 6): the service's router and the baseline's handler called directly,
//! in interleaved rounds on one thread, and the CPU time that thread spent per read. Without the loopback TCP, the
//! task switches and the load generator sharing the cores, what is left is the service's own code and its round
//! trips to PostgreSQL, which vary far less between runs than the reads over TCP on a shared host. No log subscriber
//! is installed: this measures the read path, not its log lines.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt as _;
use provisioner::store::Store;
use serde_json::{Value, json};
use test_support::{Backend, eks_body, spawn_app};
use tower::ServiceExt as _;

use crate::reads::median;
use crate::{GRAPHQL_QUERY, Result, baseline, has_errors};

/// Reads of each target in a round, after as many again to warm up.
const READS_PER_ROUND: usize = 1_000;
/// Rounds, each of every target in turn (about 1.5 s each).
const ROUNDS: usize = 15;

/// The CPU time this thread has run, in nanoseconds (the scheduler's own account).
fn thread_cpu_ns() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")?;
    Ok(text.split_whitespace().next().ok_or("an empty /proc/thread-self/schedstat")?.parse()?)
}

/// A row per target, measured on a thread of its own with a single-threaded runtime, so that the thread's CPU
/// time is the reads' alone.
pub async fn measure() -> Result<Value> {
    let thread = std::thread::spawn(move || -> Result<Value> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(rounds_of_reads(ROUNDS))
    });
    tokio::task::spawn_blocking(move || thread.join().map_err(|_| "the in-process reads panicked")?).await?
}

/// One target: its name and how to make one of its requests.
struct Target {
    name: &'static str,
    router: Router,
    request: Box<dyn Fn() -> Request<Body>>,
}

async fn rounds_of_reads(rounds: usize) -> Result<Value> {
    eprintln!("reads in-process: {rounds} rounds of {READS_PER_ROUND} reads of each...");
    let app = spawn_app(Backend::Postgres).await;
    let runtime_id = app.provisioned(&eks_body("in-process")).await;
    let status = app.get(&format!("/api/v1/provisions/{runtime_id}")).await.json();
    let operation_id = status["operationId"].as_str().ok_or("no operationId in the status")?.to_owned();
    let store = Store::connect(&app.database.url, 10, Duration::from_secs(3)).await?;
    let baseline_path = baseline::PATH.replace("{id}", &runtime_id);
    let rest_path = format!("/api/v1/provisions/{runtime_id}");
    let graphql_body = json!({ "query": GRAPHQL_QUERY, "variables": { "id": operation_id } }).to_string();
    let targets = [
        Target {
            name: "baseline",
            router: baseline::router(store),
            request: Box::new(move || Request::get(&baseline_path).body(Body::empty()).expect("a request")),
        },
        Target {
            name: "REST",
            router: app.app.router.clone(),
            request: Box::new(move || Request::get(&rest_path).body(Body::empty()).expect("a request")),
        },
        Target {
            name: "GraphQL",
            router: app.app.router.clone(),
            request: Box::new(move || {
                let body = Body::from(graphql_body.clone());
                Request::post("/graphql").header("content-type", "application/json").body(body).expect("a request")
            }),
        },
    ];
    let measured = rounds_of(&targets, rounds).await;
    // The bench's databases are dropped when it ends; this one is the test app's own.
    app.database.drop_database().await;
    Ok(rows(&targets.map(|target| target.name), &measured?))
}

/// The CPU time per read of each target in each of `rounds` rounds.
async fn rounds_of(targets: &[Target], rounds: usize) -> Result<Vec<Vec<f64>>> {
    let mut cpu_us: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
    for _ in 0..rounds {
        for (target, measured) in targets.iter().zip(&mut cpu_us) {
            measured.push(cpu_us_per_read(target).await?);
        }
    }
    Ok(cpu_us)
}

/// The CPU time of one read of `target`, in microseconds, over a round.
async fn cpu_us_per_read(target: &Target) -> Result<f64> {
    read(target, READS_PER_ROUND).await?;
    let before = thread_cpu_ns()?;
    read(target, READS_PER_ROUND).await?;
    Ok((thread_cpu_ns()? - before) as f64 / READS_PER_ROUND as f64 / 1_000.0)
}

async fn read(target: &Target, count: usize) -> Result<()> {
    for _ in 0..count {
        let response = target.router.clone().oneshot((target.request)()).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        // No answer of the baseline or of REST has `errors`; a GraphQL answer has them when it failed.
        if !status.is_success() || has_errors(&body) {
            return Err(format!("{}: {status} {}", target.name, String::from_utf8_lossy(&body)).into());
        }
    }
    Ok(())
}

/// A row per target: the median of its rounds, and the median of its rounds' ratios to the first target's.
fn rows(names: &[&str], cpu_us: &[Vec<f64>]) -> Value {
    let baseline = &cpu_us[0];
    let rows: Vec<Value> = names
        .iter()
        .zip(cpu_us)
        .map(|(name, rounds)| {
            let ratios = rounds.iter().zip(baseline).map(|(value, base)| value / base);
            json!({
                "target": name,
                "cpu_us_per_read": median(rounds.iter().copied()),
                "ratio_to_baseline": median(ratios),
                "rounds": rounds,
            })
        })
        .collect();
    Value::Array(rows)
}

/// The rows as a table.
pub fn print(rows: &Value) {
    let Some(rows) = rows.as_array().filter(|rows| !rows.is_empty()) else { return };
    let rounds = rows[0]["rounds"].as_array().map_or(0, Vec::len);
    println!(
        "\nreads in-process (the router called directly on one thread; median of {rounds} rounds of {READS_PER_ROUND})"
    );
    println!("{:<9} {:>12} {:>12}", "reads", "CPU us/read", "vs baseline");
    for row in rows {
        let number = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
        let name = row["target"].as_str().unwrap_or_default();
        println!("{name:<9} {:>12.1} {:>11.2}x", number("cpu_us_per_read"), number("ratio_to_baseline"));
    }
}

#[cfg(test)]
mod tests {
    use super::rows;

    #[test]
    fn each_row_is_the_median_of_its_rounds_and_of_its_ratios_to_the_baseline() {
        let rows = rows(&["baseline", "REST"], &[vec![100.0, 200.0, 300.0], vec![90.0, 100.0, 330.0]]);
        assert_eq!(rows[0]["cpu_us_per_read"], 200.0);
        assert_eq!(rows[0]["ratio_to_baseline"], 1.0);
        assert_eq!(rows[1]["cpu_us_per_read"], 100.0);
        // Ratios 0.9, 0.5 and 1.1: their median, not 100 / 200.
        assert_eq!(rows[1]["ratio_to_baseline"], 0.9);
    }
}
