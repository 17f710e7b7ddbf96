//! The service through both APIs, on SQLite and on PostgreSQL, with the router driven in-process.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use provisioner::domain::{DEFAULT_DISK_SIZE_GB, ProvisionRequest, Topology};
use serde_json::{Value, json};
use test_support::auth_service::{aws_credential, gcp_credential};
use test_support::documents;
use test_support::{
    Backend, OPERATION_STATUS_FIELDS, TestApp, call, gke_body, on_both_databases, provision_body, provision_input,
    spawn_app, spawn_app_with,
};

async fn operation_status_via_graphql(app: &TestApp, operation_id: &str) -> Value {
    let query = format!("query($id: String!) {{ runtimeOperationStatus(id: $id) {{ {OPERATION_STATUS_FIELDS} }} }}");
    let response = app.graphql(&query, json!({ "id": operation_id })).await;
    assert!(response.get("errors").is_none(), "{response}");
    response["data"]["runtimeOperationStatus"].clone()
}

/// Asserts that the REST status and the GraphQL status describe the same operation identically.
fn assert_same_operation(rest: &Value, graphql: &Value) {
    assert_eq!(rest["operationId"], graphql["id"], "rest {rest} graphql {graphql}");
    assert_eq!(rest["id"], graphql["runtimeID"]);
    assert_eq!(rest["message"], graphql["message"]);
    assert_eq!(rest["stage"], graphql["stage"]);
    let expected_state = match rest["status"].as_str().unwrap() {
        "queued" => "Pending",
        "running" => "InProgress",
        "succeeded" => "Succeeded",
        "failed" => "Failed",
        other => panic!("unknown REST status {other}"),
    };
    assert_eq!(graphql["state"], expected_state);
    let expected_operation = match rest["operation"].as_str().unwrap() {
        "provision" => "Provision",
        "deprovision" => "Deprovision",
        other => panic!("unknown REST operation {other}"),
    };
    assert_eq!(graphql["operation"], expected_operation);
}

async fn rest_provisioning_is_queued_and_both_apis_agree(backend: Backend) {
    let app = spawn_app(backend).await;
    let accepted = app.post_provision(&provision_body("alpha")).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let accepted = accepted.json();
    assert_eq!(accepted["status"], "queued");
    let runtime_id = accepted["id"].as_str().unwrap();
    let operation_id = accepted["operationId"].as_str().unwrap();

    let status = app.get(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.text);
    let status = status.json();
    assert_eq!(status["name"], "alpha");
    assert_eq!(status["operation"], "provision");
    assert_eq!(status["status"], "queued");
    assert_eq!(status["operationId"], operation_id);

    let graphql = operation_status_via_graphql(&app, operation_id).await;
    assert_same_operation(&status, &graphql);
    assert_eq!(graphql["lastError"], Value::Null);
}

async fn graphql_provisioning_is_visible_over_rest(backend: Backend) {
    let app = spawn_app(backend).await;
    let mutation = format!(
        "mutation($config: ProvisionRuntimeInput!) {{ provisionRuntime(config: $config) {{ {OPERATION_STATUS_FIELDS} }} }}"
    );
    let response = app.graphql(&mutation, json!({ "config": provision_input("beta") })).await;
    assert!(response.get("errors").is_none(), "{response}");
    let operation = &response["data"]["provisionRuntime"];
    assert_eq!(operation["state"], "Pending");
    assert_eq!(operation["operation"], "Provision");

    let runtime_id = operation["runtimeID"].as_str().unwrap();
    let status = app.get(&format!("/api/v1/provisions/{runtime_id}")).await.json();
    assert_same_operation(&status, operation);

    let query = "query($id: String!) { runtimeStatus(id: $id) { lastOperationStatus { id state } \
                 runtimeConfiguration { kubeconfig clusterConfig { topology region workerPool { maxSize } aws { zones } } } } }";
    let response = app.graphql(query, json!({ "id": runtime_id })).await;
    assert!(response.get("errors").is_none(), "{response}");
    let runtime_status = &response["data"]["runtimeStatus"];
    assert_eq!(runtime_status["lastOperationStatus"]["id"], operation["id"]);
    let cluster = &runtime_status["runtimeConfiguration"]["clusterConfig"];
    assert_eq!(cluster["topology"], "VANILLA_KUBEADM");
    assert_eq!(cluster["region"], "eu-central-1");
    assert_eq!(cluster["workerPool"]["maxSize"], 3);
    assert_eq!(cluster["aws"]["zones"], json!(["eu-central-1a", "eu-central-1b"]));
    assert_eq!(runtime_status["runtimeConfiguration"]["kubeconfig"], Value::Null, "no kubeconfig before success");
}

