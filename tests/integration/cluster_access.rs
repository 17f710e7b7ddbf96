//! Sign-in through OIDC and the cluster's administrators through both APIs: requested, shown, changed whole by an
//! upgrade, and refused where the cloud cannot have them, naming the field and recording nothing.

use axum::http::StatusCode;
use serde_json::{Value, json};
use test_support::{Backend, eks_body, gke_body, on_both_databases, spawn_app};

const ACCESS: &str = "query($id: String!) { runtimeStatus(id: $id) { runtimeConfiguration { clusterConfig {
    kubernetes { oidc { issuerUrl clientId usernameClaim usernamePrefix requiredClaims { claim value } }
                 administrators { kind name } }
} } } }";

fn access() -> Value {
    json!({
        "oidc": [{ "issuerUrl": "https://login.example.com", "clientId": "kubeopera", "usernameClaim": "email",
                   "requiredClaims": [{ "claim": "hd", "value": "example.com" }] }],
        "administrators": [{ "kind": "User", "name": "oidc:alice@example.com" }, { "kind": "Group", "name": "oidc:platform" }]
    })
}

async fn sign_in_is_shown_and_changed_whole(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut body = eks_body("access-a");
    body["clusterConfig"]["kubernetes"] = access();
    let runtime_id = app.provisioned(&body).await;

    let rest = app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(rest["clusterConfig"]["kubernetes"], access(), "{rest}");
    let graphql = app.graphql(ACCESS, json!({ "id": runtime_id })).await;
    let shown = &graphql["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"]["kubernetes"];
    assert_eq!(shown["administrators"][1], json!({ "kind": "Group", "name": "oidc:platform" }), "{graphql}");
    // Left out, the prefix is the documented default; the view shows what was asked.
    assert_eq!(shown["oidc"][0]["usernamePrefix"], Value::Null, "{graphql}");

    let path = format!("/api/v1/runtimes/{runtime_id}");
    let only_bob = json!({ "administrators": [{ "kind": "User", "name": "oidc:bob@example.com" }] });
    let accepted = app.patch(&path, &json!({ "kubernetes": only_bob })).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    app.run_queued_operation(&[], provisioner::domain::OperationState::Succeeded).await;
    let rest = app.get(&path).await.json();
    assert_eq!(rest["clusterConfig"]["kubernetes"], only_bob, "replaced whole, the issuer gone too: {rest}");
}

async fn sign_in_the_cloud_cannot_have_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut gke = gke_body("access-gke");
    gke["clusterConfig"]["kubernetes"] = access();
    let answer = app.post_provision(&gke).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    assert_eq!(answer.json()["errors"][0]["field"], "clusterConfig.kubernetes.oidc", "{}", answer.text);

    let mut eks = eks_body("access-http");
    eks["clusterConfig"]["kubernetes"] =
        json!({ "oidc": [{ "issuerUrl": "http://login.example.com", "clientId": "k" }] });
    let answer = app.post_provision(&eks).await;
    assert_eq!(answer.json()["errors"][0]["field"], "clusterConfig.kubernetes.oidc[0].issuerUrl", "{}", answer.text);
    assert_eq!(app.get("/api/v1/runtimes").await.json()["runtimes"], json!([]), "nothing recorded");
}

on_both_databases!(sign_in_is_shown_and_changed_whole, sign_in_the_cloud_cannot_have_is_refused);
