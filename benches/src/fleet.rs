//! A fleet (issue 31 item 3): runtimes with ten operations each (the provisioning recorded through the store's
//! insert path, nine finished upgrades of history added in one statement by `test_support::fleet`), then the
//! server's start-up with that database, its memory, single-client pages of 100 (REST and GraphQL, all runtimes,
//! by label, by label and state), one runtime's history, and the runtime list at 16 clients. The baseline is the
//! same measure on a fleet a tenth of the size in the same run, every page as full: an index-backed page costs the
//! same on both.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use provisioner::domain::{Labels, ProvisionRequest, Runtime, Topology};
use provisioner::store::{self, Store};
use sea_orm::Database;
use serde_json::{Value, json};
use test_control_plane::ControlPlane;
use uuid::Uuid;

use crate::{Args, Databases, Result, Server, Stats, Target, in_fresh_namespace, load};

/// Operations of history per runtime, beside its provisioning.
const HISTORY: usize = 9;
/// Runtimes that carry the label the filtered pages ask for, spread over the fleet: a full page of them in both
/// fleets, so both serve the same pages.
const LABELLED: usize = 100;
/// The baseline fleet is this fraction of the measured one.
const BASELINE_FRACTION: usize = 10;

const REST_PAGES: [(&str, &str); 4] = [
    ("REST runtimes", "/api/v1/runtimes?first=100"),
    ("REST runtimes by label", "/api/v1/runtimes?first=100&label=team%3Dpayments"),
    ("REST runtimes by label and state", "/api/v1/runtimes?first=100&label=team%3Dpayments&state=Provisioning"),
    ("REST a runtime's history", "/api/v1/provisions/{id}/operations?first=100"),
];

const GRAPHQL_PAGES: [(&str, &str); 4] = [
    ("GraphQL runtimes", "{ runtimes(first: 100) { edges { node { id name state } } pageInfo { endCursor } } }"),
    (
        "GraphQL runtimes by label",
        r#"{ runtimes(first: 100, label: "team=payments") { edges { node { id name state } } } }"#,
    ),
    (
        "GraphQL runtimes by label and state",
        r#"{ runtimes(first: 100, label: "team=payments", state: Pending) { edges { node { id name state } } } }"#,
    ),
    (
        "GraphQL a runtime's history",
        "query($id: String!) { runtimeOperations(runtimeID: $id, first: 100) { edges { node { id state stage } } } }",
    ),
];

/// The fleet and its baseline, each a row.
pub async fn fleet(
    args: &Args,
    server_bin: &Path,
    work: &Path,
    http: &reqwest::Client,
    control_plane: &ControlPlane,
    base_env: &dyn Fn(&str) -> Vec<(String, String)>,
    databases: &mut Databases,
) -> Result<Vec<Value>> {
    let mut rows = Vec::new();
    for runtimes in [(args.fleet_runtimes / BASELINE_FRACTION).max(LABELLED), args.fleet_runtimes] {
        let database_url = databases.create("fleet").await?;
        let env = in_fresh_namespace(control_plane, work, &format!("fleet{runtimes}"), base_env(&database_url)).await?;
        rows.push(one_fleet(runtimes, &database_url, env, args, server_bin, work, http).await?);
    }
    Ok(rows)
}