/// `workerPool.diskSizeGb` may be left out, as Kyma's `volumeSizeGB`: both APIs store the documented default.
async fn the_worker_disk_size_is_optional_in_both_apis(backend: Backend) {
    let app = spawn_app(backend).await;
    let query = "query($id: String!) { runtimeStatus(id: $id) { runtimeConfiguration { clusterConfig { workerPool { diskSizeGb } } } } }";
    let disk = |response: Value| {
        response["data"]["runtimeStatus"]["runtimeConfiguration"]["clusterConfig"]["workerPool"]["diskSizeGb"].clone()
    };

    let mut body = provision_body("disk-rest");
    body["clusterConfig"]["workerPool"].as_object_mut().unwrap().remove("diskSizeGb");
    let accepted = app.post_provision(&body).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let runtime_id = accepted.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(disk(app.graphql(query, json!({ "id": runtime_id })).await), json!(DEFAULT_DISK_SIZE_GB));

    let mut input = provision_input("disk-graphql");
    input["clusterConfig"]["workerPool"].as_object_mut().unwrap().remove("diskSizeGb");
    let mutation = "mutation($config: ProvisionRuntimeInput!) { provisionRuntime(config: $config) { runtimeID } }";
    let response = app.graphql(mutation, json!({ "config": input })).await;
    assert!(response.get("errors").is_none(), "{response}");
    let runtime_id = response["data"]["provisionRuntime"]["runtimeID"].as_str().unwrap().to_owned();
    assert_eq!(disk(app.graphql(query, json!({ "id": runtime_id })).await), json!(DEFAULT_DISK_SIZE_GB));
}

async fn invalid_input_names_the_field_in_both_apis(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut body = provision_body("gamma");
    body["clusterConfig"]["workerPool"]["minSize"] = json!(5);
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    assert_eq!(answer.headers["content-type"], "application/problem+json");
    let problem = answer.json();
    let request_id = answer.headers["x-request-id"].to_str().unwrap();
    assert_eq!(
        (&problem["type"], &problem["title"], &problem["status"], &problem["instance"]),
        (&json!("/api/v1/problems/invalid_input"), &json!("Invalid input"), &json!(400), &json!(request_id)),
        "{problem}"
    );
    assert_eq!((&problem["code"], &problem["component"]), (&json!("invalid_input"), &json!("provisioner")));
    assert_eq!(problem["field"], "clusterConfig.workerPool.minSize");
    assert_eq!(problem["errors"][0]["field"], "clusterConfig.workerPool.minSize");
    assert!(problem["detail"].as_str().unwrap().contains("maxSize"), "{problem}");
    // The shape before problems stays for one release.
    let legacy = &problem["error"];
    assert_eq!(
        (&legacy["code"], &legacy["field"], &legacy["message"]),
        (&problem["code"], &problem["field"], &problem["detail"])
    );

    // The problem's type is a page that says what the code means and whether to retry.
    let page = app.get(problem["type"].as_str().unwrap()).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let page = page.json();
    assert_eq!((&page["code"], &page["status"], &page["retry"]), (&json!("invalid_input"), &json!(400), &json!("no")));

    let mut input = provision_input("gamma");
    input["clusterConfig"]["workerPool"]["minSize"] = json!(5);
    let response = app.graphql(documents::PROVISION, json!({ "config": input })).await;
    let extensions = &response["errors"][0]["extensions"];
    assert_eq!(extensions["code"], "BAD_REQUEST", "{response}");
    assert_eq!(extensions["error_code"], 400);
    assert_eq!(extensions["field"], "clusterConfig.workerPool.minSize");
    assert_eq!(response["errors"][0]["message"], problem["detail"]);

    // Nothing was recorded for either request.
    let list = app.graphql("{ runtimes { edges { cursor } } }", json!({})).await;
    assert_eq!(list["data"]["runtimes"]["edges"], json!([]), "{list}");
}

async fn malformed_bodies_are_refused_clearly(backend: Backend) {
    let app = spawn_app(backend).await;

    // Every field serde refuses is named at once, each with its reason.
    let mut body = provision_body("delta");
    body["clusterConfig"].as_object_mut().unwrap().remove("region");
    body["clusterConfig"]["topology"] = json!("openstack");
    body["clusterConfig"]["workerPool"]["surprise"] = json!(true);
    body["clusterConfig"]["workerPool"]["minSize"] = json!("two");
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let mut refused: Vec<(String, String)> = answer.json()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|error| (error["field"].as_str().unwrap().to_owned(), error["reason"].as_str().unwrap().to_owned()))
        .collect();
    refused.sort();
    let expected = [
        ("clusterConfig.region", "required"),
        ("clusterConfig.topology", "unsupported_value"),
        ("clusterConfig.workerPool.minSize", "format"),
        ("clusterConfig.workerPool.surprise", "not_allowed"),
    ];
    assert_eq!(refused, expected.map(|(field, reason)| (field.to_owned(), reason.to_owned())), "{}", answer.text);

    // A body that is not JSON is named too.
    let not_json =
        Request::post("/api/v1/provisions").header("content-type", "application/json").body(Body::from("{x"));
    let answer = call(&app.app.router, not_json.unwrap()).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let refused = &answer.json()["errors"];
    assert_eq!(refused.as_array().map(Vec::len), Some(1), "{refused}");
    assert_eq!((&refused[0]["field"], &refused[0]["reason"]), (&json!("body"), &json!("format")), "{refused}");

    let answer = app.request("POST", "/api/v1/provisions", None, &[("content-type", "text/plain")]).await;
    assert_eq!(answer.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(answer.json()["code"], "unsupported_media_type");

    let mut body = provision_body("delta");
    body["runtimeInput"]["description"] = json!("x".repeat(70 * 1024));
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(answer.json()["code"], "payload_too_large");
}

