//! What following runs costs the database: one service process follows N runs whose Jobs never end (no kubelet
//! runs their pods), and the statements per second are counted twice, by the service's own counter
//! (`provisioner_database_statements_total`) and by PostgreSQL (`pg_stat_database`: each statement the service sends
//! outside a transaction is one transaction there), for N = 10, 100 and 1,000. Flat means the figure at 1,000 is
//! within 2x of the figure at 10.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};
use serde_json::{Value, json};
use test_support::provision_body;

use crate::{Databases, MODULES_REPO_COMMIT, MODULES_REPO_URL, Result, Server};

/// How long the statements are counted, once every run waits for its Job.
const WINDOW: Duration = Duration::from_secs(12);

/// One row per size in `sizes`: statements per second while following that many runs, and the ratio to the
/// first size's figure.
pub(crate) async fn following_cost(
    sizes: &[usize],
    server_bin: &Path,
    work: &Path,
    http: &reqwest::Client,
    base_env: &dyn Fn(&str) -> Vec<(String, String)>,
    databases: &mut Databases,
) -> Result<Vec<Value>> {
    let mut rows: Vec<Value> = Vec::new();
    for &runs in sizes {
        let database_url = databases.create("following").await?;
        let mut env = base_env(&database_url);
        env.extend(
            [
                ("MODULES_REPO_URL", MODULES_REPO_URL.to_owned()),
                ("MODULES_REPO_COMMIT", MODULES_REPO_COMMIT.to_owned()),
                ("APP_DATABASE_MAX_CONNECTIONS", "16".to_owned()),
                ("APP_WORKER_MAX_RUNS", (runs + 16).to_string()),
            ]
            .map(|(key, value)| (key.to_owned(), value)),
        );
        let log = work.join(format!("server-following-{runs}.log"));
        let server = Server::start(server_bin, env, &log, http).await?;
        eprintln!("following: starting {runs} runs whose Jobs never end...");
        let posts = format!("http://{}/api/v1/provisions", server.api);
        let accepted = futures::stream::iter(0..runs)
            .map(|index| post_until_accepted(http, &posts, format!("followed-{index}")))
            .buffer_unordered(16)
            .filter(|accepted| std::future::ready(*accepted))
            .count()
            .await;
        let waiting = wait_until_all_wait_for_their_jobs(&database_url, accepted).await?;
        let database_name = database_url.rsplit('/').next().unwrap_or_default().to_owned();
        let metrics = format!("http://{}/metrics", server.metrics);
        let (service_before, database_before) =
            (statements_sent(http, &metrics).await?, transactions(&databases.admin_url, &database_name).await?);
        let started = Instant::now();
        tokio::time::sleep(WINDOW).await;
        let (service_after, database_after) =
            (statements_sent(http, &metrics).await?, transactions(&databases.admin_url, &database_name).await?);
        let seconds = started.elapsed().as_secs_f64();
        server.stop().await;
        let service_rate = (service_after - service_before) / seconds;
        let database_rate = (database_after - database_before) / seconds;
        eprintln!("  {waiting} runs waiting: {service_rate:.1} statements/s sent, {database_rate:.1} transactions/s");
        // The first row is its own baseline.
        let (statements_base, transactions_base) = rows.first().map_or((service_rate, database_rate), |row| {
            (number(&row["statements_per_second"]), number(&row["transactions_per_second"]))
        });
        let ratio = |value: f64, base: f64| (base > 0.0).then(|| value / base);
        rows.push(json!({
            "runs": runs,
            "runs_waiting_for_their_job": waiting,
            "seconds": seconds,
            "statements_per_second": service_rate,
            "transactions_per_second": database_rate,
            "ratio_to_fewest": {
                "statements_per_second": ratio(service_rate, statements_base),
                "transactions_per_second": ratio(database_rate, transactions_base),
            },
        }));
    }
    Ok(rows)
}

/// Posts one provisioning, again while the service sheds load (503, 429: starting hundreds of runs at once while
/// they start their first steps); whether it was accepted.
pub(crate) async fn post_until_accepted(http: &reqwest::Client, url: &str, name: String) -> bool {
    for _ in 0..10 {
        match http.post(url).json(&provision_body(&name)).send().await {
            Ok(answer) if answer.status().is_success() => return true,
            Ok(answer) if matches!(answer.status().as_u16(), 429 | 503) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            _ => return false,
        }
    }
    false
}

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

/// Waits until `runs` operations wait for their Jobs (every earlier step done), then a little longer for the last
/// of them to settle; returns how many wait.
async fn wait_until_all_wait_for_their_jobs(database_url: &str, runs: usize) -> Result<i64> {
    let database = Database::connect(database_url).await?;
    let count = Statement::from_string(
        DbBackend::Postgres,
        "SELECT count(*) AS waiting FROM operation WHERE stage = 'WaitForJob' AND state = 'InProgress'",
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut waiting = 0;
    while Instant::now() < deadline {
        let row = database.query_one_raw(count.clone()).await?.ok_or("no count")?;
        waiting = row.try_get::<i64>("", "waiting")?;
        if waiting >= runs as i64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    database.close().await?;
    // PostgreSQL's sessions report their counts within about ten seconds of going idle: let the work of starting
    // the runs reach pg_stat_database before the window opens.
    tokio::time::sleep(Duration::from_secs(11)).await;
    Ok(waiting)
}

/// The service's own count of the statements it sent.
async fn statements_sent(http: &reqwest::Client, metrics_url: &str) -> Result<f64> {
    let text = http.get(metrics_url).send().await?.text().await?;
    Ok(text
        .lines()
        .filter(|line| line.starts_with("provisioner_database_statements_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// PostgreSQL's count of the transactions committed and rolled back in `database` (read from another database).
async fn transactions(admin_url: &str, database: &str) -> Result<f64> {
    let admin = Database::connect(admin_url).await?;
    // The statistics of other sessions reach pg_stat_database within a second or so; read them fresh.
    admin.execute_unprepared("SELECT pg_stat_clear_snapshot()").await?;
    let query = Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT (xact_commit + xact_rollback)::float8 AS transactions FROM pg_stat_database WHERE datname = $1",
        [database.into()],
    );
    let row = admin.query_one_raw(query).await?.ok_or("no statistics of the database")?;
    let transactions = row.try_get::<f64>("", "transactions")?;
    admin.close().await?;
    Ok(transactions)
}

/// The table's rows for this phase.
pub(crate) fn print(rows: &[Value]) {
    if rows.is_empty() {
        return;
    }
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    println!(
        "\n{:<10} {:>8} {:>14} {:>10} {:>16} {:>10}",
        "following", "waiting", "statements/s", "vs fewest", "transactions/s", "vs fewest"
    );
    for row in rows {
        let ratio = &row["ratio_to_fewest"];
        println!(
            "{:<10} {:>8} {:>14.1} {:>9.2}x {:>16.1} {:>9.2}x",
            count(&row["runs"]),
            count(&row["runs_waiting_for_their_job"]),
            number(&row["statements_per_second"]),
            number(&ratio["statements_per_second"]),
            number(&row["transactions_per_second"]),
            number(&ratio["transactions_per_second"]),
        );
    }
}
