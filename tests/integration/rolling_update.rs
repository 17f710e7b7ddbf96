//! Old and new replicas side by side on one database, as during a rolling update of the provisioner itself: a
//! replica claims only operations it can run, and leaves what a newer release queued to the newer replicas. The
//! last test runs the previous release's own binary (`TEST_PREVIOUS_RELEASE_BIN`: the commit
//! `tests/fixtures/previous-release` names, built once by `tools/build-previous-release.sh`) beside this one.

use std::path::PathBuf;
use std::time::Duration;

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use provisioner::domain::run::Stage;
use provisioner::store::{Migrations, Store};
use sea_orm::ConnectionTrait as _;
use serde_json::{Value, json};
use test_support::engine::{Engine, RUNNER_PLAN_SUMMARY};
use test_support::{Backend, TestDatabase, on_both_databases, provision_body, spawn_app};

/// An operation of a type this release does not know (queued by a newer replica), and one left at a stage it
/// does not know, are never claimed, so the replica neither fails its claims nor stops; the operation it knows,
/// queued after both, is claimed; and the other two stay as they were for a replica that knows them.
async fn a_replica_leaves_operations_it_does_not_know_to_newer_ones(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut operations = Vec::new();
    for name in ["newer-type", "newer-stage", "known"] {
        let accepted = app.post_provision(&provision_body(name)).await.json();
        operations.push(accepted["operationId"].as_str().unwrap().to_owned());
    }
    app.database.set_operation_columns(&operations[0], [("operation_type", "Retry".into())]).await;
    app.database.set_operation_columns(&operations[1], [("stage", "SweepOrphans".into())]).await;

    let store = Store::connect(&app.database.url, 2, std::time::Duration::from_secs(5)).await.unwrap();
    let lease = std::time::Duration::from_secs(60);
    let claims =
        store.claim_operations("older-replica", lease, true, &[], 3).await.expect("a claim never fails on them");
    let claimed: Vec<String> = claims.iter().map(|claim| claim.operation.id.to_string()).collect();
    assert_eq!(claimed, [operations[2].as_str()], "only the operation this release knows");
    let none = store.claim_operations("older-replica", lease, true, &[], 3).await.expect("claiming again");
    assert!(none.is_empty(), "nothing else this release can run");

    let db = sea_orm::Database::connect(&app.database.url).await.unwrap();
    let statement = "SELECT state, claims FROM operation ORDER BY created_at, id".to_owned();
    let rows = db.query_all_raw(sea_orm::Statement::from_string(db.get_database_backend(), statement)).await.unwrap();
    let rows: Vec<(String, i32)> =
        rows.iter().map(|row| (row.try_get("", "state").unwrap(), row.try_get("", "claims").unwrap())).collect();
    assert_eq!(rows[..2], [("Pending".to_owned(), 0), ("Pending".to_owned(), 0)], "left as they were: {rows:?}");
}

/// A replica of release N-1 restarts (or a rollback starts it) on a database release N migrated: it starts and
/// serves, since migrations are additive across one release; and one that still lacks its own migrations is
/// refused when it must not apply them itself.
async fn a_replica_starts_on_a_database_a_newer_release_migrated(backend: Backend) {
    let database = TestDatabase::create(backend).await;
    let timeout = Duration::from_secs(5);
    let check_only = Store::connect_with(&database.url, 2, timeout, Migrations::Check, &Default::default()).await;
    let refusal = check_only.err().expect("a database without this release's migrations is refused").to_string();
    assert!(refusal.contains("run `provisioner migrate` first"), "{refusal}");
    Store::connect(&database.url, 2, timeout).await.expect("this release migrates a new database");

    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    let newer = "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m20991231_000001_newer_release', 0)";
    db.execute_unprepared(newer).await.unwrap();
    for migrations in [Migrations::Apply, Migrations::Check] {
        let store = Store::connect_with(&database.url, 2, timeout, migrations, &Default::default()).await;
        store.unwrap_or_else(|error| panic!("{migrations:?}: an older replica starts on the newer schema: {error}"));
    }
}

