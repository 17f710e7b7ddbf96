//! Property-based fuzzing of both APIs through the in-process router (SQLite, authentication off, the fake
//! auth-service): GraphQL queries and mutations with random arguments, and REST bodies of random JSON. Whatever
//! comes in, the answer is never a 5xx (nor a GraphQL error with `error_code` 500 or more), never a panic, and
//! always JSON.
//!
//! Deterministic: a fixed RNG seed, `PROPTEST_CASES` cases per property (256 by default). Each property prints
//! how many cases it tried (`cargo test --test integration fuzz_api -- --nocapture`).

use axum::body::Body;
use axum::http::Request;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{Value, json};
use test_support::{Backend, TestApp, call, provision_body, provision_input, spawn_app};

const DEFAULT_CASES: u32 = 256;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(DEFAULT_CASES)
}

/// Runs `property` on `cases()` values of `strategy` against one app, with a fixed seed; a failing case is
/// shrunk and reported by proptest. Returns after printing the number of cases tried.
fn check<S, F>(name: &str, strategy: S, property: F)
where
    S: Strategy,
    S::Value: std::fmt::Debug,
    F: Fn(&TestApp, S::Value) -> futures::future::LocalBoxFuture<'_, Result<(), TestCaseError>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let app = runtime.block_on(spawn_app(Backend::Sqlite));
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        // Shrinking replays requests against the same app; keep it bounded.
        max_shrink_iters: 256,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let tried = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&strategy, |value| {
        tried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        runtime.block_on(property(&app, value))
    });
    println!("fuzz_api {name}: {} cases tried", tried.into_inner());
    if let Err(error) = result {
        panic!("{name}: {error}");
    }
}

/// Any JSON value, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |number| serde_json::Number::from_f64(number).map(Value::Number)),
        any_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(any_text(), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Strings that are random, almost valid, or in the formats the service parses (ids, cursors, versions).
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        1 => "[a-z][a-z0-9-]{0,30}",
        1 => "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        1 => "[0-9]{1,6}\\.[0-9]{1,6}",
        1 => "[0-9./a-z-]{0,20}",
        1 => Just(String::new()),
        1 => prop::collection::vec(any::<char>(), 200..400).prop_map(|chars| chars.into_iter().collect()),
    ]
}

/// A value for one field of a provisioning request: plausible for the field's type or anything at all.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => any_text().prop_map(Value::String),
        2 => prop_oneof![any::<i32>().prop_map(Value::from), (-10i64..600).prop_map(Value::from)],
        1 => prop::collection::vec(any_text().prop_map(Value::String), 0..8).prop_map(Value::Array),
        2 => any_json(),
    ]
}

/// Every path of a provisioning request that a mutation may replace or remove.
const FIELDS: &[&str] = &[
    "/runtimeInput",
    "/runtimeInput/name",
    "/runtimeInput/description",
    "/runtimeInput/labels",
    "/runtimeInput/labels/team",
    "/clusterConfig",
    "/clusterConfig/topology",
    "/clusterConfig/credentialId",
    "/clusterConfig/region",
    "/clusterConfig/kubernetesVersion",
    "/clusterConfig/environment",
    "/clusterConfig/controlPlane",
    "/clusterConfig/controlPlane/count",
    "/clusterConfig/controlPlane/machineType",
    "/clusterConfig/workerPool",
    "/clusterConfig/workerPool/machineType",
    "/clusterConfig/workerPool/minSize",
    "/clusterConfig/workerPool/maxSize",
    "/clusterConfig/workerPool/diskSizeGb",
    "/clusterConfig/network",
    "/clusterConfig/network/vpcCidr",
    "/clusterConfig/network/podCidr",
    "/clusterConfig/network/serviceCidr",
    "/clusterConfig/aws",
    "/clusterConfig/aws/zones",
    "/clusterConfig/gcp",
];

