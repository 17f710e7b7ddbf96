//! The REST event stream (`GET /api/v1/operations/{id}/events`, Server-Sent Events): an operation followed from
//! its queued state to its end, the stream then ending; a reconnect with `Last-Event-ID` gets only what changed
//! since; on both databases.

use std::time::Duration;

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use serde_json::Value;
use test_support::{Backend, eks_body, on_both_databases, spawn_app};

on_both_databases!(an_operation_is_followed_to_its_end_and_a_reconnect_resumes_after_the_last_event_seen);

/// One server-sent event: its name, id and data.
#[derive(Debug)]
struct ServerEvent {
    name: String,
    id: Option<String>,
    data: Value,
}

fn parse(stream: &str) -> Vec<ServerEvent> {
    stream
        .split("\n\n")
        .filter(|block| block.lines().any(|line| line.starts_with("event:")))
        .map(|block| {
            let field = |name: &str| {
                block.lines().find_map(|line| line.strip_prefix(name).map(|value| value.trim().to_owned()))
            };
            let data = field("data:").expect("data");
            ServerEvent {
                name: field("event:").unwrap(),
                id: field("id:"),
                data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
            }
        })
        .collect()
}

async fn an_operation_is_followed_to_its_end_and_a_reconnect_resumes_after_the_last_event_seen(backend: Backend) {
    let app = spawn_app(backend).await;
    let accepted = app.post_provision(&eks_body("followed")).await.json();
    let operation_id = accepted["operationId"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/operations/{operation_id}/events");

    let response = app.stream(&path).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let body = tokio::time::timeout(Duration::from_secs(30), axum::body::to_bytes(response.into_body(), usize::MAX))
        .await
        .expect("the stream ends after the final state")
        .unwrap();
    let events = parse(std::str::from_utf8(&body).unwrap());
    let statuses: Vec<&str> = events.iter().map(|event| event.data["status"].as_str().unwrap()).collect();
    assert_eq!(statuses.first(), Some(&"queued"), "the first event shows it as it was: {events:?}");
    assert_eq!(statuses.last(), Some(&"succeeded"), "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.data["id"].as_str(), last.data["done"].as_bool()),
        ("status", Some(operation_id.as_str()), Some(true))
    );
    assert!(events.iter().all(|event| event.id.is_some()), "every status event has an id: {events:?}");

    // Reconnecting after the first event gets the final one only; after the final one, nothing.
    let first_id = events[0].id.clone().unwrap();
    let resumed = app.request("GET", &path, None, &[("last-event-id", first_id.as_str())]).await;
    let resumed = parse(&resumed.text);
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!((resumed[0].id.as_ref(), resumed[0].data["status"].as_str()), (last.id.as_ref(), Some("succeeded")));
    let last_id = last.id.clone().unwrap();
    let nothing_new = app.request("GET", &path, None, &[("last-event-id", last_id.as_str())]).await;
    assert!(parse(&nothing_new.text).is_empty(), "{}", nothing_new.text);

    let refused = app.request("GET", &path, None, &[("last-event-id", "yesterday")]).await;
    assert_eq!((refused.status, refused.json()["field"].as_str()), (StatusCode::BAD_REQUEST, Some("Last-Event-ID")));
    let unknown = app.get(&format!("/api/v1/operations/{}/events", uuid::Uuid::now_v7())).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
}