async fn deprovisioning_while_provisioning_is_active_conflicts(backend: Backend) {
    let app = spawn_app(backend).await;
    let accepted = app.post_provision(&provision_body("epsilon")).await.json();
    let runtime_id = accepted["id"].as_str().unwrap();

    let answer = app.delete(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.text);
    let error = &answer.json();
    assert_eq!(error["code"], "operation_in_progress");
    let message = error["detail"].as_str().unwrap();
    assert!(message.contains(accepted["operationId"].as_str().unwrap()), "{message}");
    assert!(message.contains("only one operation per runtime"), "{message}");

    let response = app.graphql(documents::DEPROVISION, json!({ "id": runtime_id })).await;
    assert_eq!(response["errors"][0]["extensions"]["code"], "CONFLICT", "{response}");
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "operation_in_progress");

    // The provisioning operation is untouched.
    let status = app.get(&format!("/api/v1/provisions/{runtime_id}")).await.json();
    assert_eq!(status["operationId"], accepted["operationId"]);
    assert_eq!(status["status"], "queued");
}

async fn names_are_unique_among_live_runtimes_even_under_concurrency(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = provision_body("zeta");
    let answers = futures::future::join_all((0..8).map(|_| app.post_provision(&body))).await;
    let accepted = answers.iter().filter(|answer| answer.status == StatusCode::ACCEPTED).count();
    let conflicts: Vec<_> = answers.iter().filter(|answer| answer.status == StatusCode::CONFLICT).collect();
    assert_eq!(accepted, 1, "{answers:?}");
    assert_eq!(conflicts.len(), 7, "{answers:?}");
    assert_eq!(conflicts[0].json()["code"], "name_taken");

    let response = app.graphql(documents::PROVISION, json!({ "config": provision_input("zeta") })).await;
    assert_eq!(response["errors"][0]["extensions"]["error_reason"], "name_taken", "{response}");
}

async fn unknown_and_malformed_ids(backend: Backend) {
    let app = spawn_app(backend).await;
    let unknown = uuid::Uuid::now_v7();
    for path in [
        format!("/api/v1/provisions/{unknown}"),
        format!("/api/v1/provisions/{unknown}/logs"),
        format!("/api/v1/provisions/{unknown}/kubeconfig"),
    ] {
        let answer = app.get(&path).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}: {}", answer.text);
        assert_eq!(answer.json()["code"], "not_found");
    }
    assert_eq!(app.delete(&format!("/api/v1/provisions/{unknown}")).await.status, StatusCode::NOT_FOUND);

    let answer = app.get("/api/v1/provisions/not-a-uuid").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.json()["field"], "id");

    let response = app
        .graphql("query($id: String!) { runtimeOperationStatus(id: $id) { id } }", json!({ "id": unknown.to_string() }))
        .await;
    assert_eq!(response["errors"][0]["extensions"]["code"], "NOT_FOUND", "{response}");
    assert_eq!(response["errors"][0]["extensions"]["error_code"], 404);
}

async fn kubeconfig_and_logs_conflict_before_the_run(backend: Backend) {
    let app = spawn_app(backend).await;
    let accepted = app.post_provision(&provision_body("eta")).await.json();
    let (runtime_id, operation_id) = (accepted["id"].as_str().unwrap(), accepted["operationId"].as_str().unwrap());
    let answer = app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.text);
    assert_eq!(answer.json()["code"], "not_ready");
    let answer = app.get(&format!("/api/v1/provisions/{runtime_id}/logs")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.text);
    assert_eq!(answer.json()["code"], "no_runner_pod");

    // Cancelled while queued, it never had a pod: no cluster is asked (this app has none), the answer stays 409.
    let cancelled = app.request("POST", &format!("/api/v1/operations/{operation_id}/cancel"), None, &[]).await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED, "{}", cancelled.text);
    let answer = app.get(&format!("/api/v1/operations/{operation_id}/logs")).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.text);
    assert_eq!(answer.json()["code"], "no_runner_pod");
    assert!(answer.json()["detail"].as_str().unwrap().contains("before it ran"), "{}", answer.text);
}

async fn idempotency_key_replays_the_first_answer(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = provision_body("theta");
    let headers = [("idempotency-key", "create-theta-1")];
    let first = app.request("POST", "/api/v1/provisions", Some(&body), &headers).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    let second = app.request("POST", "/api/v1/provisions", Some(&body), &headers).await;
    assert_eq!(second.status, StatusCode::ACCEPTED, "{}", second.text);
    assert_eq!(first.json(), second.json());

    let other = provision_body("theta-2");
    let reused = app.request("POST", "/api/v1/provisions", Some(&other), &headers).await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reused.text);
    assert_eq!(reused.json()["field"], "Idempotency-Key");

    assert_eq!(runtimes_recorded(&app).await, 1);
}