/// A valid request (REST or GraphQL spelling) with one to four fields replaced by random values, removed, or
/// given a random extra sibling.
fn shaped_request(graphql: bool) -> impl Strategy<Value = Value> {
    let name = "[a-z][a-z0-9-]{0,23}";
    let mutation = (prop::sample::select(FIELDS), 0..8u8, field_value(), any_text());
    (name, prop::collection::vec(mutation, 1..5)).prop_map(move |(name, mutations)| {
        let mut request = if graphql { provision_input(&name) } else { provision_body(&name) };
        for (path, kind, value, key) in mutations {
            let (parent, last) = path.rsplit_once('/').unwrap();
            let Some(Value::Object(parent)) = request.pointer_mut(parent) else {
                continue;
            };
            match kind {
                0 => {
                    parent.remove(last);
                }
                1 => {
                    parent.insert(key, value);
                }
                _ => {
                    parent.insert(last.to_owned(), value);
                }
            }
        }
        request
    })
}

/// The answer is JSON, not a 5xx, and (for GraphQL) carries no error with `error_code` 500 or more.
fn check_answer(answer: &test_support::Answer, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(answer.status.as_u16() < 500, "{what}: answered {}: {}", answer.status, answer.text);
    let body: Value = serde_json::from_str(&answer.text)
        .map_err(|error| TestCaseError::fail(format!("{what}: not JSON ({error}): {}", answer.text)))?;
    if let Some(errors) = body.get("errors").and_then(Value::as_array) {
        for error in errors {
            let extensions = &error["extensions"];
            prop_assert!(extensions["code"] != "INTERNAL", "{what}: internal error: {body}");
            let code = extensions["error_code"].as_i64().unwrap_or(0);
            prop_assert!(code < 500, "{what}: error_code {code}: {body}");
        }
    }
    Ok(())
}

async fn graphql(app: &TestApp, query: &str, variables: Value) -> Result<(), TestCaseError> {
    let body = json!({ "query": query, "variables": variables });
    let answer = app.request("POST", "/graphql", Some(&body), &[]).await;
    check_answer(&answer, &format!("{query} with {variables}"))
}

#[test]
fn graphql_runtime_status_with_random_ids() {
    check("runtimeStatus(id)", any_json(), |app, id| {
        Box::pin(async move {
            let query = "query($id: String!) { runtimeStatus(id: $id) { lastOperationStatus { id state } } }";
            graphql(app, query, json!({ "id": id })).await
        })
    });
}

#[test]
fn graphql_runtime_operation_status_with_random_ids() {
    check("runtimeOperationStatus(id)", prop_oneof![any_text().prop_map(Value::String), any_json()], |app, id| {
        Box::pin(async move {
            let query =
                "query($id: String!) { runtimeOperationStatus(id: $id) { id state message lastError { reason } } }";
            graphql(app, query, json!({ "id": id })).await
        })
    });
}

#[test]
fn graphql_runtimes_with_random_arguments() {
    let first = prop_oneof![any::<i32>().prop_map(Value::from), (-5i64..200).prop_map(Value::from), any_json()];
    let after = prop_oneof![any_text().prop_map(Value::String), Just(Value::Null), any_json()];
    let state = prop_oneof![
        prop::sample::select(vec!["PENDING", "IN_PROGRESS", "SUCCEEDED", "FAILED"]).prop_map(Value::from),
        Just(Value::Null),
        any_json(),
    ];
    check("runtimes(first, after, state)", (first, after, state), |app, (first, after, state)| {
        Box::pin(async move {
            let query = "query($first: Int, $after: String, $state: OperationState) { runtimes(first: $first, \
                         after: $after, state: $state) { edges { cursor node { id name } } pageInfo { hasNextPage } } }";
            graphql(app, query, json!({ "first": first, "after": after, "state": state })).await
        })
    });
}

#[test]
fn graphql_provision_runtime_with_random_input() {
    let config = prop_oneof![3 => shaped_request(true), 1 => any_json()];
    check("provisionRuntime(config)", config, |app, config| {
        Box::pin(async move {
            let mutation =
                "mutation($config: ProvisionRuntimeInput!) { provisionRuntime(config: $config) { id state } }";
            graphql(app, mutation, json!({ "config": config })).await
        })
    });
}

#[test]
fn graphql_random_request_bodies() {
    check("POST /graphql (random JSON body)", any_json(), |app, body| {
        Box::pin(async move {
            let answer = app.request("POST", "/graphql", Some(&body), &[]).await;
            check_answer(&answer, &format!("POST /graphql {body}"))
        })
    });
}

