//! The runtime as a resource (`/api/v1/runtimes`, GraphQL `runtime`): it reads back what was asked for, and its
//! state and conditions follow its operations through its life; lists leave out deprovisioned runtimes and
//! previews unless asked, on both databases.

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use serde_json::{Value, json};
use test_support::{Backend, TestApp, eks_body, on_both_databases, spawn_app};

on_both_databases!(
    a_runtime_reads_back_what_was_asked_for_and_its_state_follows_its_life,
    lists_leave_out_deprovisioned_runtimes_and_previews_unless_asked,
    a_list_filtered_by_state_holds_exactly_the_runtimes_that_show_it,
    changes_of_a_runtime_answer_with_their_operation_which_says_whether_and_how_it_ended,
    a_patch_is_a_json_merge_patch_and_a_runtimes_logs_are_never_silently_a_snapshot,
);

/// Every state a runtime shows.
const STATES: [&str; 8] =
    ["Provisioning", "Ready", "Updating", "Hibernating", "Hibernated", "Failed", "Deprovisioning", "Deleted"];

async fn runtime(app: &TestApp, id: &str) -> Value {
    let answer = app.get(&format!("/api/v1/runtimes/{id}")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    answer.json()
}

/// `(status, reason)` of the runtime's condition of `condition_type`.
fn condition(runtime: &Value, condition_type: &str) -> (String, String) {
    let conditions = runtime["conditions"].as_array().expect("conditions");
    let condition = conditions.iter().find(|condition| condition["type"] == condition_type).expect("the condition");
    (condition["status"].as_str().unwrap().to_owned(), condition["reason"].as_str().unwrap().to_owned())
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
}

/// Asks for `change` of the runtime (`hibernate`, `wake` or a PATCH or DELETE) and checks the state it shows.
async fn queue(app: &TestApp, id: &str, method: &str, path: &str, body: Option<&Value>, state: &str) -> Value {
    let answer = app.request(method, path, body, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{method} {path}: {}", answer.text);
    let runtime = runtime(app, id).await;
    assert_eq!(runtime["state"], state, "after {method} {path}: {runtime}");
    assert_eq!(condition(&runtime, "Progressing").0, "True", "{runtime}");
    runtime
}

async fn a_runtime_reads_back_what_was_asked_for_and_its_state_follows_its_life(backend: Backend) {
    let app = spawn_app(backend).await;
    let request = eks_body("resource-life");
    let accepted = app.post_provision(&request).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let id = accepted.json()["id"].as_str().unwrap().to_owned();

    let queued = runtime(&app, &id).await;
    assert_eq!(queued["name"], "resource-life");
    assert_eq!(queued["description"], request["runtimeInput"]["description"]);
    assert_eq!(queued["labels"], request["runtimeInput"]["labels"]);
    // As asked for, with the operator's ranges that may reach its API (the request named none).
    let mut asked = request["clusterConfig"].clone();
    asked["apiAllowedCidrs"] = json!([test_support::TEST_API_ALLOWED_CIDRS]);
    // The single pool shows as the pool named default too.
    let mut pool = asked["workerPool"].clone();
    pool["name"] = json!("default");
    asked["workerPools"] = json!([pool]);
    assert_eq!(queued["clusterConfig"], asked, "the configuration reads back as it was asked for");
    assert_eq!((queued["state"].as_str(), queued["preview"].as_bool()), (Some("Provisioning"), Some(false)));
    assert_eq!(condition(&queued, "Provisioned"), pair("False", "Provisioning"));
    assert_eq!(condition(&queued, "Progressing"), pair("True", "Provision"));
    assert_eq!(queued["lastOperation"]["operation"], "provision");
    assert_eq!((&queued["targetConfig"], &queued["deletedAt"]), (&Value::Null, &Value::Null));

    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let ready = runtime(&app, &id).await;
    assert_eq!(ready["state"], "Ready");
    assert_eq!(condition(&ready, "Provisioned"), pair("True", "ProvisioningSucceeded"));
    assert_eq!(condition(&ready, "Progressing"), pair("False", "Succeeded"));

    let path = format!("/api/v1/provisions/{id}");
    let upgrade = json!({"workerPool": {"maxSize": 7}});
    let updating = queue(&app, &id, "PATCH", &path, Some(&upgrade), "Updating").await;
    assert_eq!(updating["targetConfig"]["workerPool"]["maxSize"], 7, "the target shows during the upgrade");
    assert_eq!(updating["clusterConfig"], asked, "the applied configuration is unchanged so far");
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let upgraded = runtime(&app, &id).await;
    assert_eq!((upgraded["state"].as_str(), &upgraded["targetConfig"]), (Some("Ready"), &Value::Null));
    assert_eq!(upgraded["clusterConfig"]["workerPool"]["maxSize"], 7, "the upgrade's configuration is applied");

    queue(&app, &id, "POST", &format!("{path}/hibernate"), None, "Hibernating").await;
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    assert_eq!(runtime(&app, &id).await["state"], "Hibernated");

    queue(&app, &id, "POST", &format!("{path}/wake"), None, "Updating").await;
    app.run_queued_operation(&[], OperationState::Failed).await;
    let failed = runtime(&app, &id).await;
    assert_eq!(failed["state"], "Failed");
    assert_eq!(condition(&failed, "Progressing"), pair("False", "Failed"));
    assert_eq!(condition(&failed, "Provisioned"), pair("True", "ProvisioningSucceeded"), "the cluster still exists");

    queue(&app, &id, "DELETE", &path, None, "Deprovisioning").await;
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let deleted = runtime(&app, &id).await;
    assert_eq!(deleted["state"], "Deleted");
    assert_eq!(condition(&deleted, "Provisioned"), pair("False", "Deprovisioned"));
    assert!(deleted["deletedAt"].is_string(), "{deleted}");

    // GraphQL shows the same, on `runtime` and on Kyma's `runtimeStatus`.
    let query = "query($id: String!) {
        runtime(id: $id) { name state conditions { type status reason message lastTransitionTime } deletedAt }
        runtimeStatus(id: $id) { id state preview lastOperationStatus { operation } }
    }";
    let answer = app.graphql(query, json!({"id": id})).await;
    assert_eq!(answer["errors"], Value::Null, "{answer}");
    let data = &answer["data"];
    assert_eq!(
        (data["runtime"]["name"].as_str(), data["runtime"]["state"].as_str()),
        (Some("resource-life"), Some("Deleted"))
    );
    assert_eq!(timed(&data["runtime"]["conditions"]), timed(&deleted["conditions"]), "both APIs show the same");
    assert_eq!(instant(&data["runtime"]["deletedAt"]), instant(&deleted["deletedAt"]));
    assert_eq!(
        data["runtimeStatus"],
        json!({"id": id, "state": "Deleted", "preview": false, "lastOperationStatus": {"operation": "Deprovision"}})
    );
}

/// A time as both APIs write it (GraphQL `+00:00`, REST `Z`).
fn instant(time: &Value) -> chrono::DateTime<chrono::Utc> {
    time.as_str().and_then(|time| time.parse().ok()).unwrap_or_else(|| panic!("not a time: {time}"))
}

/// Conditions with their times parsed.
fn timed(conditions: &Value) -> Vec<(Value, chrono::DateTime<chrono::Utc>)> {
    let conditions = conditions.as_array().expect("conditions");
    let without_time = |condition: &Value| {
        let mut condition = condition.clone();
        condition.as_object_mut().unwrap().remove("lastTransitionTime");
        condition
    };
    conditions.iter().map(|condition| (without_time(condition), instant(&condition["lastTransitionTime"]))).collect()
}

/// The names of a REST list's runtimes.
async fn names(app: &TestApp, path: &str) -> Vec<String> {
    let answer = app.get(path).await;
    assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.text);
    let list = answer.json();
    let runtimes = list["runtimes"].as_array().expect("runtimes");
    runtimes.iter().map(|runtime| runtime["name"].as_str().unwrap().to_owned()).collect()
}

