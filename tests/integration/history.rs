//! Every run on the record, through both APIs on SQLite and PostgreSQL: a runtime's operations newest first with
//! cursor pagination, each with who asked for it, its timestamps, duration, attempts and its stage timeline
//! (written with each stage); one operation by id; and the runtime list with its filters.

use axum::http::StatusCode;
use provisioner::domain::OperationState;
use provisioner::domain::run::Stage;
use serde_json::{Value, json};
use test_support::{Backend, TestApp, eks_body, on_both_databases, spawn_app};

const OPERATIONS: &str = "query($id: String!, $first: Int, $after: String) {
    runtimeOperations(runtimeID: $id, first: $first, after: $after) {
        edges { cursor node { id operation state requestedBy attempts durationSeconds stages { stage enteredAt } } }
        pageInfo { hasNextPage }
    }
}";

/// A runtime with three operations: a provisioning that went through its stages and succeeded, a failed upgrade,
/// and a queued hibernation. Returns the runtime id and the operation ids, oldest first.
async fn runtime_with_history(app: &TestApp, name: &str) -> (String, [String; 3]) {
    let accepted = app.post_provision(&eks_body(name)).await.json();
    let runtime_id = accepted["id"].as_str().unwrap().to_owned();
    let stages = [Stage::ResolveCredential, Stage::RenderConfig, Stage::CreateJob, Stage::WaitForJob];
    let provision = app.run_queued_operation(&stages, OperationState::Succeeded).await;
    assert_eq!(provision, accepted["operationId"].as_str().unwrap());
    let path = format!("/api/v1/provisions/{runtime_id}");
    assert_eq!(app.patch(&path, &json!({ "workerPool": { "maxSize": 5 } })).await.status, StatusCode::ACCEPTED);
    let upgrade = app.run_queued_operation(&[Stage::ResolveCredential], OperationState::Failed).await;
    let hibernate = app.request("POST", &format!("{path}/hibernate"), None, &[]).await.json();
    (runtime_id, [provision, upgrade, hibernate["operationId"].as_str().unwrap().to_owned()])
}

fn ids(operations: &Value) -> Vec<&str> {
    operations.as_array().unwrap().iter().map(|operation| operation["id"].as_str().unwrap()).collect()
}

async fn a_runtimes_operations_are_listed_newest_first_with_their_record(backend: Backend) {
    let app = spawn_app(backend).await;
    let (runtime_id, [provision, upgrade, hibernate]) = runtime_with_history(&app, "history-a").await;
    let path = format!("/api/v1/provisions/{runtime_id}/operations");

    let all = app.get(&path).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.text);
    let all = all.json();
    assert_eq!(ids(&all["operations"]), [&hibernate, &upgrade, &provision]);
    assert_eq!(all["nextCursor"], Value::Null);
    let [queued, failed, provisioned] = [0, 1, 2].map(|index| all["operations"][index].clone());
    assert_eq!((queued["operation"].as_str(), queued["status"].as_str()), (Some("hibernate"), Some("queued")));
    assert_eq!((failed["operation"].as_str(), failed["status"].as_str()), (Some("upgrade"), Some("failed")));
    assert_eq!(provisioned["status"], "succeeded");
    for operation in [&queued, &failed, &provisioned] {
        assert_eq!(operation["requestedBy"], "system:anonymous", "{operation}");
        assert_eq!(operation["runtimeId"], runtime_id.as_str());
    }
    // A queued operation has not started; a finished one has its times and duration.
    assert_eq!((&queued["startedAt"], &queued["durationSeconds"]), (&Value::Null, &Value::Null));
    assert_eq!(queued["stages"], json!([{ "stage": "Queued", "enteredAt": queued["createdAt"] }]));
    assert_eq!(provisioned["attempts"], 1);
    assert!(provisioned["durationSeconds"].as_f64().unwrap() >= 0.0, "{provisioned}");
    // Compared as times: a time on the second is written without a fraction, which sorts after one with it as text.
    let time = |value: &Value| chrono::DateTime::parse_from_rfc3339(value.as_str().unwrap()).unwrap();
    assert!(time(&provisioned["finishedAt"]) >= time(&provisioned["startedAt"]), "{provisioned}");

    // The stage timeline: every stage entered, in order, each at or after the one before.
    let stages: Vec<&str> =
        provisioned["stages"].as_array().unwrap().iter().map(|entry| entry["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["Queued", "ResolveCredential", "RenderConfig", "CreateJob", "WaitForJob", "Done"]);
    let times: Vec<_> =
        provisioned["stages"].as_array().unwrap().iter().map(|entry| time(&entry["enteredAt"])).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{times:?}");
    let failed_stages: Vec<&str> =
        failed["stages"].as_array().unwrap().iter().map(|entry| entry["stage"].as_str().unwrap()).collect();
    assert_eq!(failed_stages, ["Queued", "ResolveCredential", "Done"]);

    // One operation by id is the same record.
    let one = app.get(&format!("/api/v1/operations/{provision}")).await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.text);
    let mut one = one.json();
    let mut listed = provisioned.clone();
    one.as_object_mut().unwrap().remove("durationSeconds");
    listed.as_object_mut().unwrap().remove("durationSeconds");
    assert_eq!(one, listed);

    // Cursor pagination.
    let page = app.get(&format!("{path}?first=2")).await.json();
    assert_eq!(ids(&page["operations"]), [&hibernate, &upgrade]);
    let cursor = page["nextCursor"].as_str().expect("a next page").to_owned();
    let rest = app.get(&format!("{path}?first=2&after={cursor}")).await.json();
    assert_eq!(ids(&rest["operations"]), [&provision]);
    assert_eq!(rest["nextCursor"], Value::Null);

    // GraphQL: the same, and through the runtime.
    let response = app.graphql(OPERATIONS, json!({ "id": runtime_id, "first": 2 })).await;
    let connection = &response["data"]["runtimeOperations"];
    assert_eq!(connection["pageInfo"]["hasNextPage"], true, "{response}");
    let nodes: Vec<&Value> = connection["edges"].as_array().unwrap().iter().map(|edge| &edge["node"]).collect();
    assert_eq!(nodes.iter().map(|node| node["id"].as_str().unwrap()).collect::<Vec<_>>(), [&hibernate, &upgrade]);
    assert_eq!((nodes[0]["operation"].as_str(), nodes[0]["state"].as_str()), (Some("Hibernate"), Some("Pending")));
    assert_eq!(nodes[1]["requestedBy"], "system:anonymous");
    assert_eq!(nodes[1]["stages"].as_array().unwrap().len(), 3, "{response}");
    let cursor = connection["edges"][1]["cursor"].as_str().unwrap();
    let response = app.graphql(OPERATIONS, json!({ "id": runtime_id, "after": cursor })).await;
    let edges = response["data"]["runtimeOperations"]["edges"].as_array().unwrap().clone();
    assert_eq!(edges.len(), 1, "{response}");
    assert_eq!(edges[0]["node"]["stages"][5]["stage"], "Done");
    let response = app
        .graphql(
            "{ runtimes { edges { node { id operations(first: 1) { edges { node { id operation } } } } } } }",
            json!({}),
        )
        .await;
    let runtime = &response["data"]["runtimes"]["edges"][0]["node"];
    assert_eq!(runtime["operations"]["edges"][0]["node"]["id"], hibernate.as_str(), "{response}");
}

