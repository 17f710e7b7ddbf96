//! Every request limit, each with a request just over it: body size, time, concurrency, GraphQL depth,
//! complexity, batches and introspection.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use test_support::documents;
use test_support::subscriber::Subscriber;
use test_support::{Answer, Backend, TestApp, call, provision_body, provision_input, spawn_app_with};
use tokio::sync::mpsc;

async fn app_with(extra: &[(&str, &str)]) -> TestApp {
    spawn_app_with(Backend::Sqlite, extra, None).await
}

fn post(path: &str, body: Body) -> Request<Body> {
    Request::post(path).header("content-type", "application/json").body(body).unwrap()
}

async fn graphql(app: &TestApp, query: &str) -> Answer {
    call(&app.app.router, post("/graphql", Body::from(json!({ "query": query }).to_string()))).await
}

fn assert_error(answer: &Answer, status: StatusCode, code: &str) {
    assert_eq!(answer.status, status, "{}", answer.text);
    assert_eq!(answer.json()["code"], code, "{}", answer.text);
}

fn assert_graphql_refused(answer: &Answer, message: &str) {
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let errors = answer.json()["errors"].clone();
    assert!(errors[0]["message"].as_str().unwrap().contains(message), "{errors}");
}

/// A body whose first read tells `started` and then never ends, as a client that stops sending.
fn stalled_body(started: mpsc::UnboundedSender<()>) -> Body {
    Body::from_stream(futures::stream::once(async move {
        let _ = started.send(());
        std::future::pending::<Result<Bytes, std::io::Error>>().await
    }))
}

#[tokio::test]
async fn a_body_one_byte_over_the_limit_answers_413_on_every_route() {
    let app = app_with(&[("APP_MAX_REQUEST_BODY_BYTES", "1024")]).await;
    let query = json!({ "query": "{ runtimes { edges { cursor } } }" }).to_string();
    let padded = |length: usize| format!("{query}{}", " ".repeat(length - query.len()));

    let answer = call(&app.app.router, post("/graphql", Body::from(padded(1024)))).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let answer = call(&app.app.router, post("/graphql", Body::from(padded(1025)))).await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    let mut body = provision_body("big").to_string();
    body.push_str(&" ".repeat(1025 - body.len()));
    let answer = call(&app.app.router, post("/api/v1/provisions", Body::from(body))).await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
}

#[tokio::test]
async fn a_request_over_the_time_limit_answers_503() {
    let app = app_with(&[("APP_REQUEST_TIMEOUT", "300ms")]).await;
    let (started, _) = mpsc::unbounded_channel();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        call(&app.app.router, post("/api/v1/provisions", stalled_body(started))),
    )
    .await
    .expect("the service answers by itself");
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "timeout");
    assert_eq!(answer.headers["retry-after"], "5", "every 503 says when to try again");
    assert!(answer.json()["detail"].as_str().unwrap().contains("300ms"), "{}", answer.text);
}