/// An `Idempotency-Key` is its caller's: another caller's same key is another request. And it expires: after
/// `APP_IDEMPOTENCY_KEY_TTL` the key starts a new request, and the clean-up deletes the old record.
async fn idempotency_keys_are_per_caller_and_expire(backend: Backend) {
    let app = spawn_app_with(backend, &[("APP_IDEMPOTENCY_KEY_TTL", "2s")], None).await;
    let service = &app.app.service;
    let request = |name: &str| ProvisionRequest::example_named(Topology::VanillaKubeadm, name);
    let alice = service.provision_runtime(request("kappa"), Some("shared-key"), false, "alice").await.unwrap();
    let bob = service.provision_runtime(request("kappa-bob"), Some("shared-key"), false, "bob").await.unwrap();
    assert!(!bob.replayed, "bob's request is his own");
    assert_ne!(bob.operation.id, alice.operation.id);
    let again = service.provision_runtime(request("kappa"), Some("shared-key"), false, "alice").await.unwrap();
    assert!(again.replayed && again.operation.id == alice.operation.id, "alice's retry is replayed");

    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = service.provision_runtime(request("kappa-later"), Some("shared-key"), false, "alice").await.unwrap();
    assert!(!later.replayed, "an expired key starts a new request");

    let store = provisioner::store::Store::connect(&app.database.url, 2, Duration::from_secs(5)).await.unwrap();
    let periods = provisioner::worker::RetentionPeriods {
        run_logs: Duration::from_secs(90 * 24 * 60 * 60),
        idempotency_records: Duration::from_secs(2),
        plan_approvals: Duration::from_secs(60 * 60),
    };
    let retention = provisioner::worker::Retention { store, periods };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let cleanup = tokio::spawn(retention.run(stopped));
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.send(true).unwrap();
    cleanup.await.unwrap().unwrap();
    use sea_orm::ConnectionTrait as _;
    let db = sea_orm::Database::connect(&app.database.url).await.unwrap();
    let statement = sea_orm::Statement::from_string(
        db.get_database_backend(),
        "SELECT caller FROM caller_idempotency_key ORDER BY caller",
    );
    let rows = db.query_all_raw(statement).await.unwrap();
    let callers: Vec<String> = rows.iter().map(|row| row.try_get("", "caller").unwrap()).collect();
    assert_eq!(callers, ["alice"], "bob's expired record is gone, alice's new one stays");
}

async fn operations_survive_a_restart(backend: Backend) {
    let app = spawn_app(backend).await;
    let accepted = app.post_provision(&provision_body("iota")).await.json();
    let runtime_id = accepted["id"].as_str().unwrap().to_owned();
    let before = app.get(&format!("/api/v1/provisions/{runtime_id}")).await.json();

    let app = app.restart().await;
    let after = app.get(&format!("/api/v1/provisions/{runtime_id}")).await;
    assert_eq!(after.status, StatusCode::OK);
    assert_eq!(after.json(), before);
    let graphql = operation_status_via_graphql(&app, accepted["operationId"].as_str().unwrap()).await;
    assert_eq!(graphql["state"], "Pending");
    // The restarted process still enforces the invariants it had before.
    assert_eq!(app.delete(&format!("/api/v1/provisions/{runtime_id}")).await.status, StatusCode::CONFLICT);
    assert_eq!(app.post_provision(&provision_body("iota")).await.status, StatusCode::CONFLICT);
}

async fn runtimes_are_paginated_and_filtered_by_state(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut ids = Vec::new();
    for name in ["kappa-1", "kappa-2", "kappa-3"] {
        ids.push(app.post_provision(&provision_body(name)).await.json()["id"].as_str().unwrap().to_owned());
    }
    let query = "query($after: String, $state: OperationState) { runtimes(first: 2, after: $after, state: $state) { \
                 pageInfo { hasNextPage endCursor } edges { node { id name status { lastOperationStatus { state } } } } } }";
    let page = app.graphql(query, json!({})).await;
    let runtimes = &page["data"]["runtimes"];
    assert_eq!(runtimes["pageInfo"]["hasNextPage"], true, "{page}");
    let names: Vec<_> = runtimes["edges"].as_array().unwrap().iter().map(|edge| edge["node"]["name"].clone()).collect();
    assert_eq!(names, [json!("kappa-1"), json!("kappa-2")]);

    let next = app.graphql(query, json!({ "after": runtimes["pageInfo"]["endCursor"] })).await;
    let edges = next["data"]["runtimes"]["edges"].as_array().unwrap().clone();
    assert_eq!(edges.len(), 1, "{next}");
    assert_eq!(edges[0]["node"]["id"], ids[2].as_str());
    assert_eq!(next["data"]["runtimes"]["pageInfo"]["hasNextPage"], false);

    let pending = app.graphql(query, json!({ "state": "Pending" })).await;
    assert_eq!(pending["data"]["runtimes"]["edges"].as_array().unwrap().len(), 2, "{pending}");
    let succeeded = app.graphql(query, json!({ "state": "Succeeded" })).await;
    assert_eq!(succeeded["data"]["runtimes"]["edges"], json!([]));

    let too_many = app.graphql("{ runtimes(first: 1000) { edges { cursor } } }", json!({})).await;
    assert_eq!(too_many["errors"][0]["extensions"]["field"], "first", "{too_many}");
}