async fn lists_leave_out_deprovisioned_runtimes_and_previews_unless_asked(backend: Backend) {
    let app = spawn_app(backend).await;
    app.provisioned(&eks_body("listed-live")).await;
    let mut labelled = eks_body("listed-labelled");
    labelled["runtimeInput"]["labels"] = json!({"team": "blue"});
    app.provisioned(&labelled).await;
    let gone = app.provisioned(&eks_body("listed-gone")).await;
    assert_eq!(app.delete(&format!("/api/v1/provisions/{gone}")).await.status, StatusCode::ACCEPTED);
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    let preview = app.request("POST", "/api/v1/provisions?dryRun=true", Some(&eks_body("listed-preview")), &[]).await;
    assert_eq!(preview.status, StatusCode::ACCEPTED, "{}", preview.text);

    assert_eq!(names(&app, "/api/v1/runtimes").await, ["listed-live", "listed-labelled"]);
    assert_eq!(
        names(&app, "/api/v1/runtimes?includeDeleted=true").await,
        ["listed-live", "listed-labelled", "listed-gone"]
    );
    assert_eq!(names(&app, "/api/v1/runtimes?preview=true").await, ["listed-preview"]);
    assert_eq!(names(&app, "/api/v1/runtimes?name=listed-gone").await, Vec::<String>::new());
    assert_eq!(names(&app, "/api/v1/runtimes?name=listed-gone&includeDeleted=true").await, ["listed-gone"]);
    assert_eq!(names(&app, "/api/v1/runtimes?label=team%3Dblue").await, ["listed-labelled"]);
    // The alias keeps today's shape and lists every runtime.
    let all = app.get("/api/v1/provisions").await.json();
    assert_eq!(all["runtimes"].as_array().unwrap().len(), 4, "{all}");

    let refused = app.get("/api/v1/runtimes?includeDeleted=maybe").await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
}