#[tokio::test]
async fn a_request_over_the_concurrency_limit_answers_429_at_once() {
    let app = app_with(&[("APP_MAX_CONCURRENT_REQUESTS", "2")]).await;
    let (started, mut running) = mpsc::unbounded_channel();
    let in_flight: Vec<_> = (0..2)
        .map(|_| {
            let router = app.app.router.clone();
            let body = stalled_body(started.clone());
            tokio::spawn(async move { call(&router, post("/api/v1/provisions", body)).await })
        })
        .collect();
    for _ in 0..2 {
        running.recv().await.unwrap();
    }

    let limited = "/api/v1/provisions";
    let answer = tokio::time::timeout(Duration::from_secs(5), app.get(limited)).await.expect("answered at once");
    assert_error(&answer, StatusCode::TOO_MANY_REQUESTS, "overloaded");
    assert_eq!(answer.headers["retry-after"], "1", "overloaded: try again shortly");
    // The probes are outside the limit.
    for probe in ["/livez", "/readyz", "/healthz"] {
        assert_eq!(app.get(probe).await.status, StatusCode::OK, "{probe}");
    }

    for request in in_flight {
        request.abort();
        let _ = request.await;
    }
    assert_eq!(app.get(limited).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_query_one_level_too_deep_answers_400() {
    let app = app_with(&[("APP_GRAPHQL_MAX_DEPTH", "3")]).await;
    let answer = graphql(&app, "{ runtimes { edges { cursor } } }").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let answer = graphql(&app, "{ runtimes { edges { node { id } } } }").await;
    assert_graphql_refused(&answer, "nested too deep");
}

#[tokio::test]
async fn a_query_one_field_too_complex_answers_400() {
    let app = app_with(&[("APP_GRAPHQL_MAX_COMPLEXITY", "4")]).await;
    let answer = graphql(&app, "{ runtimes(first: 1) { edges { node { id } } } }").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let answer = graphql(&app, "{ runtimes(first: 1) { edges { node { id name } } } }").await;
    assert_graphql_refused(&answer, "too complex");
}

/// A page weighs its size: 35 aliases of 100 runtimes with every operation's logs (archives to decompress) are
/// refused with a clear error, while an ordinary full page is served.
#[tokio::test]
async fn large_pages_of_expensive_fields_are_refused_by_their_cost() {
    let app = app_with(&[]).await;
    let page =
        "runtimes(first: 100) { edges { node { operations { edges { node { logs { log } stages { stage } } } } } } }";
    let aliases: Vec<String> = (0..35).map(|index| format!("a{index}: {page}")).collect();
    let answer = graphql(&app, &format!("{{ {} }}", aliases.join(" "))).await;
    assert_graphql_refused(&answer, "too complex");
    let ordinary = "{ runtimes(first: 100) { edges { cursor node { id name status { lastOperationStatus { id state \
                    message } } } } pageInfo { hasNextPage } } }";
    let answer = graphql(&app, ordinary).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert!(answer.json()["errors"].is_null(), "{}", answer.text);
}

/// Kept logs are small in the database and large decompressed: one request reads at most
/// `APP_MAX_LOG_BYTES_PER_REQUEST` of them, all its fields together, and an archive that inflates past that is
/// not decompressed further.
#[tokio::test]
async fn a_request_reads_logs_within_its_budget() {
    let app = app_with(&[("APP_MAX_LOG_BYTES_PER_REQUEST", "1000000")]).await;
    let store = provisioner::store::Store::connect(&app.database.url, 2, Duration::from_secs(5)).await.unwrap();
    let keep = |name: &'static str, bytes: usize| {
        let (app, store) = (&app, &store);
        async move {
            let operation_id =
                app.post_provision(&provision_body(name)).await.json()["operationId"].as_str().unwrap().to_owned();
            let log = provisioner::domain::run_log::KeptLog {
                container: "terraform-runner".into(),
                text: "Still creating... [10s elapsed]\n".repeat(bytes / 32),
                printed_bytes: bytes,
            };
            store.archive_run_logs(operation_id.parse().unwrap(), &[log]).await.unwrap();
            operation_id
        }
    };
    let within = keep("budget-a", 600_000).await;
    let inflating = keep("budget-b", 50_000_000).await;

    let one = app.get(&format!("/api/v1/operations/{within}/logs")).await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.text.len(), "==> terraform-runner <==\n".len() + 600_000);
    assert_error(
        &app.get(&format!("/api/v1/operations/{inflating}/logs")).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "over_budget",
    );

    // Two fields of 600 kB each: the first is served, the second is over what the request has left.
    let field = |alias: &str| format!("{alias}: runtimeOperationStatus(id: \"{within}\") {{ logs {{ log }} }}");
    let answer = graphql(&app, &format!("{{ {} {} }}", field("first"), field("second"))).await;
    let response = answer.json();
    let served =
        [&response["data"]["first"], &response["data"]["second"]].iter().filter(|field| !field.is_null()).count();
    assert_eq!(served, 1, "{}", &answer.text[..300.min(answer.text.len())]);
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "over_budget", "{}", response["errors"]);
    assert_eq!(response["errors"][0]["extensions"]["code"], "BAD_REQUEST", "{}", response["errors"]);
}

