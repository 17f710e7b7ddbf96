//! Cheap change detection (#28 item 6): runtime and operation reads carry an `ETag`, `If-None-Match` naming it
//! answers 304, a change with a stale `If-Match` is refused with 412 and queues nothing, and `updatedSince` lists
//! only what changed; on both databases.

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use serde_json::json;
use test_support::{Backend, TestApp, eks_body, on_both_databases, spawn_app};

on_both_databases!(
    reads_carry_an_etag_and_a_change_based_on_a_stale_read_is_refused,
    a_list_since_a_time_holds_only_the_runtimes_that_changed_since,
);

/// A read's `ETag`, after checking that naming it in `If-None-Match` answers 304 with no body.
async fn etag(app: &TestApp, path: &str) -> String {
    let read = app.get(path).await;
    assert_eq!(read.status, StatusCode::OK, "{path}: {}", read.text);
    let tag = read.headers.get("etag").unwrap_or_else(|| panic!("{path} has no ETag")).to_str().unwrap().to_owned();
    let again = app.request("GET", path, None, &[("if-none-match", tag.as_str())]).await;
    assert_eq!((again.status, again.text.as_str()), (StatusCode::NOT_MODIFIED, ""), "{path}");
    assert_eq!(again.headers.get("etag").unwrap().to_str().unwrap(), tag);
    tag
}

async fn operations_of(app: &TestApp, id: &str) -> usize {
    app.get(&format!("/api/v1/provisions/{id}/operations")).await.json()["operations"].as_array().unwrap().len()
}

async fn reads_carry_an_etag_and_a_change_based_on_a_stale_read_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.provisioned(&eks_body("tagged")).await;
    let resource = format!("/api/v1/runtimes/{id}");
    let seed = format!("/api/v1/provisions/{id}");
    let read = etag(&app, &resource).await;
    let seed_read = etag(&app, &seed).await;
    let operation = app.get(&resource).await.json()["lastOperation"]["id"].as_str().unwrap().to_owned();
    etag(&app, &format!("/api/v1/operations/{operation}")).await;

    let upgrade = json!({"workerPool": {"maxSize": 6}});
    for (path, stale) in [(&resource, "\"stale\""), (&seed, read.as_str())] {
        let answer = app.request("PATCH", path, Some(&upgrade), &[("if-match", stale)]).await;
        assert_eq!(answer.status, StatusCode::PRECONDITION_FAILED, "{path}: {}", answer.text);
        assert_eq!(answer.json()["field"], "If-Match");
    }
    assert_eq!(operations_of(&app, &id).await, 1, "a refused change queues nothing");
    let accepted = app.request("PATCH", &resource, Some(&upgrade), &[("if-match", read.as_str())]).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);

    // Changed: the old tag gets the new version, and a deletion based on the old read is refused.
    let changed = app.request("GET", &resource, None, &[("if-none-match", read.as_str())]).await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_ne!(changed.headers.get("etag").unwrap().to_str().unwrap(), read);
    let delete = app.request("DELETE", &seed, None, &[("if-match", seed_read.as_str())]).await;
    assert_eq!(delete.status, StatusCode::PRECONDITION_FAILED, "{}", delete.text);
    let current = etag(&app, &seed).await;
    let delete = app.request("DELETE", &seed, None, &[("if-match", current.as_str())]).await;
    assert_eq!(delete.json()["code"], "operation_in_progress", "past the check: {}", delete.text);
}

async fn names(app: &TestApp, path: &str) -> Vec<String> {
    let list = app.get(path).await;
    assert_eq!(list.status, StatusCode::OK, "{path}: {}", list.text);
    let runtimes = list.json()["runtimes"].as_array().unwrap().clone();
    runtimes.iter().map(|runtime| runtime["name"].as_str().unwrap().to_owned()).collect()
}

async fn a_list_since_a_time_holds_only_the_runtimes_that_changed_since(backend: Backend) {
    let app = spawn_app(backend).await;
    let before = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    app.provisioned(&eks_body("since-quiet")).await;
    let busy = app.provisioned(&eks_body("since-busy")).await;
    let all = names(&app, &format!("/api/v1/runtimes?updatedSince={before}")).await;
    assert_eq!(all, ["since-quiet", "since-busy"]);

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let hibernate = app.request("POST", &format!("/api/v1/runtimes/{busy}/hibernate"), None, &[]).await;
    assert_eq!(hibernate.status, StatusCode::ACCEPTED, "{}", hibernate.text);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    assert_eq!(names(&app, &format!("/api/v1/runtimes?updatedSince={between}")).await, ["since-busy"]);

    let refused = app.get("/api/v1/runtimes?updatedSince=yesterday").await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
}