async fn health_and_metrics(backend: Backend) {
    let app = spawn_app(backend).await;
    let health = app.get("/healthz").await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.json()["database"], "ok");
    // No cluster is configured here: the API works and says so.
    assert_eq!(health.json()["kubernetes"], "unavailable");

    app.post_provision(&provision_body("lambda")).await;
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(r#"provisioner_http_requests_total{method="POST",route="/api/v1/provisions",status="202"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("provisioner_http_request_duration_seconds_bucket"), "{metrics}");
    assert!(metrics.contains(r#"provisioner_operations{type="Provision",state="Pending"} 1"#), "{metrics}");
    // How long the queue has not moved, for on-call: the queued provisioning's age.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let metrics = app.metrics().await;
    let oldest = r#"provisioner_operations_oldest_age_seconds{type="Provision",state="Pending"} "#;
    let age: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix(oldest))
        .unwrap_or_else(|| panic!("{oldest} missing:\n{metrics}"))
        .parse()
        .unwrap();
    assert!((1.0..60.0).contains(&age), "{age}");

    if backend == Backend::Postgres {
        app.database.drop_database().await;
        let health = app.get("/healthz").await;
        assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE, "{}", health.text);
        assert_eq!(health.json()["status"], "unavailable");
        assert_eq!(health.json()["database"], "unavailable");
        // A read that needs the database says which dependency is missing, not 500.
        let answer = app.get(&format!("/api/v1/provisions/{}", uuid::Uuid::now_v7())).await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.text);
        assert_eq!(answer.json()["component"], "database", "{}", answer.text);
    }
}

async fn missing_credentials_fail_fast_and_record_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut body = provision_body("mu");
    body["clusterConfig"]["credentialId"] = json!("cred-unknown");
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let error = &answer.json();
    assert_eq!(error["field"], "clusterConfig.credentialId");
    assert!(error["detail"].as_str().unwrap().contains("does not exist"), "{error}");

    let mut body = provision_body("mu");
    body["clusterConfig"]["credentialId"] = json!("cred-gcp-1");
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    assert!(answer.json()["detail"].as_str().unwrap().contains("gcp_service_account"), "{}", answer.text);

    app.auth.set_unavailable(true);
    let requests_before = app.auth.credential_requests();
    let answer = app.post_provision(&provision_body("mu")).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.text);
    let error = &answer.json();
    assert_eq!(error["component"], "auth-service", "{error}");
    let message = error["detail"].as_str().unwrap();
    assert!(message.starts_with("auth-service is unavailable: no answer"), "{message}");
    assert!(!message.contains("http://") && !message.contains("127.0.0.1"), "an internal address: {message}");
    assert_eq!(message.matches("unavailable").count(), 1, "{message}");
    // Retried a bounded number of times before answering.
    assert!(app.auth.credential_requests() - requests_before >= 1);

    assert_eq!(runtimes_recorded(&app).await, 0);
    app.auth.set_unavailable(false);
    assert_eq!(app.post_provision(&provision_body("mu")).await.status, StatusCode::ACCEPTED);
}

