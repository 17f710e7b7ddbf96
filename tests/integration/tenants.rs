//! A tenant is a boundary on every path: names are unique within a tenant only (a 409 tells nothing of another
//! tenant), a tenant may be required of every request, a WebSocket's tenant is its upgrade request's, and stream
//! and socket caps count per caller and tenant. Confinement by RBAC (the tenant as the SubjectAccessReview's
//! namespace) is in `authn`.

use axum::http::StatusCode;
use serde_json::{Value, json};
use test_support::auth_service::aws_credential;
use test_support::subscriber::Subscriber;
use test_support::{Backend, TestApp, on_both_databases, provision_body, spawn_app, spawn_app_with};

/// A provisioning of `name` for `tenant` (none: `[]`), with that tenant's own credential.
async fn provision(app: &TestApp, name: &str, tenant: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut body = provision_body(name);
    if let [(_, tenant)] = tenant {
        app.auth.add_tenant_credential(tenant, &format!("cred-{tenant}"), aws_credential());
        body["clusterConfig"]["credentialId"] = json!(format!("cred-{tenant}"));
    }
    let answer = app.request("POST", "/api/v1/provisions", Some(&body), tenant).await;
    (answer.status, answer.json())
}

async fn names_are_unique_within_a_tenant_only(backend: Backend) {
    let app = spawn_app(backend).await;
    let (a, b) = ([("Tenant", "tenant-a")], [("Tenant", "tenant-b")]);
    assert_eq!(provision(&app, "shop", &a).await.0, StatusCode::ACCEPTED);
    let (status, answer) = provision(&app, "shop", &b).await;
    assert_eq!(status, StatusCode::ACCEPTED, "another tenant's name is free: {answer}");
    assert_eq!(provision(&app, "shop", &[]).await.0, StatusCode::ACCEPTED, "so is it for no tenant");
    for tenant in [&a[..], &b[..], &[]] {
        let (status, answer) = provision(&app, "shop", tenant).await;
        assert_eq!((status, &answer["code"]), (StatusCode::CONFLICT, &json!("name_taken")), "{tenant:?}: {answer}");
    }
}

on_both_databases!(names_are_unique_within_a_tenant_only);

/// With `APP_TENANT_REQUIRED`, every request on runtimes names a tenant, over REST, GraphQL and a WebSocket; the
/// API's documents do not need one.
#[tokio::test]
async fn a_required_tenant_is_named_by_every_request_on_runtimes() {
    let app = spawn_app_with(Backend::Sqlite, &[("APP_TENANT_REQUIRED", "true")], None).await;
    let refused = app.request("GET", "/api/v1/runtimes", None, &[]).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(
        (&refused.json()["field"], &refused.json()["errors"][0]["reason"]),
        (&json!("Tenant"), &json!("required"))
    );
    let (status, answer) = provision(&app, "shop", &[]).await;
    assert_eq!((status, &answer["field"]), (StatusCode::BAD_REQUEST, &json!("Tenant")), "{answer}");
    let body = json!({ "query": "{ runtimes { edges { node { id } } } }" });
    assert_eq!(app.request("POST", "/graphql", Some(&body), &[]).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.request("GET", "/api/v1/openapi.json", None, &[]).await.status, StatusCode::OK);

    let (status, answer) = provision(&app, "shop", &[("Tenant", "tenant-a")]).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let listed = app.request("GET", "/api/v1/runtimes", None, &[("Tenant", "tenant-a")]).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);

    let mut socket = Subscriber::connect(&app).await;
    socket.send(json!({ "type": "connection_init", "payload": {} })).await;
    let refused = socket.next().await;
    assert!(refused["close"].as_str().is_some_and(|reason| reason.contains("Tenant is required")), "{refused}");
    let mut socket = Subscriber::connect(&app).await;
    socket.send(json!({ "type": "connection_init", "payload": { "Tenant": "tenant-a" } })).await;
    assert_eq!(socket.next().await["type"], "connection_ack");
}

/// A WebSocket is for the tenant its upgrade request names (a gateway sets it): a `connection_init` payload
/// naming another is refused, and one naming none gets the connection's, so its queries see that tenant only.
#[tokio::test]
async fn a_websocket_is_for_the_tenant_its_upgrade_request_names() {
    let app = spawn_app(Backend::Sqlite).await;
    let (status, a) = provision(&app, "shop-a", &[("Tenant", "tenant-a")]).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{a}");
    assert_eq!(provision(&app, "shop-b", &[("Tenant", "tenant-b")]).await.0, StatusCode::ACCEPTED);

    let mut swapped = Subscriber::connect_with(&app, &[("Tenant", "tenant-a")]).await;
    swapped.send(json!({ "type": "connection_init", "payload": { "Tenant": "tenant-b" } })).await;
    let refused = swapped.next().await;
    assert!(
        refused["close"].as_str().is_some_and(|reason| reason.contains("the connection is for tenant-a")),
        "{refused}"
    );

    let mut socket = Subscriber::connect_with(&app, &[("Tenant", "tenant-a")]).await;
    socket.send(json!({ "type": "connection_init", "payload": {} })).await;
    assert_eq!(socket.next().await["type"], "connection_ack");
    let query = json!({ "query": "{ runtimes { edges { node { id } } } }" });
    socket.send(json!({ "id": "1", "type": "subscribe", "payload": query })).await;
    let answer = socket.next().await;
    assert_eq!(answer["payload"]["data"]["runtimes"]["edges"], json!([{ "node": { "id": a["id"] } }]), "{answer}");

    let malformed = Subscriber::upgrade_refused(&app, &[("Tenant", "a/../b")]).await;
    assert_eq!(malformed, StatusCode::BAD_REQUEST);
}

/// One caller behind a shared gateway identity, acting for two tenants, has a socket cap per tenant: one tenant
/// holding its sockets leaves the other's free.
#[tokio::test]
async fn socket_caps_count_per_caller_and_tenant() {
    let app = spawn_app_with(Backend::Sqlite, &[("APP_MAX_STREAMS_PER_CALLER", "1")], None).await;
    let init = async |tenant: &str| {
        let mut socket = Subscriber::connect_with(&app, &[("Tenant", tenant)]).await;
        socket.send(json!({ "type": "connection_init", "payload": {} })).await;
        let answer = socket.next().await;
        (socket, answer)
    };
    let (_held, answer) = init("tenant-a").await;
    assert_eq!(answer["type"], "connection_ack", "{answer}");
    let (_refused, answer) = init("tenant-a").await;
    assert!(answer["close"].as_str().is_some_and(|reason| reason.contains("open WebSockets")), "{answer}");
    let (_other, answer) = init("tenant-b").await;
    assert_eq!(answer["type"], "connection_ack", "another tenant's cap is its own: {answer}");
}