async fn one_fleet(
    runtimes: usize,
    database_url: &str,
    env: Vec<(String, String)>,
    args: &Args,
    server_bin: &Path,
    work: &Path,
    http: &reqwest::Client,
) -> Result<Value> {
    let log = work.join(format!("server-fleet-{runtimes}.log"));
    // The first start applies the migrations; the second, measured, finds them applied.
    Server::start(server_bin, env.clone(), &log, http).await?.stop().await;
    eprintln!("fleet: seeding {runtimes} runtimes with {} operations...", runtimes * (HISTORY + 1));
    let seeding = Instant::now();
    let ids = Arc::new(seed(database_url, runtimes).await?);
    let seed_seconds = seeding.elapsed().as_secs_f64();
    let server = Server::start(server_bin, env, &log, http).await?;
    let startup_ms = server.ready_ms;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = server.rss_kib()?;

    let mut pages = Vec::new();
    let rest = REST_PAGES.map(|(name, path)| (name, Target::Page(path)));
    let graphql = GRAPHQL_PAGES.map(|(name, query)| (name, Target::GraphqlQuery(query)));
    for (name, target) in rest.into_iter().chain(graphql) {
        let url = match target {
            Target::Page(path) => format!("http://{}{path}", server.api),
            _ => format!("http://{}/graphql", server.api),
        };
        let stats = load(http, target, &url, &ids, 1, Duration::from_secs(2)).await;
        eprintln!("  {name}: p50 {:.2} ms, p99 {:.2} ms, errors {}", stats.p50, stats.p99, stats.errors);
        pages.push(json!({ "page": name, "p50_ms": stats.p50, "p99_ms": stats.p99, "errors": stats.errors }));
    }
    let list = Target::Page(REST_PAGES[0].1);
    let list_url = format!("http://{}{}", server.api, REST_PAGES[0].1);
    let at_16: Stats = load(http, list, &list_url, &ids, 16, args.duration).await;
    eprintln!("  runtime list at 16 clients: {:.0} req/s, p99 {:.2} ms", at_16.rps(), at_16.p99);
    let rss_after = server.rss_kib()?;
    server.stop().await;
    Ok(json!({
        "runtimes": runtimes,
        "operations": runtimes * (HISTORY + 1),
        "seed_seconds": seed_seconds,
        "startup_ms": { "healthz_ok": startup_ms },
        "rss_kib": { "idle": rss_idle, "after_pages": rss_after },
        "pages": pages,
        "list_at_16_clients": {
            "requests_per_second": at_16.rps(), "p50_ms": at_16.p50, "p99_ms": at_16.p99, "errors": at_16.errors,
        },
    }))
}

/// The runtimes through the store's insert path (concurrently), then their history in one statement, then fresh
/// statistics.
async fn seed(database_url: &str, runtimes: usize) -> Result<Vec<(Uuid, Uuid)>> {
    let store = Store::connect(database_url, 16, Duration::from_secs(10)).await?;
    let labelled_one_in = (runtimes / LABELLED).max(1);
    let results: Vec<Result<(Uuid, Uuid)>> = futures::stream::iter(0..runtimes)
        .map(|index| {
            let store = store.clone();
            async move {
                let request = ProvisionRequest::example_named(Topology::VanillaKubeadm, &format!("fleet-{index}"));
                let (mut runtime, operation) = Runtime::requested(request, false, store::now());
                let team = if index % labelled_one_in == 0 { "payments" } else { "platform" };
                runtime.labels = Labels([("team".to_owned(), team.to_owned())].into());
                store.insert_runtime(&runtime, &operation, None).await?;
                Ok((runtime.id, operation.id))
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let ids = results.into_iter().collect::<Result<Vec<_>>>()?;
    let database = Database::connect(database_url).await?;
    test_support::fleet::add_finished_upgrades(&database, HISTORY).await?;
    Ok(ids)
}

/// The fleet's rows as a table: each figure beside the baseline fleet's.
pub fn print(rows: &[Value]) {
    let [baseline, fleet] = rows else { return };
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    println!(
        "\nfleet: {} runtimes, {} operations (baseline: {} runtimes, {} operations; ratio = fleet / baseline)",
        fleet["runtimes"], fleet["operations"], baseline["runtimes"], baseline["operations"]
    );
    println!("{:<40} {:>10} {:>10} {:>8}", "measure", "fleet", "baseline", "ratio");
    let line = |name: &str, of: &dyn Fn(&Value) -> f64| {
        let (value, base) = (of(fleet), of(baseline));
        println!("{name:<40} {value:>10.2} {base:>10.2} {:>7.2}x", value / base);
    };
    line("start-up to /healthz 200 (ms)", &|row| number(&row["startup_ms"]["healthz_ok"]));
    line("RSS idle (MiB)", &|row| number(&row["rss_kib"]["idle"]) / 1024.0);
    let pages = fleet["pages"].as_array().cloned().unwrap_or_default();
    for (index, page) in pages.iter().enumerate() {
        let name = format!("{} p50 (ms)", page["page"].as_str().unwrap_or_default());
        line(&name, &|row| number(&row["pages"][index]["p50_ms"]));
    }
    line("runtime list, 16 clients (req/s)", &|row| number(&row["list_at_16_clients"]["requests_per_second"]));
    line("runtime list, 16 clients, p99 (ms)", &|row| number(&row["list_at_16_clients"]["p99_ms"]));
}