/// Runtimes in every state, each reached as its users would reach it (among them a dry run of an upgrade, a
/// failed provisioning, a failed upgrade, an upgrade waiting for approval and previews): a list filtered by a state (in SQL) holds exactly the
/// runtimes whose own reads (the domain's rule) show that state.
async fn a_list_filtered_by_state_holds_exactly_the_runtimes_that_show_it(backend: Backend) {
    let app = spawn_app(backend).await;
    let upgrade = json!({"workerPool": {"maxSize": 9}});
    // `run_queued_operation` finishes the oldest queued operation: first the changes that end, one at a time...
    for (name, method, suffix, body, ends) in [
        ("state-ready", "", "", None, OperationState::Succeeded),
        ("state-hibernated", "POST", "/hibernate", None, OperationState::Succeeded),
        ("state-waking", "POST", "/hibernate", None, OperationState::Succeeded),
        ("state-failed-upgrade", "PATCH", "", Some(&upgrade), OperationState::Failed),
        ("state-deleted", "DELETE", "", None, OperationState::Succeeded),
    ] {
        let id = app.provisioned(&eks_body(name)).await;
        if !method.is_empty() {
            request(&app, method, &format!("/api/v1/provisions/{id}{suffix}"), body).await;
            app.run_queued_operation(&[], ends).await;
        }
    }
    for (path, name, ends) in [
        ("/api/v1/provisions", "state-failed-provision", OperationState::Failed),
        ("/api/v1/provisions?dryRun=true", "state-planned", OperationState::Succeeded),
    ] {
        request(&app, "POST", path, Some(&eks_body(name))).await;
        app.run_queued_operation(&[], ends).await;
    }
    // An upgrade whose plan waits for approval is still updating the runtime.
    let approving = app.provisioned(&eks_body("state-approving")).await;
    request(&app, "PATCH", &format!("/api/v1/provisions/{approving}"), Some(&upgrade)).await;
    app.hold_queued_operation_for_approval(&"a".repeat(64), std::time::Duration::from_secs(3600)).await;
    // ...then those that stay queued.
    request(&app, "POST", "/api/v1/provisions", Some(&eks_body("state-provisioning"))).await;
    request(&app, "POST", "/api/v1/provisions?dryRun=true", Some(&eks_body("state-planning"))).await;
    let waking = runtime_named(&app, "state-waking").await;
    request(&app, "POST", &format!("/api/v1/provisions/{waking}/wake"), None).await;
    for (name, method, suffix, body) in [
        ("state-updating", "PATCH", "", Some(&upgrade)),
        ("state-dry-run", "PATCH", "?dryRun=true", Some(&upgrade)),
        ("state-hibernating", "POST", "/hibernate", None),
        ("state-deprovision", "DELETE", "", None),
    ] {
        let id = app.provisioned(&eks_body(name)).await;
        request(&app, method, &format!("/api/v1/provisions/{id}{suffix}"), body).await;
    }

    let everything = app.get("/api/v1/provisions?first=100").await.json();
    let mut shown: Vec<(String, String, bool)> = Vec::new();
    for listed in everything["runtimes"].as_array().unwrap() {
        let runtime = runtime(&app, listed["id"].as_str().unwrap()).await;
        let (name, state) = (runtime["name"].as_str().unwrap(), runtime["state"].as_str().unwrap());
        shown.push((name.to_owned(), state.to_owned(), runtime["preview"].as_bool().unwrap()));
    }
    let state_of = |name: &str| shown.iter().find(|(shown, ..)| shown == name).map(|(_, state, _)| state.as_str());
    assert_eq!(state_of("state-dry-run"), Some("Ready"), "a dry run changes nothing: {shown:?}");
    assert_eq!(state_of("state-waking"), Some("Updating"), "{shown:?}");
    assert_eq!(state_of("state-planned"), Some("Ready"), "{shown:?}");
    assert_eq!(state_of("state-approving"), Some("Updating"), "{shown:?}");
    for state in STATES {
        assert!(shown.iter().any(|(_, shown, _)| shown == state), "no runtime is {state}: {shown:?}");
        for preview in [false, true] {
            let expected: Vec<&str> = shown
                .iter()
                .filter(|(_, shown, is_preview)| shown == state && *is_preview == preview)
                .map(|(name, ..)| name.as_str())
                .collect();
            let path = format!("/api/v1/runtimes?state={state}&includeDeleted=true&preview={preview}&first=100");
            assert_eq!(names(&app, &path).await, expected, "{path}");
        }
    }
    let refused = app.get("/api/v1/runtimes?state=Sleeping").await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert!(refused.text.contains("state") && refused.text.contains("Hibernated"), "{}", refused.text);
}

