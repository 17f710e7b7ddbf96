//! Retries are safe on every change (#28 item 3): a repeated DELETE, hibernate, wake or cancel whose change is
//! already queued or running is answered 202 with that same operation, and one whose target is already reached
//! 200 with the last operation, through both REST paths and GraphQL, on both databases; nothing is queued twice,
//! and a different change while one runs is still refused.

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use serde_json::{Value, json};
use test_support::{Backend, TestApp, eks_body, on_both_databases, spawn_app};

on_both_databases!(
    a_repeated_change_is_answered_with_its_operation_and_never_queued_twice,
    a_change_retried_with_its_idempotency_key_gets_the_first_answer,
);

/// `(status, operation id, operation type)` of a change's answer, in either REST shape.
async fn ask(app: &TestApp, method: &str, path: &str) -> (StatusCode, String, String) {
    let answer = app.request(method, path, None, &[]).await;
    let body = answer.json();
    let id = body.get("operationId").or_else(|| body.get("id")).and_then(Value::as_str);
    let id = id.unwrap_or_else(|| panic!("{method} {path}: {}", answer.text)).to_owned();
    (answer.status, id, body["operation"].as_str().unwrap_or_default().to_owned())
}

async fn operations_of(app: &TestApp, runtime_id: &str) -> usize {
    let page = app.get(&format!("/api/v1/provisions/{runtime_id}/operations?first=100")).await.json();
    page["operations"].as_array().expect("operations").len()
}

async fn a_repeated_change_is_answered_with_its_operation_and_never_queued_twice(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.provisioned(&eks_body("retried")).await;
    let seed = format!("/api/v1/provisions/{id}");
    let resource = format!("/api/v1/runtimes/{id}");

    for (change, ends_as, operation_type) in [("hibernate", "hibernated", "hibernate"), ("wake", "awake", "wake_up")] {
        let (status, first, kind) = ask(&app, "POST", &format!("{seed}/{change}")).await;
        assert_eq!((status, kind.as_str()), (StatusCode::ACCEPTED, operation_type));
        let before = operations_of(&app, &id).await;
        for path in [format!("{seed}/{change}"), format!("{resource}/{change}")] {
            let (status, again, _) = ask(&app, "POST", &path).await;
            assert_eq!((status, &again), (StatusCode::ACCEPTED, &first), "a repeated {change} while it is queued");
        }
        // A different change while this one is queued is still refused.
        let upgrade = app.patch(&seed, &json!({"workerPool": {"maxSize": 5}})).await;
        assert_eq!(upgrade.json()["code"], "operation_in_progress", "{}", upgrade.text);
        assert_eq!(operations_of(&app, &id).await, before, "nothing was queued twice");
        app.run_queued_operation(&[], OperationState::Succeeded).await;
        for path in [format!("{seed}/{change}"), format!("{resource}/{change}")] {
            let (status, again, _) = ask(&app, "POST", &path).await;
            assert_eq!((status, &again), (StatusCode::OK, &first), "{change} once {ends_as}: the last operation");
        }
        assert_eq!(operations_of(&app, &id).await, before);
    }

    let (status, deprovisioning, _) = ask(&app, "DELETE", &resource).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(ask(&app, "DELETE", &seed).await.1, deprovisioning, "a repeated DELETE gets the same operation");
    let mutation = "mutation($id: String!) { deprovisionRuntime(id: $id) }";
    let repeated = app.graphql(mutation, json!({"id": id})).await;
    assert_eq!(repeated["data"]["deprovisionRuntime"], deprovisioning.as_str(), "{repeated}");
    let hibernate = app.request("POST", &format!("{seed}/hibernate"), None, &[]).await;
    assert_eq!(hibernate.json()["code"], "operation_in_progress", "{}", hibernate.text);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let (status, again, kind) = ask(&app, "DELETE", &resource).await;
    assert_eq!((status, again, kind.as_str()), (StatusCode::OK, deprovisioning, "deprovision"), "once deleted");

    // Cancel: a repeated cancel gets the cancelled operation; an operation that succeeded cannot be cancelled.
    let queued = app.post_provision(&eks_body("retried-cancel")).await.json();
    let cancel = format!("/api/v1/operations/{}/cancel", queued["operationId"].as_str().unwrap());
    assert_eq!(app.request("POST", &cancel, None, &[]).await.status, StatusCode::ACCEPTED);
    assert_eq!(app.request("POST", &cancel, None, &[]).await.status, StatusCode::OK);
    let succeeded = format!("/api/v1/operations/{again}/cancel", again = ask(&app, "DELETE", &resource).await.1);
    let refused = app.request("POST", &succeeded, None, &[]).await;
    assert_eq!((refused.status, refused.json()["code"].clone()), (StatusCode::CONFLICT, json!("already_ended")));
}

/// An upgrade retried with its `Idempotency-Key` while the first is queued gets that upgrade (without the key:
/// 409), even through the other path family and after it ran; the same key with another body, or for another
/// change, is refused (422).
async fn a_change_retried_with_its_idempotency_key_gets_the_first_answer(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.provisioned(&eks_body("keyed")).await;
    let upgrade = json!({"workerPool": {"maxSize": 7}});
    let key = [("idempotency-key", "upgrade-7")];
    let first = app.request("PATCH", &format!("/api/v1/runtimes/{id}"), Some(&upgrade), &key).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    let first = first.json()["id"].as_str().unwrap().to_owned();

    let unkeyed = app.patch(&format!("/api/v1/provisions/{id}"), &upgrade).await;
    assert_eq!(unkeyed.json()["code"], "operation_in_progress", "{}", unkeyed.text);
    let retried = app.request("PATCH", &format!("/api/v1/provisions/{id}"), Some(&upgrade), &key).await;
    assert_eq!((retried.status, retried.json()["operationId"].as_str()), (StatusCode::ACCEPTED, Some(first.as_str())));
    assert_eq!(operations_of(&app, &id).await, 2, "the provisioning and one upgrade");

    let other_body = json!({"workerPool": {"maxSize": 8}});
    let reused = app.request("PATCH", &format!("/api/v1/runtimes/{id}"), Some(&other_body), &key).await;
    assert_eq!(
        (reused.status, reused.json()["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("idempotency_key_reused"))
    );
    let reused = app.request("DELETE", &format!("/api/v1/runtimes/{id}"), None, &key).await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY, "another change under the key: {}", reused.text);

    // Once the upgrade ran, its retry still gets it (not 400 nothing_to_change).
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let late = app.request("PATCH", &format!("/api/v1/runtimes/{id}"), Some(&upgrade), &key).await;
    assert_eq!(
        (late.status, late.json()["id"].as_str()),
        (StatusCode::ACCEPTED, Some(first.as_str())),
        "{}",
        late.text
    );
    let bad = app.request("POST", &format!("/api/v1/runtimes/{id}/hibernate"), None, &[("idempotency-key", "")]).await;
    assert_eq!((bad.status, bad.json()["field"].as_str()), (StatusCode::BAD_REQUEST, Some("Idempotency-Key")));
}