#[tokio::test]
async fn a_batch_answers_400() {
    let app = app_with(&[]).await;
    let batch = json!([{ "query": "{ runtimes { edges { cursor } } }" }]).to_string();
    let answer = call(&app.app.router, post("/graphql", Body::from(batch))).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "batch_not_supported");
}

#[tokio::test]
async fn introspection_is_off_unless_configured_over_http_and_websockets() {
    let introspection = "{ __schema { queryType { name } } }";
    let app = app_with(&[]).await;
    let answer = graphql(&app, introspection).await;
    assert_graphql_refused(&answer, "introspection is disabled");
    let in_a_fragment = "query { ...Types } fragment Types on Query { __type(name: \"Query\") { name } }";
    assert_graphql_refused(&graphql(&app, in_a_fragment).await, "introspection is disabled");
    let mut socket = Subscriber::connect(&app).await;
    socket.send(json!({ "type": "connection_init", "payload": {} })).await;
    assert_eq!(socket.next().await["type"], "connection_ack");
    socket.send(json!({ "id": "1", "type": "subscribe", "payload": { "query": introspection } })).await;
    let refused = socket.next().await;
    let message = refused["payload"][0]["message"].as_str().or(refused["payload"]["errors"][0]["message"].as_str());
    assert!(message.is_some_and(|message| message.contains("introspection is disabled")), "{refused}");

    let app = app_with(&[("APP_GRAPHQL_INTROSPECTION", "true")]).await;
    let answer = graphql(&app, introspection).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.json()["data"]["__schema"]["queryType"]["name"], Value::from("Query"));
}

