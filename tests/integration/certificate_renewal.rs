//! Certificate renewals through the engine on the real test control plane (the test plays kubelet and
//! terraform-runner): a vanilla runtime's renewal is a run of its own, `renewal-<id>`, whose runner.json asks the
//! control plane to renew (the request named by the operation) and upgrades nothing; EKS and GKE are refused as
//! the cloud's, and so is a runtime without a cluster; a refused request records nothing.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use test_support::engine::Engine;
use test_support::{Backend, eks_body, on_both_databases, provision_body};

const WAIT: Duration = Duration::from_secs(60);
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";

async fn renew(engine: &Engine, runtime_id: &str) -> (StatusCode, Value) {
    let path = format!("/api/v1/runtimes/{runtime_id}/certificates/renewal");
    let answer = engine.app.request("POST", &path, None, &[]).await;
    (answer.status, serde_json::from_str(&answer.text).unwrap_or(Value::Null))
}

async fn operations_of(engine: &Engine, runtime_id: &str) -> usize {
    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/operations")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    answer.json()["operations"].as_array().unwrap().len()
}

async fn a_vanilla_renewal_is_a_run_that_asks_the_control_plane_and_the_clouds_are_refused(backend: Backend) {
    let (engine, process) = Engine::start(backend, &[]).await;
    let runtime_id = engine.provisioned(&provision_body("renewed"), KUBECONFIG).await;

    let (status, renewal) = renew(&engine, &runtime_id).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{renewal}");
    assert_eq!(renewal["operation"], "renew_certificates", "{renewal}");
    let operation_id = renewal["id"].as_str().unwrap().to_owned();
    let (again, repeated) = renew(&engine, &runtime_id).await;
    assert_eq!((again, &repeated["id"]), (StatusCode::ACCEPTED, &renewal["id"]), "a repeated request gets the same");
    let runtime = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(runtime["state"], "Updating");

    // Its own Job, whose runner.json asks for the renewal named by the operation, on the three nodes.
    engine.wait_for_stage(&operation_id, "WaitForJob", WAIT).await;
    let job = format!("renewal-{runtime_id}");
    let manifest: Value =
        serde_json::from_str(&engine.config_map_file(&format!("{job}-config"), "runner.json").await).unwrap();
    assert_eq!(manifest["certificateRenewal"], json!({ "request": operation_id, "lastNode": 2 }), "{manifest:#}");
    assert!(manifest.get("controlPlaneUpgrade").is_none(), "a renewal upgrades nothing: {manifest:#}");
    assert_eq!(manifest["action"], "apply");
    engine.runner_succeeds(&job, Some((&format!("provision-{runtime_id}-outputs"), KUBECONFIG))).await;
    engine.wait_for_stage(&operation_id, "Done", WAIT).await;
    let operation = engine.app.get(&format!("/api/v1/operations/{operation_id}")).await.json();
    assert_eq!((&operation["status"], &operation["message"]), (&json!("succeeded"), &json!("Certificates renewed")));
    let runtime = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    assert_eq!(runtime["state"], "Ready");

    // EKS renews its own, and GraphQL says so as REST does; nothing is recorded.
    let eks = engine.provisioned(&eks_body("renewed-eks"), KUBECONFIG).await;
    let (status, refused) = renew(&engine, &eks).await;
    assert_eq!((status, &refused["code"]), (StatusCode::CONFLICT, &json!("managed_by_the_cloud")), "{refused}");
    assert!(refused["detail"].as_str().unwrap().contains("eks"), "{refused}");
    let mutation = json!({ "query": format!("mutation {{ renewCertificates(id: \"{eks}\") {{ id }} }}") });
    let answer = engine.app.request("POST", "/graphql", Some(&mutation), &[]).await.json();
    assert_eq!(answer["errors"][0]["extensions"]["error_reason"], "managed_by_the_cloud", "{answer}");
    assert_eq!(operations_of(&engine, &eks).await, 1);

    // A runtime whose provisioning failed has no cluster to renew.
    let (failed, provisioning) = engine.provision(&provision_body("renewed-never")).await;
    engine.wait_for_stage(&provisioning, "WaitForJob", WAIT).await;
    engine.runner_fails(&format!("provision-{failed}"), "the cloud said no").await;
    engine.wait_for_stage(&provisioning, "Done", WAIT).await;
    let (status, refused) = renew(&engine, &failed).await;
    assert_eq!((status, &refused["code"]), (StatusCode::CONFLICT, &json!("not_ready")), "{refused}");
    assert_eq!(operations_of(&engine, &failed).await, 1);
    process.stop().await;
}

on_both_databases!(a_vanilla_renewal_is_a_run_that_asks_the_control_plane_and_the_clouds_are_refused);
