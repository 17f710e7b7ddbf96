//! An outage is one clear signal in the log, not a storm (issue #54 item 6): while the database is away (cut by a
//! fault-injecting proxy in front of the service, a child process logging JSON) and requests, probes and the
//! worker's runs go on, the process writes one line when the database goes away and one when it is back (with the
//! outage's duration), no ERROR line, and counts its 503 answers in its metrics.

use std::time::Duration;

use serde_json::Value;
use test_support::engine::Engine;
use test_support::fault_proxy::FaultProxy;
use test_support::{Backend, provision_body};

const WAIT: Duration = Duration::from_secs(60);
const RUNS: usize = 10;
const OUTAGE: Duration = Duration::from_secs(17);

/// The log's JSON events from the line on, by level and message.
struct LogCounts {
    events: Vec<Value>,
}

impl LogCounts {
    fn read(log: &str, from_line: usize) -> LogCounts {
        let events = log.lines().skip(from_line).filter_map(|line| serde_json::from_str::<Value>(line).ok()).collect();
        LogCounts { events }
    }

    fn at(&self, level: &str) -> Vec<&Value> {
        self.events.iter().filter(|event| event["level"].as_str() == Some(level)).collect()
    }

    fn with_message(&self, message: &str) -> Vec<&Value> {
        self.events.iter().filter(|event| event["message"].as_str() == Some(message)).collect()
    }
}

/// The sum of `provisioner_http_requests_total` over its series answered `status`.
async fn answered(http: &reqwest::Client, metrics_url: &str, status: u16) -> u64 {
    let scrape = http.get(metrics_url).send().await.unwrap().text().await.unwrap();
    let label = format!("status=\"{status}\"");
    scrape
        .lines()
        .filter(|line| line.starts_with("provisioner_http_requests_total{") && line.contains(&label))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// What an operator and the kubelet do during the outage: read a runtime's status, list runtimes and probe.
async fn ask_until(http: &reqwest::Client, base: &str, ids: &(String, String), until: tokio::time::Instant) -> usize {
    let (runtime_id, operation_id) = ids;
    let urls = [
        format!("{base}/api/v1/provisions/{runtime_id}"),
        format!("{base}/api/v1/operations/{operation_id}"),
        format!("{base}/api/v1/provisions"),
        format!("{base}/healthz"),
        format!("{base}/readyz"),
    ];
    let mut unavailable = 0;
    while tokio::time::Instant::now() < until {
        for url in &urls {
            let status = http.get(url).send().await.map(|response| response.status().as_u16()).unwrap_or(0);
            unavailable += usize::from(status == 503);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    unavailable
}

#[tokio::test]
async fn a_database_outage_writes_one_line_when_it_goes_and_one_when_it_is_back() {
    let worker = [("APP_WORKER_LEASE", "6s"), ("APP_WORKER_POLL_INTERVAL", "500ms")];
    let (engine, api) = Engine::start_api_only(Backend::Postgres, &worker).await;
    let (database, proxied_url) = FaultProxy::in_front_of(&engine.app.database.url).await;
    let metrics_address = format!("127.0.0.1:{}", test_control_plane::free_port());
    let settings = [
        ("DATABASE_URL", proxied_url.as_str()),
        ("APP_DATABASE_ACQUIRE_TIMEOUT", "1s"),
        ("APP_METRICS_ADDRESS", metrics_address.as_str()),
    ];
    let service = engine.start_service_process(&settings).await;
    let base = format!("http://127.0.0.1:{}", service.port());
    let metrics_url = format!("http://{metrics_address}/metrics");
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().unwrap();

    let mut operations = Vec::new();
    for index in 0..RUNS {
        operations.push(engine.provision(&provision_body(&format!("outage-logs-{index}"))).await);
    }
    for (_, operation_id) in &operations {
        engine.wait_for_stage(operation_id, "WaitForJob", WAIT).await;
    }
    let before = answered(&http, &metrics_url, 503).await;
    let from_line = service.log().lines().count();

    database.cut();
    let asked = ask_until(&http, &base, &operations[0], tokio::time::Instant::now() + OUTAGE).await;
    database.restore();
    let recovered = tokio::time::Instant::now() + WAIT;
    while http.get(format!("{base}/healthz")).send().await.map(|response| response.status().as_u16()).ok() != Some(200)
    {
        assert!(tokio::time::Instant::now() < recovered, "/healthz did not recover after the outage");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The worker's next polls and lease renewals after the database is back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = answered(&http, &metrics_url, 503).await;

    let log = LogCounts::read(&service.log(), from_line);
    let (errors, warnings) = (log.at("ERROR"), log.at("WARN"));
    let went = log.with_message("dependency unavailable");
    let back = log.with_message("dependency available again");
    println!(
        "a {OUTAGE:?} database outage under {RUNS} runs and {asked} answers 503: {} ERROR lines, {} WARN lines, {} \
         'unavailable' and {} 'available again' lines; 503 counter {before} -> {after}",
        errors.len(),
        warnings.len(),
        went.len(),
        back.len()
    );
    for event in errors.iter().chain(&warnings) {
        println!("  {}: {}", event["level"], event["message"]);
    }
    assert!(errors.is_empty(), "ERROR lines during an outage nobody has to act on but the database's: {errors:#?}");
    assert_eq!(went.len(), 1, "{went:#?}");
    assert_eq!(went[0]["dependency"], "database", "{went:#?}");
    assert_eq!(went[0]["level"], "WARN");
    assert_eq!(back.len(), 1, "{back:#?}");
    assert_eq!(back[0]["dependency"], "database", "{back:#?}");
    let duration = back[0]["duration_seconds"].as_f64().expect("the outage's duration");
    assert!(duration >= OUTAGE.as_secs_f64() - 2.0 && duration < OUTAGE.as_secs_f64() + 30.0, "{duration}");
    assert_eq!(warnings.len(), 1, "warnings beyond the one line of the outage: {warnings:#?}");
    assert!(after >= before + asked as u64, "503 answers counted: {before} -> {after}, {asked} answered");
    drop(service);
    api.stop().await;
}
