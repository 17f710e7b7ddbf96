//! The store's connections to PostgreSQL: one that sat idle in the pool for a second or more is checked with a
//! round trip before a statement uses it, so that one the database (or a proxy between) dropped meanwhile is
//! replaced unseen; one in use more recently is not checked, which spares a round trip before each statement.

use std::time::Duration;

use provisioner::store::Store;
use test_support::fault_proxy::FaultProxy;
use test_support::{Backend, TestDatabase};

/// The store over one connection to a fresh database, through a proxy that can drop it.
async fn store_behind_a_proxy(database: &TestDatabase) -> (Store, FaultProxy) {
    let (proxy, url) = FaultProxy::in_front_of(&database.url).await;
    let store = Store::connect(&url, 1, Duration::from_secs(3)).await.expect("connect through the proxy");
    (store, proxy)
}

/// Drops every connection through the proxy, as a restart of the database would, and lets it accept new ones.
async fn drop_connections(proxy: &FaultProxy) {
    proxy.cut();
    // The proxy closes its connections in tasks of their own.
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.restore();
}

#[tokio::test]
async fn a_connection_dropped_while_idle_is_replaced_and_one_in_use_fails_its_next_statement_only() {
    let database = TestDatabase::create(Backend::Postgres).await;
    let (store, proxy) = store_behind_a_proxy(&database).await;
    let runtime = uuid::Uuid::new_v4();
    assert!(store.find_runtime(runtime).await.unwrap().is_none());
    // The pool checks a connection as it gets it back, in a task of its own.
    tokio::time::sleep(Duration::from_millis(100)).await;

    // In use a moment ago: not checked, so the statement finds the connection gone; the pool then drops it.
    drop_connections(&proxy).await;
    assert!(store.find_runtime(runtime).await.is_err(), "a connection used within the second is not checked");
    assert!(store.find_runtime(runtime).await.unwrap().is_none(), "the next statement gets a new connection");

    // Idle for longer: checked before it is used, and replaced.
    drop_connections(&proxy).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(store.find_runtime(runtime).await.unwrap().is_none(), "an idle connection is checked and replaced");
}
