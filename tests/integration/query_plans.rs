//! Every page the APIs serve is found through an index on PostgreSQL, whatever the fleet's size: with 5,000
//! runtimes and 50,000 operations of history (recorded through the store, the history added in one statement) and
//! fresh statistics, `EXPLAIN` of each list statement the store sends (and of the feed the Runtime reconciler reads
//! every second) shows no sequential scan of `runtime` or `operation`.

use provisioner::domain::managed_by::ResourceRef;
use provisioner::domain::{Labels, OperationState, ProvisionRequest, Runtime, RuntimeState, Topology};
use provisioner::store::{self, RuntimeFilter, Store};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};
use serde_json::Value;
use test_support::{Backend, TestDatabase};

const RUNTIMES: usize = 5_000;
/// Operations of history per runtime, beside its provisioning.
const HISTORY: usize = 9;

/// The tables a plan reads sequentially.
fn sequential_scans(plan: &Value, found: &mut Vec<String>) {
    if plan["Node Type"] == "Seq Scan" {
        found.push(plan["Relation Name"].as_str().unwrap_or("?").to_owned());
    }
    for child in plan["Plans"].as_array().into_iter().flatten() {
        sequential_scans(child, found);
    }
}

async fn seed(store: &Store) -> Vec<uuid::Uuid> {
    let mut ids = Vec::new();
    for index in 0..RUNTIMES {
        let request = ProvisionRequest::example_named(Topology::VanillaKubeadm, &format!("fleet-{index}"));
        let (mut runtime, operation) = Runtime::requested(request, false, store::now());
        // One runtime in fifty belongs to the payments team.
        let team = if index % 50 == 0 { "payments" } else { "platform" };
        runtime.labels = Labels([("team".to_owned(), team.to_owned())].into());
        // The payments team declares its runtimes as `Runtime` resources.
        if index % 50 == 0 {
            runtime.managed_by = Some(ResourceRef { namespace: "payments".to_owned(), name: runtime.name.clone() });
        }
        store.insert_runtime(&runtime, &operation, None).await.expect("a runtime");
        ids.push(runtime.id);
    }
    ids
}

#[tokio::test]
async fn every_page_of_a_large_fleet_is_found_through_an_index() {
    let database = TestDatabase::create(Backend::Postgres).await;
    let store = Store::connect(&database.url, 8, std::time::Duration::from_secs(10)).await.unwrap();
    let ids = seed(&store).await;
    let db = Database::connect(&database.url).await.unwrap();
    // The history: finished upgrades of every runtime, older than its provisioning.
    test_support::fleet::add_finished_upgrades(&db, HISTORY).await.unwrap();

    let middle = ids[ids.len() / 2];
    let payments = RuntimeFilter { label: Some(("team", "payments")), ..RuntimeFilter::default() };
    let pages: Vec<(&str, Statement)> = vec![
        ("runtimes", store.runtime_page_statement(&RuntimeFilter::default(), None, 100)),
        ("runtimes after a cursor", store.runtime_page_statement(&RuntimeFilter::default(), Some(middle), 100)),
        ("runtimes by label", store.runtime_page_statement(&payments, None, 100)),
        (
            "runtimes by state",
            store.runtime_page_statement(
                &RuntimeFilter { state: Some(RuntimeState::Provisioning), ..payments },
                None,
                100,
            ),
        ),
        (
            "runtimes by last operation's state",
            store.runtime_page_statement(
                &RuntimeFilter { last_operation_state: Some(OperationState::Pending), ..RuntimeFilter::default() },
                None,
                100,
            ),
        ),
        ("a runtime's operations", store.operation_page_statement(middle, None, 100)),
        (
            "the operations the Runtime reconciler follows",
            store.managed_operation_changes_statement(store::now() - chrono::TimeDelta::seconds(10), 500),
        ),
    ];
    let mut failures = Vec::new();
    for (page, statement) in pages {
        let explain = Statement::from_sql_and_values(
            DbBackend::Postgres,
            format!("EXPLAIN (FORMAT JSON) {}", statement.sql),
            statement.values.map(|values| values.0).unwrap_or_default(),
        );
        let row = db.query_one_raw(explain).await.unwrap().expect("a plan");
        let plan: Value = row.try_get("", "QUERY PLAN").unwrap();
        let mut scanned = Vec::new();
        sequential_scans(&plan[0]["Plan"], &mut scanned);
        eprintln!("{page}: {}", serde_json::to_string(&plan[0]["Plan"]["Node Type"]).unwrap());
        scanned.retain(|table| table == "runtime" || table == "operation");
        if !scanned.is_empty() {
            failures.push(format!("{page}: sequential scan of {scanned:?}\n{plan:#}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