#[test]
fn rest_post_with_random_bodies() {
    let body = prop_oneof![3 => shaped_request(false), 1 => any_json()];
    check("POST /api/v1/provisions", body, |app, body| {
        Box::pin(async move {
            let answer = app.post_provision(&body).await;
            check_answer(&answer, &format!("POST /api/v1/provisions {body}"))
        })
    });
}

#[test]
fn rest_random_ids_and_raw_bodies() {
    // Not empty: `/api/v1/provisions/` matches no route, and axum's 404 for an unknown path has an empty body.
    // Percent-encoded: text, and bytes that are not UTF-8 once decoded.
    let id = prop_oneof!["[^/?#]{1,40}".prop_map(String::into_bytes), prop::collection::vec(any::<u8>(), 1..40)];
    let raw = prop::collection::vec(any::<u8>(), 0..200);
    check("REST ids and raw bodies", (id, raw), |app, (id, raw)| {
        Box::pin(async move {
            let encoded: String = id.iter().map(|byte| format!("%{byte:02X}")).collect();
            for path in [
                format!("/api/v1/provisions/{encoded}"),
                format!("/api/v1/provisions/{encoded}/logs?tailLines={encoded}"),
                format!("/api/v1/provisions/{encoded}/kubeconfig"),
            ] {
                let answer = app.get(&path).await;
                check_answer(&answer, &format!("GET {path}"))?;
            }
            let path = format!("/api/v1/provisions/{encoded}");
            let answer = app.delete(&path).await;
            check_answer(&answer, &format!("DELETE {path}"))?;
            for path in ["/api/v1/provisions", "/graphql"] {
                let request = Request::builder()
                    .method("POST")
                    .uri(path)
                    .header("content-type", "application/json")
                    .body(Body::from(raw.clone()))
                    .unwrap();
                let answer = call(&app.app.router, request).await;
                check_answer(&answer, &format!("POST {path} with raw bytes {raw:?}"))?;
            }
            Ok(())
        })
    });
}

/// A Runtime resource's spec made of a mutated request (the API server would already refuse much of it): reading
/// it, turning it into the provisioning it asks for and the upgrade from the example's configuration, and the
/// service's checks never panic, whatever the reconciler is handed.
#[test]
fn runtime_resource_specs_never_panic_the_reconcilers_conversion() {
    use provisioner::declarative::convert::{provision_request, upgrade_to};
    use provisioner::declarative::resource::RuntimeResource;
    use provisioner::domain::{ProvisionRequest, Topology};
    use provisioner::service::ValidationPolicy;

    let current = ProvisionRequest::example_named(Topology::VanillaKubeadm, "current").cluster_config;
    let config = Config { cases: cases(), failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let (tried, read) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let adopt = prop_oneof![
        3 => Just(Value::Null),
        1 => "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}".prop_map(Value::String),
        1 => any_json(),
    ];
    let result = runner.run(&(shaped_request(false), any::<bool>(), adopt), |(request, hibernated, adopt)| {
        tried.set(tried.get() + 1);
        let mut spec = request["clusterConfig"].clone();
        if let Value::Object(spec) = &mut spec {
            spec.insert("description".into(), request["runtimeInput"]["description"].clone());
            spec.insert("labels".into(), request["runtimeInput"]["labels"].clone());
            spec.insert("hibernated".into(), Value::Bool(hibernated));
            spec.insert("adopt".into(), adopt);
        }
        let name = request["runtimeInput"]["name"].clone();
        let object = json!({
            "apiVersion": "provisioner.kubeopera.io/v1alpha1", "kind": "Runtime",
            "metadata": { "name": name, "namespace": "team-a" }, "spec": spec,
        });
        if let Ok(resource) = serde_json::from_value::<RuntimeResource>(object) {
            read.set(read.get() + 1);
            let request = provision_request(resource.metadata.name.as_deref().unwrap_or_default(), &resource.spec);
            let _ = ValidationPolicy::DEFAULT.validate(&request);
            let _ = upgrade_to(&current, &resource.spec.cluster);
        }
        Ok(())
    });
    println!("fuzz_api runtime resource specs: {} cases tried, {} read as a Runtime", tried.get(), read.get());
    if let Err(error) = result {
        panic!("runtime resource specs: {error}");
    }
}