/// Methods a caller invents are counted as `other`: 300 of them add one series to the request metrics, not 300.
#[tokio::test]
async fn invented_methods_do_not_add_metric_series() {
    let app = app_with(&[]).await;
    let series = |text: &str| text.lines().filter(|line| line.starts_with("provisioner_http_requests_total{")).count();
    let scrape =
        || async { call(&app.app.metrics_router, Request::get("/metrics").body(Body::empty()).unwrap()).await };
    call(&app.app.router, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    let before = series(&scrape().await.text);
    for index in 1..=300 {
        let request = Request::builder().method(format!("M{index}").as_str()).uri("/healthz").body(Body::empty());
        call(&app.app.router, request.unwrap()).await;
    }
    let metrics = scrape().await.text;
    assert_eq!(series(&metrics), before + 1, "{metrics}");
    assert!(metrics.contains("method=\"other\"") && !metrics.contains("method=\"M1\""), "{metrics}");
}

/// With authentication off (`make run`), a web page of another site cannot use the API through a visitor's
/// browser: a `text/plain` GraphQL mutation (a "simple" request, sent without a preflight) is refused, as are a
/// state-changing request and a WebSocket upgrade from another origin; every answer forbids sniffing and caching.
#[tokio::test]
async fn a_page_of_another_site_cannot_use_the_api_through_a_browser() {
    let app = app_with(&[]).await;
    let mutation = json!({ "query": "mutation { deprovisionRuntime(id: \"00000000-0000-0000-0000-000000000000\") }" });
    let plain = Request::post("/graphql").header("content-type", "text/plain").body(Body::from(mutation.to_string()));
    assert_error(
        &call(&app.app.router, plain.unwrap()).await,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );

    let foreign = |request: axum::http::request::Builder| {
        request.header("host", "127.0.0.1:3000").header("origin", "https://evil.example")
    };
    let body = Body::from(provision_body("cross-site").to_string());
    let post = foreign(Request::post("/api/v1/provisions").header("content-type", "application/json")).body(body);
    assert_error(&call(&app.app.router, post.unwrap()).await, StatusCode::FORBIDDEN, "forbidden");
    let upgrade = foreign(Request::get("/graphql"))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("sec-websocket-protocol", "graphql-transport-ws")
        .body(Body::empty());
    assert_error(&call(&app.app.router, upgrade.unwrap()).await, StatusCode::FORBIDDEN, "forbidden");

    // The same page's own origin, and clients without a browser, are served.
    let same = Request::post("/api/v1/provisions")
        .header("content-type", "application/json")
        .header("host", "127.0.0.1:3000")
        .header("origin", "http://127.0.0.1:3000")
        .body(Body::from(provision_body("same-site").to_string()));
    let accepted = call(&app.app.router, same.unwrap()).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    for answer in [accepted, app.get("/api/v1/provisions").await, app.get("/livez").await] {
        assert_eq!(answer.headers["x-content-type-options"], "nosniff");
        assert_eq!(answer.headers["cache-control"], "no-store");
    }
}

/// A WebSocket must say `connection_init` within the init timeout (else it is closed with 4408, as
/// graphql-transport-ws says), may not send a message larger than a request body before (or after) it, and once
/// let in outlives the timeout.
#[tokio::test]
async fn a_websocket_is_held_to_its_init_timeout_and_message_size() {
    let app = app_with(&[("APP_WEBSOCKET_INIT_TIMEOUT", "1s"), ("APP_MAX_REQUEST_BODY_BYTES", "65536")]).await;
    let mut idle = Subscriber::connect(&app).await;
    let closed = idle.next().await;
    assert_eq!(closed["code"], 4408, "{closed}");
    assert_eq!(closed["close"], "Connection initialisation timeout", "{closed}");

    let mut flooding = Subscriber::connect(&app).await;
    flooding.send_bytes(1024 * 1024).await;
    assert!(flooding.ended_within(Duration::from_secs(5)).await, "a 1 MiB message before init is refused");

    let operation = app.post_provision(&provision_body("socket")).await.json()["operationId"].clone();
    let query = "subscription($id: String!) { operationEvents(id: $id) { status { state } } }";
    let mut subscriber = Subscriber::subscribed(&app, json!({}), query, json!({ "id": operation })).await;
    let first = subscriber.next().await;
    assert_eq!(first["payload"]["data"]["operationEvents"]["status"]["state"], "Pending", "{first}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    subscriber.send(json!({ "type": "ping" })).await;
    let pong = subscriber.next().await;
    assert_eq!(pong["type"], "pong", "still open after the init timeout: {pong}");
}

/// Followed logs and subscriptions each hold a connection and a follower: one caller holds at most
/// `APP_MAX_STREAMS_PER_CALLER` of them (everyone together `APP_MAX_STREAMS`); one more is refused, 429 with
/// `Retry-After` over REST, and an ended one frees its place.
#[tokio::test]
async fn open_streams_are_capped_per_caller_and_freed_when_closed() {
    let app = app_with(&[("APP_MAX_STREAMS_PER_CALLER", "2")]).await;
    let operation = app.post_provision(&provision_body("streams")).await.json()["operationId"].clone();
    let query = "subscription($id: String!) { operationEvents(id: $id) { status { state } } }";
    let subscribe = |id: &str| json!({ "id": id, "type": "subscribe", "payload": { "query": query, "variables": { "id": operation } } });
    let mut socket = Subscriber::subscribed(&app, json!({}), query, json!({ "id": operation })).await;
    let first = socket.next().await;
    assert_eq!(first["payload"]["data"]["operationEvents"]["status"]["state"], "Pending", "{first}");
    socket.send(subscribe("2")).await;
    let second = socket.next().await;
    assert_eq!((second["id"].as_str(), second["type"].as_str()), (Some("2"), Some("next")), "{second}");
    socket.send(subscribe("3")).await;
    let refused = socket.next().await;
    assert_eq!(refused["payload"]["errors"][0]["extensions"]["error_reason"], "too_many_streams", "{refused}");
    let followed = app.get(&format!("/api/v1/operations/{}/logs?follow=true", operation.as_str().unwrap())).await;
    assert_error(&followed, StatusCode::TOO_MANY_REQUESTS, "too_many_streams");
    assert_eq!(followed.headers["retry-after"], "10");

    socket.send(json!({ "id": "1", "type": "complete" })).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for attempt in 4.. {
        socket.send(subscribe(&attempt.to_string())).await;
        let answer = socket.next().await;
        if answer["payload"]["data"]["operationEvents"]["status"]["state"] == "Pending" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "an ended subscription never freed its place: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Open WebSockets are counted too, to the same limits: one more is refused at its `connection_init`, and a
/// closed one frees its place.
#[tokio::test]
async fn open_websockets_are_capped_per_caller() {
    let app = app_with(&[("APP_MAX_STREAMS_PER_CALLER", "2")]).await;
    let init = || async {
        let mut socket = Subscriber::connect(&app).await;
        socket.send(json!({ "type": "connection_init", "payload": {} })).await;
        let answer = socket.next().await;
        (socket, answer)
    };
    let (first, answer) = init().await;
    assert_eq!(answer["type"], "connection_ack", "{answer}");
    let (_second, answer) = init().await;
    assert_eq!(answer["type"], "connection_ack", "{answer}");
    let (_third, refused) = init().await;
    assert!(refused["close"].as_str().is_some_and(|reason| reason.contains("open WebSockets")), "{refused}");

    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_again, answer) = init().await;
        if answer["type"] == "connection_ack" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "a closed socket never freed its place: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Queries and mutations sent over a WebSocket are held to `APP_REQUEST_TIMEOUT` too, as over HTTP.
#[tokio::test]
async fn an_operation_over_a_websocket_is_held_to_the_request_timeout() {
    let app = app_with(&[("APP_REQUEST_TIMEOUT", "500ms")]).await;
    app.auth.set_delay(Duration::from_secs(3));
    let mut socket = Subscriber::connect(&app).await;
    socket.send(json!({ "type": "connection_init", "payload": {} })).await;
    assert_eq!(socket.next().await["type"], "connection_ack");
    let mutation = documents::PROVISION;
    let payload = json!({ "query": mutation, "variables": { "config": provision_input("socket-slow") } });
    let started = std::time::Instant::now();
    socket.send(json!({ "id": "1", "type": "subscribe", "payload": payload })).await;
    let answer = socket.next().await;
    assert!(started.elapsed() < Duration::from_secs(2), "answered after {:?}", started.elapsed());
    assert_eq!(answer["payload"]["errors"][0]["extensions"]["code"], "TIMEOUT", "{answer}");
    assert!(answer["payload"]["errors"][0]["message"].as_str().unwrap().contains("500ms"), "{answer}");
}

/// Operations over a WebSocket take a permit of `APP_MAX_CONCURRENT_REQUESTS` as HTTP requests do: with every
/// permit held, one is refused at once, and served once a permit is free.
#[tokio::test]
async fn an_operation_over_a_websocket_takes_a_request_slot() {
    let app = app_with(&[("APP_MAX_CONCURRENT_REQUESTS", "1")]).await;
    let mut socket = Subscriber::connect(&app).await;
    socket.send(json!({ "type": "connection_init", "payload": {} })).await;
    assert_eq!(socket.next().await["type"], "connection_ack");
    let (started, mut running) = mpsc::unbounded_channel();
    let router = app.app.router.clone();
    let held = tokio::spawn(async move { call(&router, post("/api/v1/provisions", stalled_body(started))).await });
    running.recv().await.unwrap();
    let query = json!({ "query": "{ runtimes { edges { cursor } } }" });
    socket.send(json!({ "id": "1", "type": "subscribe", "payload": query })).await;
    let refused = socket.next().await;
    assert_eq!(refused["payload"]["errors"][0]["extensions"]["code"], "OVERLOADED", "{refused}");

    held.abort();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for attempt in 2.. {
        socket.send(json!({ "id": attempt.to_string(), "type": "subscribe", "payload": query })).await;
        let answer = socket.next().await;
        if answer["payload"]["data"]["runtimes"].is_object() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the permit never came back: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
