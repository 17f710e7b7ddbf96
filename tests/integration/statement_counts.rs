//! Lists cost a fixed number of SQL statements whatever their page size, through both APIs on both databases:
//! a page of one and a page of every item send the same statements, counted by the store's
//! `provisioner_database_statements_total` on the metrics endpoint.

use axum::http::StatusCode;
use std::time::Duration;

use provisioner::domain::OperationState;
use provisioner::domain::run_log::KeptLog;
use provisioner::store::Store;
use serde_json::{Value, json};
use test_support::{Backend, TestApp, eks_body, on_both_databases, spawn_app};

/// At most this many statements a list may send: the page, and one batch for each thing its items show (stages,
/// whether each runtime was provisioned, kept logs; a runtime's operations first find the runtime).
const MOST_STATEMENTS_OF_A_LIST: u64 = 4;

const RUNTIMES: &str = "query($first: Int) {
    runtimes(first: $first) {
        edges { node { id status {
            lastOperationStatus { id state stages { stage enteredAt } }
            hibernationStatus { hibernated hibernationPossible }
        } } }
    }
}";

const OPERATIONS: &str = "query($id: String!, $first: Int) {
    runtimeOperations(runtimeID: $id, first: $first) {
        edges { node { id state stages { stage enteredAt } logs(tailLines: 1) { container log } } }
    }
}";

/// The statements the app has sent so far, as its metrics endpoint shows them.
async fn statements_sent(app: &TestApp) -> u64 {
    let metrics = app.metrics().await;
    ok_statements(&metrics, "provisioner_database_statements_total{")
        .unwrap_or_else(|| panic!("no statement counter in the metrics:\n{metrics}"))
}

