//! A runtime no run can destroy any more, because the cloud refused its credential during its deprovisioning, is
//! deprovisioned by force, through the real worker and Kubernetes: confirmed by name, refused while a run could
//! still destroy it, marked deleted without a Job, and keeping what its last apply recorded as what may remain.

use std::time::Duration;

use axum::http::StatusCode;
use provisioner::api::audit::AuditEvent;
use runner_contract::failure::{CloudFailure, CloudFailureClass, EXIT_CLOUD_FAILURE, RunFailure};
use serde_json::json;
use test_support::engine::{Engine, RUNNER_RESOURCES};
use test_support::{Backend, on_both_databases, provision_body};

const WAIT: Duration = Duration::from_secs(60);
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";
const FORCE: &str =
    "mutation($id: String!, $confirm: String) { deprovisionRuntime(id: $id, confirm: $confirm, force: true) }";

async fn a_runtime_whose_credential_was_revoked_is_deprovisioned_by_force_keeping_what_may_remain(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let runtime_id = engine.provisioned(&provision_body("revoked"), KUBECONFIG).await;
    let outputs = format!("provision-{runtime_id}-outputs");

    // A run can still destroy it: force is refused, on both APIs.
    let forced_path = format!("/api/v1/runtimes/{runtime_id}?confirm=revoked&force=true");
    let refused = engine.app.delete(&forced_path).await;
    assert_eq!((refused.status, refused.json()["code"].clone()), (StatusCode::CONFLICT, json!("force_not_allowed")));
    let response = engine.app.graphql(FORCE, json!({ "id": runtime_id, "confirm": "revoked" })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "force_not_allowed", "{response}");

    // The credential was revoked: the deprovisioning's run is refused by the cloud.
    let deprovisioning = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await.json();
    let deprovisioning = deprovisioning["operationId"].as_str().expect("an operation id").to_owned();
    engine.wait_for_stage(&deprovisioning, "WaitForJob", WAIT).await;
    let failure = RunFailure {
        message: "`tofu destroy` failed (exit status: 1): Error: api error UnauthorizedOperation: You are not \
                  authorized to perform this operation. (at aws_instance.worker)"
            .to_owned(),
        cloud: CloudFailure { class: CloudFailureClass::Unauthorized, address: Some("aws_instance.worker".to_owned()) },
    };
    let job = format!("deprovision-{runtime_id}");
    engine.runner_exits(&job, EXIT_CLOUD_FAILURE, &serde_json::to_string(&failure).unwrap()).await;
    engine.wait_for_stage(&deprovisioning, "Done", WAIT).await;
    assert_eq!(engine.status(&runtime_id).await["lastError"]["reason"], "unauthorized");

    // Forcing names the runtime.
    let unconfirmed = engine.app.delete(&format!("/api/v1/runtimes/{runtime_id}?force=true")).await;
    let unconfirmed = (unconfirmed.status, unconfirmed.json());
    assert_eq!(
        (unconfirmed.0, &unconfirmed.1["field"]),
        (StatusCode::BAD_REQUEST, &json!("confirm")),
        "{unconfirmed:?}"
    );

    let forced = engine.app.delete(&forced_path).await;
    assert_eq!(forced.status, StatusCode::OK, "{}", forced.text);
    let forced = forced.json();
    let expected = json!({ "remaining": RUNNER_RESOURCES, "inventoryRecorded": true });
    assert_eq!(
        (&forced["status"], &forced["operation"], &forced["forced"]),
        (&json!("succeeded"), &json!("deprovision"), &expected),
        "{forced}"
    );
    let message = forced["message"].as_str().unwrap();
    assert!(message.contains(&format!("kubeopera.io/runtime-id={runtime_id}")), "{message}");
    let forced_id = forced["id"].as_str().unwrap().to_owned();
    let query =
        "query($id: String!) { runtimeOperationStatus(id: $id) { state forced { remaining inventoryRecorded } } }";
    let response = engine.app.graphql(query, json!({ "id": forced_id })).await;
    assert_eq!(
        response["data"]["runtimeOperationStatus"],
        json!({ "state": "Succeeded", "forced": expected }),
        "{response}"
    );

    // The runtime is gone without a Job, and so is the kubeconfig of the cluster it no longer serves.
    let status = engine.status(&runtime_id).await;
    assert_eq!(
        (&status["operation"], &status["status"], &status["operationId"]),
        (&json!("deprovision"), &json!("succeeded"), &json!(forced_id)),
        "{status}"
    );
    assert!(engine.secret(&outputs).await.is_none(), "the outputs Secret is removed");
    assert_eq!(
        engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await.status,
        StatusCode::CONFLICT
    );
    let events: Vec<AuditEvent> = engine.app.audit.entries().iter().map(|entry| entry.event).collect();
    assert_eq!(events.iter().filter(|event| **event == AuditEvent::DeprovisioningForced).count(), 1, "{events:?}");

    // A repeated request, forced or not, gets the forced deprovisioning.
    let repeated = engine.app.delete(&forced_path).await;
    assert_eq!((repeated.status, repeated.json()["id"].clone()), (StatusCode::OK, json!(forced_id)));
    let response = engine.app.graphql(FORCE, json!({ "id": runtime_id, "confirm": "revoked" })).await;
    assert_eq!(response["data"]["deprovisionRuntime"], json!(forced_id), "{response}");
    process.stop().await;
}

on_both_databases!(a_runtime_whose_credential_was_revoked_is_deprovisioned_by_force_keeping_what_may_remain);
