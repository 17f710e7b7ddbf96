//! Old and new replicas side by side on one database, as during a rolling update of the provisioner itself: a
//! replica claims only operations it can run, and leaves what a newer release queued to the newer replicas.

use provisioner::store::Store;
use sea_orm::ConnectionTrait as _;
use test_support::{Backend, on_both_databases, provision_body, spawn_app};

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
    app.database.set_operation_columns(&operations[1], [("stage", "AwaitingApproval".into())]).await;

    let store = Store::connect(&app.database.url, 2, std::time::Duration::from_secs(5)).await.unwrap();
    let lease = std::time::Duration::from_secs(60);
    let claim = store.claim_operation("older-replica", lease, true, &[]).await.expect("a claim never fails on them");
    assert_eq!(claim.map(|claim| claim.operation.id.to_string()).as_deref(), Some(operations[2].as_str()));
    let none = store.claim_operation("older-replica", lease, true, &[]).await.expect("claiming again");
    assert!(none.is_none(), "nothing else this release can run");

    let db = sea_orm::Database::connect(&app.database.url).await.unwrap();
    let statement = "SELECT state, claims FROM operation ORDER BY created_at, id".to_owned();
    let rows = db.query_all_raw(sea_orm::Statement::from_string(db.get_database_backend(), statement)).await.unwrap();
    let rows: Vec<(String, i32)> =
        rows.iter().map(|row| (row.try_get("", "state").unwrap(), row.try_get("", "claims").unwrap())).collect();
    assert_eq!(rows[..2], [("Pending".to_owned(), 0), ("Pending".to_owned(), 0)], "left as they were: {rows:?}");
}

on_both_databases!(a_replica_leaves_operations_it_does_not_know_to_newer_ones);