async fn bad_history_requests_are_refused_naming_the_parameter(backend: Backend) {
    let app = spawn_app(backend).await;
    let unknown = uuid::Uuid::now_v7();
    let answer = app.get(&format!("/api/v1/provisions/{unknown}/operations")).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.text);
    assert_eq!(app.get(&format!("/api/v1/operations/{unknown}")).await.status, StatusCode::NOT_FOUND);
    let (runtime_id, _) = runtime_with_history(&app, "history-b").await;
    for (query, field) in [("first=0", "first"), ("first=101", "first"), ("after=nope", "after")] {
        let answer = app.get(&format!("/api/v1/provisions/{runtime_id}/operations?{query}")).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}: {}", answer.text);
        assert_eq!(answer.json()["field"], field, "{query}");
    }
    let answer = app.get("/api/v1/provisions/nope/operations").await;
    assert_eq!(answer.json()["field"], "id", "{}", answer.text);
    let response = app.graphql(OPERATIONS, json!({ "id": unknown.to_string() })).await;
    assert_eq!(response["errors"][0]["extensions"]["code"], "NOT_FOUND", "{response}");
}

async fn runtimes_are_listed_with_filters_by_status_and_label(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut ids_by_name = std::collections::BTreeMap::new();
    for (name, team) in [("list-a", "blue"), ("list-b", "green"), ("list-c", "blue")] {
        let mut body = eks_body(name);
        body["runtimeInput"]["labels"] = json!({ "example.com/team": team });
        let accepted = app.post_provision(&body).await.json();
        ids_by_name.insert(name, accepted["id"].as_str().unwrap().to_owned());
    }
    // list-a's provisioning succeeds; the others stay queued.
    app.run_queued_operation(&[], OperationState::Succeeded).await;

    let names = |answer: &Value| -> Vec<String> {
        answer["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|runtime| runtime["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = app.get("/api/v1/provisions").await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.text);
    let all = all.json();
    assert_eq!(names(&all), ["list-a", "list-b", "list-c"]);
    assert_eq!(all["runtimes"][0]["status"], "succeeded");
    assert_eq!(all["runtimes"][0]["hibernation"]["hibernationPossible"], true);
    assert_eq!(names(&app.get("/api/v1/provisions?status=queued").await.json()), ["list-b", "list-c"]);
    assert_eq!(names(&app.get("/api/v1/provisions?label=example.com/team%3Dblue").await.json()), ["list-a", "list-c"]);
    let both = app.get("/api/v1/provisions?label=example.com/team%3Dblue&status=queued").await.json();
    assert_eq!(names(&both), ["list-c"]);
    let page = app.get("/api/v1/provisions?first=2").await.json();
    assert_eq!(names(&page), ["list-a", "list-b"]);
    let cursor = page["nextCursor"].as_str().unwrap();
    assert_eq!(cursor, ids_by_name["list-b"]);
    let rest = app.get(&format!("/api/v1/provisions?first=2&after={cursor}")).await.json();
    assert_eq!((names(&rest), &rest["nextCursor"]), (vec!["list-c".to_owned()], &Value::Null));

    let response = app
        .graphql(
            "query($label: String) { runtimes(label: $label) { edges { node { name } } } }",
            json!({ "label": "example.com/team=green" }),
        )
        .await;
    assert_eq!(response["data"]["runtimes"]["edges"], json!([{ "node": { "name": "list-b" } }]), "{response}");

    for (query, field) in [("status=sleeping", "status"), ("label=team", "label"), ("label=Bad%20Key%3Dx", "label")] {
        let answer = app.get(&format!("/api/v1/provisions?{query}")).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{query}: {}", answer.text);
        assert_eq!(answer.json()["field"], field, "{query}");
    }
}

on_both_databases!(
    a_runtimes_operations_are_listed_newest_first_with_their_record,
    bad_history_requests_are_refused_naming_the_parameter,
    runtimes_are_listed_with_filters_by_status_and_label,
);