/// The sum of the counter's `ok` series (one per kind of statement) in a metrics text.
fn ok_statements(text: &str, counter: &str) -> Option<u64> {
    let series: Vec<u64> = text
        .lines()
        .filter(|line| line.starts_with(counter) && line.contains(r#"result="ok""#))
        .map(|line| line.rsplit(' ').next().and_then(|count| count.parse().ok()).expect(line))
        .collect();
    (!series.is_empty()).then(|| series.iter().sum())
}

/// The statements `request` sent, and what it answered: the counter's growth around it, less what reading the
/// counter costs (the metrics endpoint counts the stored operations).
async fn statements_of<F: Future<Output = Value>>(app: &TestApp, request: F) -> (u64, Value) {
    let first = statements_sent(app).await;
    let second = statements_sent(app).await;
    let reading = second - first;
    let answer = request.await;
    let after = statements_sent(app).await;
    (after - second - reading, answer)
}

async fn rest(app: &TestApp, path: String) -> Value {
    let answer = app.get(&path).await;
    assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.text);
    answer.json()
}

async fn graphql(app: &TestApp, query: &str, variables: Value) -> Value {
    let answer = app.graphql(query, variables).await;
    assert_eq!(answer["errors"], Value::Null, "{answer}");
    answer
}

/// Ten runtimes in the states that need different reads (provisioned, queued, failed, and a queued hibernation
/// of a provisioned one), and one of them with nine ended operations that kept their logs. Returns that runtime's
/// id.
async fn runtimes_in_every_state(app: &TestApp) -> String {
    let busy = app.provisioned(&eks_body("counted-busy")).await;
    for cycle in 0..4 {
        for action in ["hibernate", "wake"] {
            let answer = app.request("POST", &format!("/api/v1/provisions/{busy}/{action}"), None, &[]).await;
            assert_eq!(answer.status, StatusCode::ACCEPTED, "{action} of cycle {cycle}: {}", answer.text);
            app.run_queued_operation(&[], OperationState::Succeeded).await;
        }
    }
    let store = Store::connect(&app.database.url, 2, Duration::from_secs(5)).await.unwrap();
    let operations = app.get(&format!("/api/v1/provisions/{busy}/operations")).await.json();
    for operation in operations["operations"].as_array().unwrap() {
        let id = operation["id"].as_str().unwrap().parse().unwrap();
        let log = KeptLog { container: "terraform-runner".into(), text: "applied\n".into(), printed_bytes: 8 };
        store.archive_run_logs(id, &[log]).await.unwrap();
    }
    for index in 0..3 {
        app.provisioned(&eks_body(&format!("counted-provisioned-{index}"))).await;
        assert_eq!(
            app.post_provision(&eks_body(&format!("counted-queued-{index}"))).await.status,
            StatusCode::ACCEPTED
        );
    }
    for index in 0..2 {
        let failed = app.post_provision(&eks_body(&format!("counted-failed-{index}"))).await.json();
        let operation_id = failed["operationId"].as_str().unwrap();
        app.database.set_operation_columns(operation_id, [("state", "Failed".into()), ("stage", "Done".into())]).await;
    }
    let hibernating = app.provisioned(&eks_body("counted-hibernating")).await;
    let answer = app.request("POST", &format!("/api/v1/provisions/{hibernating}/hibernate"), None, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    busy
}

/// The statements each of the four lists sent for a page of `first`.
async fn statements_of_lists(app: &TestApp, busy: &str, first: usize) -> [u64; 5] {
    let runtimes = if first == 1 { 1 } else { 10 };
    let operations = if first == 1 { 1 } else { 9 };

    let (rest_runtimes, page) = statements_of(app, rest(app, format!("/api/v1/provisions?first={first}"))).await;
    assert_eq!(page["runtimes"].as_array().unwrap().len(), runtimes, "{page}");

    let path = format!("/api/v1/runtimes?first={first}");
    let (rest_runtime_resources, page) = statements_of(app, rest(app, path)).await;
    assert_eq!(page["runtimes"].as_array().unwrap().len(), runtimes, "{page}");

    let (graphql_runtimes, page) = statements_of(app, graphql(app, RUNTIMES, json!({ "first": first }))).await;
    assert_eq!(page["data"]["runtimes"]["edges"].as_array().unwrap().len(), runtimes, "{page}");

    let path = format!("/api/v1/provisions/{busy}/operations?first={first}");
    let (rest_operations, page) = statements_of(app, rest(app, path)).await;
    assert_eq!(page["operations"].as_array().unwrap().len(), operations, "{page}");
    assert!(page["operations"][0]["stages"].as_array().is_some_and(|stages| !stages.is_empty()), "{page}");

    let variables = json!({ "id": busy, "first": first });
    let (graphql_operations, page) = statements_of(app, graphql(app, OPERATIONS, variables)).await;
    let edges = page["data"]["runtimeOperations"]["edges"].as_array().unwrap();
    assert_eq!(edges.len(), operations, "{page}");
    let logs = json!([{ "container": "terraform-runner", "log": "applied\n" }]);
    assert!(edges.iter().all(|edge| edge["node"]["logs"] == logs), "{page}");
    [rest_runtimes, rest_runtime_resources, graphql_runtimes, rest_operations, graphql_operations]
}

async fn a_page_costs_the_same_statements_whatever_its_size(backend: Backend) {
    let app = spawn_app(backend).await;
    let busy = runtimes_in_every_state(&app).await;
    let lists = [
        "REST runtimes",
        "REST runtime resources",
        "GraphQL runtimes",
        "REST operations",
        "GraphQL operations with logs",
    ];
    let of_one = statements_of_lists(&app, &busy, 1).await;
    let of_all = statements_of_lists(&app, &busy, 10).await;
    for ((list, one), all) in lists.into_iter().zip(of_one).zip(of_all) {
        assert_eq!(one, all, "{list}: a page of one sent {one} statements, a page of every item {all}");
        assert!(all <= MOST_STATEMENTS_OF_A_LIST, "{list}: {all} statements");
    }
}

on_both_databases!(a_page_costs_the_same_statements_whatever_its_size);

/// A runtime's status is read in one statement (a bare handler reads a runtime, then its operation): the runtime
/// with its last operation, that operation's stages and when its provisioning succeeded; and an operation with its
/// stages in one, the same stages.
async fn a_status_read_is_one_statement(backend: Backend) {
    let app = spawn_app(backend).await;
    let provisioned = app.provisioned(&eks_body("status-provisioned")).await;
    let queued = app.post_provision(&eks_body("status-queued")).await.json()["id"].as_str().unwrap().to_owned();
    let hibernating = app.provisioned(&eks_body("status-hibernating")).await;
    let answer = app.request("POST", &format!("/api/v1/provisions/{hibernating}/hibernate"), None, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    for (id, state) in [(&provisioned, "Ready"), (&queued, "Provisioning"), (&hibernating, "Hibernating")] {
        let (statements, status) = statements_of(&app, rest(&app, format!("/api/v1/provisions/{id}"))).await;
        assert_eq!(statements, 1, "the status of a runtime that is {state}: {status}");
        let (statements, resource) = statements_of(&app, rest(&app, format!("/api/v1/runtimes/{id}"))).await;
        assert_eq!(statements, 1, "the resource of a runtime that is {state}: {resource}");
        assert_eq!(resource["state"], state, "{resource}");
        let operation_path = format!("/api/v1/operations/{}", status["operationId"].as_str().unwrap());
        let (statements, operation) = statements_of(&app, rest(&app, operation_path)).await;
        assert_eq!(statements, 1, "the last operation of a runtime that is {state}: {operation}");
        assert_eq!(resource["lastOperation"]["stages"], operation["stages"], "{resource}");
        assert!(!operation["stages"].as_array().unwrap().is_empty(), "{operation}");
    }
}

on_both_databases!(a_status_read_is_one_statement);

/// A store of its own on `url` whose statements `statements_counted` counts in the registry returned with it.
async fn counted_store(url: &str) -> (Store, prometheus_client::registry::Registry) {
    use provisioner::store::{Migrations, StatementMetrics};
    let metrics = StatementMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let store = Store::connect_with(url, 2, Duration::from_secs(5), Migrations::Check, &metrics).await.unwrap();
    (store, registry)
}

/// The statements `registry`'s store has sent.
fn statements_counted(registry: &prometheus_client::registry::Registry) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    // A store that has sent nothing yet shows no series of the counter, and a count of zero of its durations.
    let none_yet = text.contains("database_statement_duration_seconds_count 0\n");
    ok_statements(&text, "database_statements_total{")
        .or(none_yet.then_some(0))
        .unwrap_or_else(|| panic!("no count in {text}"))
}

/// A process renews the leases of every run it follows in one statement, each still fenced by its own claim token,
/// and hears of cancel requests in the same answer.
async fn renewing_every_lease_a_process_holds_is_one_statement(backend: Backend) {
    let app = spawn_app(backend).await;
    for index in 0..5 {
        let accepted = app.post_provision(&eks_body(&format!("leased-{index}"))).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    }
    let (store, registry) = counted_store(&app.database.url).await;
    let lease = Duration::from_secs(60);
    let claims = store.claim_operations("keeper", lease, false, &[], 10).await.unwrap();
    assert_eq!(claims.len(), 5);
    let cancelled = claims[1].operation.id;
    let answer = app.request("POST", &format!("/api/v1/operations/{cancelled}/cancel"), None, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    // A claim another process took over: its token is no longer the operation's.
    let mut sent: Vec<_> = claims.iter().map(|claim| (claim.operation.id, claim.token)).collect();
    sent[2].1 = uuid::Uuid::now_v7();

    let before = statements_counted(&registry);
    let renewed = store.renew_leases(&sent, lease).await.unwrap();
    assert_eq!(statements_counted(&registry) - before, 1, "one statement for every lease");
    let mut renewed_ids: Vec<_> = renewed.iter().map(|lease| lease.operation_id).collect();
    renewed_ids.sort();
    let mut current: Vec<_> =
        sent.iter().enumerate().filter(|(index, _)| *index != 2).map(|(_, (id, _))| *id).collect();
    current.sort();
    assert_eq!(renewed_ids, current, "the superseded claim is not renewed");
    let cancel_requests: Vec<_> =
        renewed.iter().filter(|lease| lease.cancel_requested_by.is_some()).map(|lease| lease.operation_id).collect();
    assert_eq!(cancel_requests, [cancelled], "the cancel request arrives with the renewal");
}

on_both_databases!(renewing_every_lease_a_process_holds_is_one_statement);

/// A burst is claimed in one statement per batch, not one per operation: a claim takes at most its limit, the
/// oldest first, each once (the next claim takes the rest), each using its first attempt.
async fn claiming_a_burst_is_one_statement(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut queued = Vec::new();
    for index in 0..6 {
        let accepted = app.post_provision(&eks_body(&format!("burst-{index}"))).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
        queued.push(accepted.json()["operationId"].as_str().unwrap().to_owned());
    }
    let (store, registry) = counted_store(&app.database.url).await;
    let lease = Duration::from_secs(60);

    let before = statements_counted(&registry);
    let first = store.claim_operations("burst", lease, false, &[], 4).await.unwrap();
    assert_eq!(statements_counted(&registry) - before, 1, "one statement for the batch");
    let rest = store.claim_operations("burst", lease, false, &[], 4).await.unwrap();
    let claimed: Vec<String> = first.iter().chain(&rest).map(|claim| claim.operation.id.to_string()).collect();
    assert_eq!(claimed, queued, "the four oldest first, in creation order, then the other two");
    for claim in first.iter().chain(&rest) {
        let operation = &claim.operation;
        assert_eq!((operation.state, operation.claims, operation.attempts), (OperationState::InProgress, 1, 1));
    }
    assert!(store.claim_operations("burst", lease, false, &[], 4).await.unwrap().is_empty(), "nothing is left");
}

on_both_databases!(claiming_a_burst_is_one_statement);