/// A value from auth-service that could inject lines into the AWS profile the runner writes (or a GCP key that is
/// not a service account's) is refused at request time, naming the field, and nothing is recorded.
async fn injected_credential_values_are_refused_and_record_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let role = "arn:aws:iam::123456789012:role/x";
    for (credential, field) in [
        (json!({"type": "aws_assume_role", "roleArn": format!("{role}\ncredential_process = /bin/sh")}), "roleArn"),
        (
            json!({"type": "aws_assume_role", "roleArn": role, "externalId": "id\ncredential_process = sh"}),
            "externalId",
        ),
        (
            json!({"type": "aws_access_key", "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "s", "region": "eu-west-1\nx"}),
            "region",
        ),
    ] {
        app.auth.add_credential("cred-aws-1", credential);
        let answer = app.post_provision(&provision_body("injected")).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
        let error = &answer.json();
        assert_eq!(error["field"], "clusterConfig.credentialId", "{error}");
        let message = error["detail"].as_str().unwrap();
        assert!(message.contains(&format!("has an invalid {field}")), "{field}: {message}");
        assert!(!message.contains("credential_process"), "the value is not echoed: {message}");
    }
    app.auth.add_credential(
        "cred-gcp-1",
        json!({"type": "gcp_service_account", "projectId": "my-project-1",
               "serviceAccountKey": {"type": "external_account", "credential_source": {"executable": {"command": "sh"}}}}),
    );
    // (An AWS cluster's body: the credential is checked before whether it fits the topology.)
    let mut body = provision_body("injected");
    body["clusterConfig"]["credentialId"] = json!("cred-gcp-1");
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    assert!(answer.text.contains("has an invalid serviceAccountKey"), "{}", answer.text);
    assert_eq!(runtimes_recorded(&app).await, 0);
}

/// A request that names a tenant (Kyma's `Tenant` header) creates runtimes of that tenant and sees no other:
/// another tenant's runtime and operations are not found on every path of both APIs, and nothing of them
/// changes; a request without the header sees every runtime.
async fn a_tenant_sees_and_changes_only_its_own_runtimes(backend: Backend) {
    let app = spawn_app(backend).await;
    // Each tenant builds with a credential of its own: auth-service serves a tenant no other.
    for tenant in ["tenant-a", "tenant-b"] {
        app.auth.add_tenant_credential(tenant, &format!("cred-aws-{tenant}"), aws_credential());
    }
    let provision = async |name: &str, tenant: &[(&str, &str)]| {
        let mut body = provision_body(name);
        if let [(_, tenant)] = tenant {
            body["clusterConfig"]["credentialId"] = json!(format!("cred-aws-{tenant}"));
        }
        let accepted = app.request("POST", "/api/v1/provisions", Some(&body), tenant).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
        let accepted = accepted.json();
        (accepted["id"].as_str().unwrap().to_owned(), accepted["operationId"].as_str().unwrap().to_owned())
    };
    let (a, tenant_b) = ([("Tenant", "tenant-a")], [("Tenant", "tenant-b")]);
    let (runtime_a, _) = provision("tenant-a-runtime", &a).await;
    let (runtime_b, operation_b) = provision("tenant-b-runtime", &tenant_b).await;
    let (runtime_c, _) = provision("no-tenant-runtime", &[]).await;

    let as_a = async |method: &str, path: String| app.request(method, &path, None, &a).await;
    assert_eq!(as_a("GET", format!("/api/v1/provisions/{runtime_a}")).await.status, StatusCode::OK);
    for (method, path) in [
        ("GET", format!("/api/v1/provisions/{runtime_b}")),
        ("GET", format!("/api/v1/provisions/{runtime_c}")),
        ("GET", format!("/api/v1/provisions/{runtime_b}/operations")),
        ("GET", format!("/api/v1/provisions/{runtime_b}/kubeconfig")),
        ("GET", format!("/api/v1/provisions/{runtime_b}/logs")),
        ("GET", format!("/api/v1/operations/{operation_b}")),
        ("GET", format!("/api/v1/operations/{operation_b}/logs")),
        ("POST", format!("/api/v1/operations/{operation_b}/cancel")),
        ("POST", format!("/api/v1/provisions/{runtime_b}/hibernate")),
        ("DELETE", format!("/api/v1/provisions/{runtime_b}")),
    ] {
        let answer = as_a(method, path.clone()).await;
        assert_eq!(
            (answer.status, answer.json()["code"].clone()),
            (StatusCode::NOT_FOUND, json!("not_found")),
            "{method} {path}: {}",
            answer.text
        );
    }
    let listed = |answer: Value| -> Vec<String> {
        answer["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|runtime| runtime["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(listed(as_a("GET", "/api/v1/provisions".to_owned()).await.json()), std::slice::from_ref(&runtime_a));

    let graphql = async |query: &str, variables: Value| {
        let body = json!({ "query": query, "variables": variables });
        app.request("POST", "/graphql", Some(&body), &a).await.json()
    };
    let status = graphql(
        "query($id: String!) { runtimeStatus(id: $id) { lastOperationStatus { id } } }",
        json!({ "id": runtime_b }),
    )
    .await;
    assert_eq!(status["errors"][0]["extensions"]["code"], "NOT_FOUND", "{status}");
    let cancel =
        graphql("mutation($id: String!) { cancelOperation(id: $id) { id } }", json!({ "id": operation_b })).await;
    assert_eq!(cancel["errors"][0]["extensions"]["code"], "NOT_FOUND", "{cancel}");
    let runtimes = graphql("{ runtimes { edges { node { id } } } }", json!({})).await;
    assert_eq!(runtimes["data"]["runtimes"]["edges"], json!([{ "node": { "id": runtime_a } }]), "{runtimes}");

    // Nothing of tenant-b's changed, and it sees its own.
    let b_status = app.request("GET", &format!("/api/v1/operations/{operation_b}"), None, &tenant_b).await.json();
    assert_eq!(b_status["status"], "queued", "{b_status}");
    let everyone = listed(app.get("/api/v1/provisions").await.json());
    assert_eq!(everyone, [runtime_a, runtime_b, runtime_c], "a request without a tenant sees every runtime");

    let refused = app.request("GET", "/api/v1/provisions", None, &[("Tenant", "a/../b")]).await;
    assert_eq!((refused.status, refused.json()["field"].clone()), (StatusCode::BAD_REQUEST, json!("Tenant")));
}

/// A credential is resolved within the request's tenant. Naming another tenant's credential answers exactly as
/// naming one that does not exist, over both APIs: status, headers and body byte for byte, apart from the ids the
/// caller sent (credential and request ids of one length, so that even the lengths compare). The tenant's own
/// credential builds, and auth-service was asked with the request's tenant every time.
async fn another_tenants_credential_answers_as_an_unknown_one(backend: Backend) {
    let app = spawn_app(backend).await;
    app.auth.add_tenant_credential("tenant-a", "cred-of-tenant-a", aws_credential());
    app.auth.add_tenant_credential("tenant-b", "cred-of-tenant-b", aws_credential());
    let ask = async |graphql: bool, credential: &str, request_id: &str| {
        let (path, body) = if graphql {
            let mut input = provision_input("shop");
            input["clusterConfig"]["credentialId"] = json!(credential);
            let query = "mutation($config: ProvisionRuntimeInput!) { provisionRuntime(config: $config) { id } }";
            ("/graphql", json!({ "query": query, "variables": { "config": input } }))
        } else {
            let mut body = provision_body("shop");
            body["clusterConfig"]["credentialId"] = json!(credential);
            ("/api/v1/provisions", body)
        };
        let headers = [("Tenant", "tenant-a"), ("X-Request-Id", request_id)];
        let answer = app.request("POST", path, Some(&body), &headers).await;
        let headers: Vec<(String, String)> = (answer.headers.iter())
            .filter(|(name, _)| name.as_str() != "x-request-id")
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect();
        let text = answer.text.replace(credential, "<credential>").replace(request_id, "<request>");
        (answer.status, headers, text)
    };
    for graphql in [false, true] {
        let others = ask(graphql, "cred-of-tenant-b", "req-others-00001").await;
        let unknown = ask(graphql, "cred-of-nobody-x", "req-unknown-0001").await;
        assert_eq!(others, unknown, "graphql: {graphql}");
        assert!(unknown.2.contains(r#"credential \"<credential>\" does not exist in auth-service"#), "{}", unknown.2);
    }
    let (status, _, rest) = ask(false, "cred-of-nobody-x", "req-unknown-0002").await;
    let rest: Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{rest}");
    assert_eq!(
        (&rest["code"], &rest["field"], &rest["errors"][0]["reason"]),
        (&json!("invalid_input"), &json!("clusterConfig.credentialId"), &json!("not_found")),
        "{rest}"
    );
    assert_eq!(runtimes_recorded(&app).await, 0);

    let (status, _, own) = ask(false, "cred-of-tenant-a", "req-own-00000001").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{own}");
    let asked = app.auth.tenants();
    assert_eq!(asked, vec![Some("tenant-a".to_owned()); 6]);
}

/// A GCP credential builds only in its own project or in one it lists in `projectIds` (the runner builds in the
/// request's project with the credential's key): another project answers 400 naming `clusterConfig.gcp.projectId`
/// and records nothing.
async fn a_gcp_credential_builds_only_in_its_projects(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut body = gke_body("elsewhere");
    body["clusterConfig"]["gcp"]["projectId"] = json!("their-project-2");
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    let error = &answer.json()["errors"][0];
    assert_eq!(
        (&error["field"], &error["reason"]),
        (&json!("clusterConfig.gcp.projectId"), &json!("conflict")),
        "{error}"
    );
    assert_eq!(
        error["message"],
        r#"credential "cred-gcp-1" is for GCP project "my-project-1" and does not list "their-project-2" in its projectIds"#
    );
    assert_eq!(runtimes_recorded(&app).await, 0);

    let mut listing = gcp_credential("my-project-1");
    listing["projectIds"] = json!(["their-project-2"]);
    app.auth.add_credential("cred-gcp-1", listing);
    let answer = app.post_provision(&body).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
    let answer = app.post_provision(&gke_body("at-home")).await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "its own project: {}", answer.text);
}

on_both_databases!(
    another_tenants_credential_answers_as_an_unknown_one,
    a_gcp_credential_builds_only_in_its_projects,
    a_tenant_sees_and_changes_only_its_own_runtimes,
    injected_credential_values_are_refused_and_record_nothing,
    missing_credentials_fail_fast_and_record_nothing,
    rest_provisioning_is_queued_and_both_apis_agree,
    graphql_provisioning_is_visible_over_rest,
    the_worker_disk_size_is_optional_in_both_apis,
    invalid_input_names_the_field_in_both_apis,
    malformed_bodies_are_refused_clearly,
    deprovisioning_while_provisioning_is_active_conflicts,
    names_are_unique_among_live_runtimes_even_under_concurrency,
    unknown_and_malformed_ids,
    kubeconfig_and_logs_conflict_before_the_run,
    idempotency_key_replays_the_first_answer,
    idempotency_keys_are_per_caller_and_expire,
    operations_survive_a_restart,
    runtimes_are_paginated_and_filtered_by_state,
    health_and_metrics,
);

#[tokio::test]
async fn unknown_paths_and_methods_answer_json_errors() {
    let app = spawn_app(Backend::Sqlite).await;
    let answer = app.get("/api/v1/no-such-thing").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.json()["code"], "not_found");
    assert_eq!(answer.json()["detail"], "no such path: /api/v1/no-such-thing");
    let answer = app.get("/api/v1/problems/no_such_code").await;
    assert_eq!(
        (answer.status, &answer.json()["code"]),
        (StatusCode::NOT_FOUND, &json!("not_found")),
        "{}",
        answer.text
    );

    let answer = call(&app.app.router, Request::put("/api/v1/provisions").body(Body::empty()).unwrap()).await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{}", answer.text);
    assert_eq!(answer.json()["code"], "method_not_allowed");
    assert!(answer.headers.contains_key("allow"), "405 names the allowed methods");
}

#[tokio::test]
async fn the_playground_and_its_assets_are_served_on_get() {
    let assets = test_support::browser::playground_assets_dir().display().to_string();
    let app = spawn_app_with(Backend::Sqlite, &[("APP_PLAYGROUND_ASSETS_DIR", &assets)], None).await;
    let answer = app.get("/graphql").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert!(answer.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    // Every script from this origin, and the policy forbids any other.
    let policy = answer.headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'self'; script-src 'self';"), "{policy}");
    for script in ["graphiql.min.js", "graphql-ws.min.js", "playground.js"] {
        let path = format!("/playground/assets/{script}");
        assert!(answer.text.contains(&format!(r#"<script src="{path}">"#)), "{}", answer.text);
        let asset = app.get(&path).await;
        assert_eq!(asset.status, StatusCode::OK, "{path}");
        assert!(asset.headers["content-type"].to_str().unwrap().starts_with("text/javascript"));
    }
    assert_eq!(app.get("/playground/assets/..%2Fsecret").await.status, StatusCode::NOT_FOUND);
    let reference = app.get("/api/v1/docs").await;
    assert_eq!(reference.status, StatusCode::OK);
    assert!(reference.text.contains(r#"{"openapi":"/api/v1/openapi.json"}"#), "{}", reference.text);
    let root = app.get("/").await;
    assert_eq!(root.status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(root.headers["location"], "/graphql");
}

/// SQLite in WAL mode survives a process killed in the middle of its writes: the service (a child process) takes
/// provisioning requests from four clients at once and is SIGKILLed at random moments (fixed seed), ten times;
/// afterwards the file opens, passes `PRAGMA integrity_check`, is still in WAL mode, and holds every operation that
/// was answered 202.
#[tokio::test]
async fn sqlite_keeps_every_committed_operation_through_kills() {
    provisioner::install_crypto_provider();
    let folder = tempfile::tempdir().unwrap();
    let auth = test_support::auth_service::FakeAuthService::start(folder.path()).await;
    let database = test_support::TestDatabase::create(Backend::Sqlite).await;
    let environment = test_support::test_environment(&database.url, &auth, &[("APP_LOG_FORMAT", "json")]);
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(5)).build().unwrap();
    let mut random = test_support::Seeded(0x00c0_ffee_5eed);
    let mut accepted = Vec::new();
    let mut sent = 0;
    for cycle in 0..10 {
        let mut environment = environment.clone();
        environment.insert("APP_METRICS_ADDRESS".into(), format!("127.0.0.1:{}", test_control_plane::free_port()));
        let mut service = test_support::server_process::start_service(environment).await;
        let url = format!("http://127.0.0.1:{}/api/v1/provisions", service.port());
        // Four clients write until the process is gone; it is killed while their requests are in flight.
        let clients: Vec<_> = (0..4)
            .map(|client| {
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(async move {
                    let (mut sent, mut accepted) = (0, Vec::new());
                    for index in 0.. {
                        let body = provision_body(&format!("wal-{cycle}-{client}-{index}"));
                        let Ok(answer) = http.post(&url).json(&body).send().await else { break };
                        sent += 1;
                        if answer.status() == reqwest::StatusCode::ACCEPTED
                            && let Ok(body) = answer.json::<Value>().await
                        {
                            accepted.push(body["operationId"].as_str().unwrap().to_owned());
                        }
                    }
                    (sent, accepted)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100 + random.below(700))).await;
        service.kill();
        for client in clients {
            let (client_sent, client_accepted) = client.await.unwrap();
            sent += client_sent;
            accepted.extend(client_accepted);
        }
    }

    use sea_orm::ConnectionTrait;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    let query = |sql: &str| sea_orm::Statement::from_string(sea_orm::DbBackend::Sqlite, sql.to_owned());
    let row = db.query_one_raw(query("PRAGMA integrity_check")).await.unwrap().unwrap();
    assert_eq!(row.try_get_by_index::<String>(0).unwrap(), "ok");
    let row = db.query_one_raw(query("PRAGMA journal_mode")).await.unwrap().unwrap();
    assert_eq!(row.try_get_by_index::<String>(0).unwrap(), "wal");
    let stored: std::collections::HashSet<String> = db
        .query_all_raw(query("SELECT id FROM operation"))
        .await
        .unwrap()
        .iter()
        .map(|row| row.try_get_by_index::<uuid::Uuid>(0).unwrap().to_string())
        .collect();
    let lost: Vec<_> = accepted.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(lost.is_empty(), "{} of {} accepted operations are gone: {lost:?}", lost.len(), accepted.len());
    assert!(accepted.len() > 40, "too few writes to mean anything: {} of {sent}", accepted.len());
    println!(
        "SQLite through 10 SIGKILLs: {sent} requests answered, {} accepted, all stored, integrity ok",
        accepted.len()
    );
}

/// How many runtimes the service has recorded, deprovisioned ones and previews included.
async fn runtimes_recorded(app: &TestApp) -> usize {
    let everything = provisioner::service::RuntimeQuery::everything();
    app.app.service.runtimes(everything, None, Some(100)).await.unwrap().items.len()
}