async fn request(app: &TestApp, method: &str, path: &str, body: Option<&Value>) {
    let answer = app.request(method, path, body, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{method} {path}: {}", answer.text);
}

async fn runtime_named(app: &TestApp, name: &str) -> String {
    let list = app.get(&format!("/api/v1/runtimes?name={name}")).await.json();
    list["runtimes"][0]["id"].as_str().unwrap_or_else(|| panic!("no runtime {name}: {list}")).to_owned()
}

/// A change under `/api/v1/runtimes`: 202 with the operation itself and its `Location`.
async fn change(app: &TestApp, method: &str, path: &str, body: Option<&Value>, operation_type: &str) -> Value {
    let answer = app.request(method, path, body, &[]).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{method} {path}: {}", answer.text);
    let operation = answer.json();
    let location = answer.headers.get("location").expect("a Location").to_str().unwrap().to_owned();
    assert_eq!(location, format!("/api/v1/operations/{}", operation["id"].as_str().unwrap()));
    assert_eq!(operation["operation"], operation_type, "{operation}");
    assert_eq!((operation["done"].as_bool(), &operation["outcome"]), (Some(false), &Value::Null), "{operation}");
    assert_eq!(operation["stages"][0]["stage"], "Queued", "the whole record: {operation}");
    let read = app.get(&location).await.json();
    assert_eq!((&read["id"], &read["status"]), (&operation["id"], &operation["status"]), "{read}");
    operation
}

async fn operation(app: &TestApp, id: &Value) -> Value {
    app.get(&format!("/api/v1/operations/{}", id.as_str().unwrap())).await.json()
}

/// Every change under `/api/v1/runtimes` answers 202 with its whole operation and `Location:
/// /api/v1/operations/{id}`; the operation says whether it is `done` and its `outcome` (a cancelled one is told
/// apart from a failed one, while Kyma's `state` shows both `Failed`), its final `error` apart from the error of a
/// step being `retrying`.
async fn changes_of_a_runtime_answer_with_their_operation_which_says_whether_and_how_it_ended(backend: Backend) {
    let app = spawn_app(backend).await;
    let cancelled = change(&app, "POST", "/api/v1/runtimes", Some(&eks_body("changed-cancelled")), "provision").await;
    let cancel = format!("/api/v1/operations/{}/cancel", cancelled["id"].as_str().unwrap());
    assert_eq!(app.request("POST", &cancel, None, &[]).await.status, StatusCode::ACCEPTED);
    let cancelled = operation(&app, &cancelled["id"]).await;
    assert_eq!((cancelled["done"].as_bool(), cancelled["outcome"].as_str()), (Some(true), Some("Cancelled")));
    assert_eq!(
        (cancelled["status"].as_str(), cancelled["error"]["reason"].as_str()),
        (Some("failed"), Some("cancelled"))
    );
    let kyma = app
        .graphql(
            "query($id: String!) { runtimeOperationStatus(id: $id) { state outcome done } }",
            json!({"id": cancelled["id"]}),
        )
        .await;
    assert_eq!(
        kyma["data"]["runtimeOperationStatus"],
        json!({"state": "Failed", "outcome": "Cancelled", "done": true}),
        "{kyma}"
    );

    let id = app.provisioned(&eks_body("changed")).await;
    let path = format!("/api/v1/runtimes/{id}");
    let upgrade = change(&app, "PATCH", &path, Some(&json!({"workerPool": {"maxSize": 4}})), "upgrade").await;
    // The worker retries a step: its error shows as `retrying`, not as a failure.
    let store =
        provisioner::store::Store::connect(&app.database.url, 2, std::time::Duration::from_secs(5)).await.unwrap();
    let claim =
        store.claim_operations("test", std::time::Duration::from_secs(60), false, &[], 1).await.unwrap().remove(0);
    let error = provisioner::domain::LastError::new(
        provisioner::domain::FailureReason::AuthServiceError,
        provisioner::domain::Component::AuthService,
        "auth-service did not answer",
    );
    let retrying = provisioner::store::Progress::Retrying { message: "retrying".into(), error };
    assert!(store.record_progress(&claim.operation, claim.token, retrying).await.unwrap());
    let running = operation(&app, &upgrade["id"]).await;
    assert_eq!(running["retrying"]["reason"], "auth_service_error", "{running}");
    assert_eq!((&running["error"], running["done"].as_bool()), (&Value::Null, Some(false)), "{running}");
    let failed = provisioner::store::Progress::Finished {
        state: OperationState::Failed,
        stage: provisioner::domain::run::Stage::Done,
        message: "failed".into(),
    };
    assert!(store.record_progress(&claim.operation, claim.token, failed).await.unwrap());
    let failed = operation(&app, &upgrade["id"]).await;
    assert_eq!((failed["done"].as_bool(), failed["outcome"].as_str()), (Some(true), Some("Failed")), "{failed}");
    assert_eq!((&failed["retrying"], failed["error"]["reason"].as_str()), (&Value::Null, Some("auth_service_error")));

    change(&app, "POST", &format!("{path}/hibernate"), None, "hibernate").await;
    app.run_queued_operation(&[], OperationState::Succeeded).await;
    change(&app, "POST", &format!("{path}/wake"), None, "wake_up").await;
    let woken = app.run_queued_operation(&[], OperationState::Succeeded).await;
    let woken = operation(&app, &json!(woken)).await;
    assert_eq!(
        (woken["done"].as_bool(), woken["outcome"].as_str(), &woken["error"]),
        (Some(true), Some("Succeeded"), &Value::Null)
    );
    change(&app, "DELETE", &path, None, "deprovision").await;

    // The seed's paths answer as they always did.
    let seed = app.post_provision(&eks_body("changed-seed")).await;
    assert_eq!(seed.status, StatusCode::ACCEPTED);
    let seed_location = seed.headers.get("location").unwrap().to_str().unwrap().to_owned();
    let seed = seed.json();
    assert_eq!(seed_location, format!("/api/v1/provisions/{}", seed["id"].as_str().unwrap()));
    assert_eq!(seed.as_object().unwrap().len(), 5, "{seed}");
}

/// What the OpenAPI document promises: PATCH takes `application/merge-patch+json` as well as JSON (and nothing
/// else), and `follow` on a runtime's logs is refused, naming it, rather than answered with a snapshot.
async fn a_patch_is_a_json_merge_patch_and_a_runtimes_logs_are_never_silently_a_snapshot(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.provisioned(&eks_body("merge-patched")).await;
    let patch = |path: String, content_type: &'static str| {
        let request = axum::http::Request::builder()
            .method("PATCH")
            .uri(path)
            .header("content-type", content_type)
            .body(axum::body::Body::from(r#"{"workerPool": {"maxSize": 8}}"#))
            .unwrap();
        test_support::call(&app.app.router, request)
    };
    let refused = patch(format!("/api/v1/runtimes/{id}"), "text/plain").await;
    assert_eq!(refused.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", refused.text);
    let accepted = patch(format!("/api/v1/runtimes/{id}"), "application/merge-patch+json").await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    assert_eq!(accepted.json()["operation"], "upgrade");

    let follow = app.get(&format!("/api/v1/provisions/{id}/logs?follow=true")).await;
    assert_eq!((follow.status, follow.json()["field"].as_str()), (StatusCode::BAD_REQUEST, Some("follow")));
}
