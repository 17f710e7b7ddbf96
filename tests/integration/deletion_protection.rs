//! Deletions in two steps, on both APIs and databases: a protected runtime (by its request, or by its environment
//! in `APP_PROTECTED_ENVIRONMENTS`) refuses deprovisionings until its protection is turned off, and with
//! `APP_REQUIRE_DELETE_CONFIRMATION` a deprovisioning names the runtime.

use std::time::Duration;

use axum::http::StatusCode;
use provisioner::api::audit::AuditEvent;
use provisioner::domain::{Operation, OperationType, ProviderVersion, Topology};
use provisioner::store::{self, Store};
use serde_json::{Value, json};
use test_support::{Backend, TestApp, documents, on_both_databases, provision_body, spawn_app_with};

const PROTECT: &str =
    "mutation($id: String!, $on: Boolean!) { setDeletionProtection(id: $id, enabled: $on) { id deletionProtection } }";
const DEPROVISION_CONFIRMED: &str =
    "mutation($id: String!, $confirm: String) { deprovisionRuntime(id: $id, confirm: $confirm) }";

/// A runtime whose provisioning succeeded.
async fn created(app: &TestApp, body: &Value) -> String {
    app.provisioned(body).await
}

fn protection(app_runtime: &Value) -> &Value {
    &app_runtime["deletionProtection"]
}

async fn a_protected_runtime_refuses_deprovisioning_until_its_protection_is_off(backend: Backend) {
    let app = spawn_app_with(backend, &[("APP_PROTECTED_ENVIRONMENTS", "staging, dev")], None).await;
    let id = created(&app, &provision_body("protected-a")).await;
    let resource = format!("/api/v1/runtimes/{id}");
    assert_eq!(protection(&app.get(&resource).await.json()), &json!(true), "dev is a protected environment");
    let mut unprotected = provision_body("protected-b");
    unprotected["runtimeInput"]["deletionProtection"] = json!(false);
    let other = created(&app, &unprotected).await;
    assert_eq!(protection(&app.get(&format!("/api/v1/runtimes/{other}")).await.json()), &json!(false));

    for path in [resource.clone(), format!("/api/v1/provisions/{id}")] {
        let refused = app.delete(&path).await;
        assert_eq!(
            (refused.status, refused.json()["code"].clone()),
            (StatusCode::CONFLICT, json!("deletion_protected"))
        );
        assert!(refused.json()["detail"].as_str().unwrap().contains("deletionProtection"), "{}", refused.text);
    }
    let response = app.graphql(documents::DEPROVISION, json!({ "id": id })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "deletion_protected", "{response}");

    // Changed alone, never with an upgrade; answered with the runtime, audited with the caller.
    let mixed = app.patch(&resource, &json!({ "deletionProtection": false, "kubernetesVersion": "1.35" })).await;
    assert_eq!((mixed.status, mixed.json()["field"].clone()), (StatusCode::BAD_REQUEST, json!("deletionProtection")));
    let off = app.patch(&resource, &json!({ "deletionProtection": false })).await;
    assert_eq!((off.status, protection(&off.json()).clone()), (StatusCode::OK, json!(false)), "{}", off.text);
    let events: Vec<AuditEvent> = app.audit.entries().iter().map(|entry| entry.event).collect();
    assert!(events.contains(&AuditEvent::DeletionProtectionOff), "{events:?}");
    let on = app.graphql(PROTECT, json!({ "id": id, "on": true })).await;
    assert_eq!(on["data"]["setDeletionProtection"], json!({ "id": id, "deletionProtection": true }), "{on}");
    assert_eq!(app.delete(&resource).await.status, StatusCode::CONFLICT);
    let off = app.graphql(PROTECT, json!({ "id": id, "on": false })).await;
    assert_eq!(off["data"]["setDeletionProtection"]["deletionProtection"], false, "{off}");

    // Unprotected, it is deprovisioned; a failed deprovisioning is not retried once the protection is back on.
    let accepted = app.delete(&resource).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let deprovisioning = accepted.json()["id"].as_str().unwrap().to_owned();
    app.fail_operation(&deprovisioning, "timeout").await;
    assert_eq!(app.patch(&resource, &json!({ "deletionProtection": true })).await.status, StatusCode::OK);
    let retry = app.request("POST", &format!("/api/v1/operations/{deprovisioning}/retry"), None, &[]).await;
    assert_eq!((retry.status, retry.json()["code"].clone()), (StatusCode::CONFLICT, json!("deletion_protected")));

    // The statement that queues a deprovisioning checks the protection itself: one turned on after the service
    // looked still stops it.
    let store = Store::connect(&app.database.url, 2, Duration::from_secs(5)).await.unwrap();
    let runtime_id = uuid::Uuid::parse_str(&id).unwrap();
    let provider = ProviderVersion::pinned(Topology::VanillaKubeadm.cloud());
    let operation = Operation::queued(runtime_id, OperationType::Deprovision, provider, chrono::Utc::now());
    let queued = store.insert_keyed_operation(&operation, None).await;
    assert!(matches!(queued, Err(store::Error::DeletionProtected(_))), "{queued:?}");
}

on_both_databases!(a_protected_runtime_refuses_deprovisioning_until_its_protection_is_off);

async fn a_deprovisioning_names_the_runtime_when_confirmations_are_required(backend: Backend) {
    let app = spawn_app_with(backend, &[("APP_REQUIRE_DELETE_CONFIRMATION", "true")], None).await;
    let id = created(&app, &provision_body("confirm-a")).await;
    let path = format!("/api/v1/runtimes/{id}");
    let missing = app.delete(&path).await.json();
    assert_eq!(
        (&missing["field"], &missing["errors"][0]["reason"]),
        (&json!("confirm"), &json!("required")),
        "{missing}"
    );
    let wrong = app.delete(&format!("{path}?confirm=confirm-b")).await.json();
    assert_eq!((&wrong["field"], &wrong["errors"][0]["reason"]), (&json!("confirm"), &json!("conflict")), "{wrong}");
    let response = app.graphql(documents::DEPROVISION, json!({ "id": id })).await;
    assert_eq!(response["errors"][0]["extensions"]["errors"][0]["field"], "confirm", "{response}");
    let accepted = app.delete(&format!("/api/v1/provisions/{id}?confirm=confirm-a")).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);

    let other = created(&app, &provision_body("confirm-b")).await;
    let response = app.graphql(DEPROVISION_CONFIRMED, json!({ "id": other, "confirm": "confirm-b" })).await;
    assert!(response["data"]["deprovisionRuntime"].is_string(), "{response}");
}

on_both_databases!(a_deprovisioning_names_the_runtime_when_confirmations_are_required);

/// By default (Kyma's clients never confirm), `deprovisionRuntime(id)` works; a confirmation that is sent is
/// still checked.
async fn without_required_confirmations_kymas_deprovisioning_keeps_working(backend: Backend) {
    let app = spawn_app_with(backend, &[], None).await;
    let id = created(&app, &provision_body("kyma-a")).await;
    assert_eq!(protection(&app.get(&format!("/api/v1/runtimes/{id}")).await.json()), &json!(false));
    let wrong = app.graphql(DEPROVISION_CONFIRMED, json!({ "id": id, "confirm": "kyma-b" })).await;
    assert_eq!(wrong["errors"][0]["extensions"]["errors"][0]["reason"], "conflict", "{wrong}");
    let response = app.graphql(documents::DEPROVISION, json!({ "id": id })).await;
    assert!(response["data"]["deprovisionRuntime"].is_string(), "{response}");
}

on_both_databases!(without_required_confirmations_kymas_deprovisioning_keeps_working);