/// Replicas starting together on a new PostgreSQL database apply the migrations once, one after the other, and
/// all start.
#[tokio::test]
async fn replicas_starting_together_migrate_once() {
    let database = TestDatabase::create(Backend::Postgres).await;
    let starts = (0..4).map(|_| Store::connect(&database.url, 2, Duration::from_secs(30)));
    for started in futures::future::join_all(starts).await {
        started.expect("every replica starts");
    }
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    let statement = "SELECT count(*) AS applied, count(DISTINCT version) AS distinct_versions FROM seaql_migrations";
    let row = db.query_one_raw(sea_orm::Statement::from_string(db.get_database_backend(), statement)).await;
    let row = row.unwrap().unwrap();
    let (applied, distinct): (i64, i64) =
        (row.try_get("", "applied").unwrap(), row.try_get("", "distinct_versions").unwrap());
    assert_eq!(applied, distinct);
}

fn previous_release() -> PathBuf {
    std::env::var_os("TEST_PREVIOUS_RELEASE_BIN").map(PathBuf::from).expect(
        "TEST_PREVIOUS_RELEASE_BIN names the previous release's provisioner: run through `make test`, or set it to \
         the last line of tools/build-previous-release.sh plus /provisioner",
    )
}

/// A plan approved while a replica of the previous release (0.1.0, which knows no approvals and would apply a
/// fresh plan) runs the only worker waits at stage `Approved`, which 0.1.0 does not know: the old replica passes
/// it by (it claims a provisioning queued after it), keeps running, and once a replica of this release runs, the
/// approved plan is applied in a Job of its own and the operation ends Succeeded.
#[tokio::test]
async fn an_approved_plan_waits_for_this_release_while_the_previous_one_runs_beside_it() {
    const WAIT: Duration = Duration::from_secs(60);
    let digest = "e".repeat(64);
    let (mut engine, process) = Engine::start(Backend::Postgres, &[]).await;
    let mut body = provision_body("mixed-approved");
    body["runtimeInput"]["approvalPolicy"] = json!("manual");
    let (runtime_id, operation) = engine.provision(&body).await;
    let job = format!("provision-{runtime_id}");
    engine.wait_for_stage(&operation, "WaitForJob", WAIT).await;
    let mut held: Value = serde_json::from_str(RUNNER_PLAN_SUMMARY).unwrap();
    held["savedPlanSha256"] = json!(digest);
    engine.runner_exits(&job, 0, &held.to_string()).await;
    engine.wait_for_stage(&operation, "AwaitingApproval", WAIT).await;

    // Now only the previous release runs a worker; this release's process serves the API alone.
    process.stop().await;
    let claims = engine.operation(&operation).await.claims;
    let api = engine.start_process(&[("MODULES_REPO_URL", "")]).await;
    let previous_binary = previous_release();
    // The binary is 0.1.0's own: it knows no approvals, so its help lists no approval setting.
    let help = std::process::Command::new(&previous_binary).arg("--help").output().expect("the previous release runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("DATABASE_URL") && !help.contains("APP_PLAN_APPROVAL_TTL"), "{help}");
    let mut previous = engine.start_release_process(&previous_binary, &[]).await;
    let path = format!("/api/v1/operations/{operation}/approve");
    let approved = engine.app.request("POST", &path, Some(&json!({ "planSha256": digest })), &[]).await;
    assert_eq!(approved.status, StatusCode::ACCEPTED, "{}", approved.text);
    let (_, later) = engine.provision(&provision_body("mixed-later")).await;
    engine.wait_for_stage(&later, "WaitForJob", WAIT).await;
    // 0.1.0's Job runs as the shared `terraform-runner`, which the chart keeps for that one release (this release's
    // Jobs run as their own: `runner_identity.rs`).
    let later_job = engine.jobs_of_operation(&later).await.remove(0);
    let account = later_job.spec.unwrap().template.spec.unwrap().service_account_name;
    assert_eq!(account.as_deref(), Some("terraform-runner"));
    let passed_by = engine.operation(&operation).await;
    assert_eq!(
        (passed_by.state, passed_by.stage, passed_by.claims),
        (OperationState::Pending, Stage::Approved, claims),
        "the previous release claimed the later provisioning and left the approved one:\n{}",
        previous.log_tail(20)
    );
    assert!(previous.exited().is_none(), "the previous release keeps running:\n{}", previous.log_tail(40));

    previous.terminate(Duration::from_secs(30)).await;
    api.stop().await;
    let _current = engine.start_process(&[]).await;
    let approved_job = format!("{job}-approved");
    engine.wait_for_stage(&operation, "WaitForJob", WAIT).await;
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n";
    engine.runner_succeeds(&approved_job, Some((&format!("{job}-outputs"), kubeconfig))).await;
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");
}

on_both_databases!(
    a_replica_leaves_operations_it_does_not_know_to_newer_ones,
    a_replica_starts_on_a_database_a_newer_release_migrated
);
