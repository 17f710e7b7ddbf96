//! A run that failed on the cloud's answer, through the real worker: the class the runner reported is the
//! operation's reason, its component is the cloud, the message names the resource, in both APIs; once a person
//! fixed the cause, the operation is retried. A deprovisioning that found resources left in the cloud fails as
//! `leftovers`, naming each.

use std::time::Duration;

use axum::http::StatusCode;
use runner_contract::failure::{
    CloudFailure, CloudFailureClass, EXIT_CLOUD_FAILURE, EXIT_LEFTOVERS, Leftovers, RunFailure,
};
use runner_contract::plan::PlanSummary;
use runner_contract::report::RunReport;
use serde_json::json;
use test_support::engine::Engine;
use test_support::{Backend, provision_body};

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_run_that_failed_on_a_quota_shows_the_clouds_reason_and_can_be_retried() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let (runtime_id, operation) = engine.provision(&provision_body("quota")).await;
    engine.wait_for_stage(&operation, "WaitForJob", WAIT).await;
    let message = "`tofu apply` failed (exit status: 1): Error: creating EC2 VPC: api error VpcLimitExceeded: The \
                   maximum number of VPCs has been reached. (at module.vpc.aws_vpc.this)";
    let failure = RunFailure {
        message: message.to_owned(),
        cloud: CloudFailure {
            class: CloudFailureClass::QuotaExceeded,
            address: Some("module.vpc.aws_vpc.this".to_owned()),
        },
    };
    let job = format!("provision-{runtime_id}");
    engine.runner_exits(&job, EXIT_CLOUD_FAILURE, &serde_json::to_string(&failure).unwrap()).await;

    engine.wait_for_stage(&operation, "Done", WAIT).await;
    let expected = json!({ "errMessage": message, "reason": "quota_exceeded", "component": "cloud" });
    let shown = engine.app.get(&format!("/api/v1/operations/{operation}")).await.json();
    assert_eq!(shown["lastError"], expected, "{shown}");
    let response = engine
        .app
        .graphql(
            "query($id: String!) { runtimeOperationStatus(id: $id) { lastError { errMessage reason component } } }",
            json!({ "id": operation }),
        )
        .await;
    assert_eq!(response["data"]["runtimeOperationStatus"]["lastError"], expected, "{response}");

    // The quota was raised: the operation is retried.
    let retry = engine.app.request("POST", &format!("/api/v1/operations/{operation}/retry"), None, &[]).await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "{}", retry.text);
    process.stop().await;
}

#[tokio::test]
async fn a_deprovisioning_that_found_leftovers_fails_naming_them_and_can_be_retried() {
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let runtime_id =
        engine.provisioned(&provision_body("leftovers"), "apiVersion: v1\nkind: Config\nclusters: []\n").await;

    let deprovisioning = engine.app.delete(&format!("/api/v1/provisions/{runtime_id}")).await.json();
    let deprovisioning = deprovisioning["operationId"].as_str().expect("an operation id").to_owned();
    engine.wait_for_stage(&deprovisioning, "WaitForJob", WAIT).await;
    let vpc = "arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-0a1b2c3d4e5f67890";
    let leftovers = Leftovers {
        message: format!("the state is destroyed, but 1 resources carrying the runtime's tag remain: {vpc}"),
        resources: vec![vpc.to_owned()],
    };
    let job = format!("deprovision-{runtime_id}");
    engine.runner_exits(&job, EXIT_LEFTOVERS, &serde_json::to_string(&leftovers).unwrap()).await;

    engine.wait_for_stage(&deprovisioning, "Done", WAIT).await;
    let shown = engine.app.get(&format!("/api/v1/operations/{deprovisioning}")).await.json();
    let expected = json!({ "errMessage": leftovers.message, "reason": "leftovers", "component": "terraform-runner" });
    assert_eq!(shown["lastError"], expected, "{shown}");
    // The runtime is not gone while its resources are not.
    let status = engine.status(&runtime_id).await;
    assert_eq!((&status["operation"], &status["status"]), (&json!("deprovision"), &json!("failed")), "{status}");

    let metrics = engine.app.metrics().await;
    assert!(metrics.contains("provisioner_orphans_found_total{outcome=\"left\"} 1\n"), "{metrics}");

    // The deprovisioning is retried; its run now deletes the VPC itself and reports it.
    let retry = engine.app.request("POST", &format!("/api/v1/operations/{deprovisioning}/retry"), None, &[]).await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "{}", retry.text);
    let retried = retry.json();
    assert_eq!(retried["operation"], "deprovision", "{}", retry.text);
    let retried = retried["id"].as_str().expect("an operation id").to_owned();
    engine.wait_for_stage(&retried, "WaitForJob", WAIT).await;
    let foreign = "arn:aws:ec2:eu-west-1:123456789012:instance/i-0f0e";
    let summary =
        PlanSummary { swept: vec![vpc.to_owned()], foreign: vec![foreign.to_owned()], ..PlanSummary::default() };
    engine.runner_exits(&job, 0, &serde_json::to_string(&RunReport::of_plan(summary)).unwrap()).await;
    engine.wait_for_stage(&retried, "Done", WAIT).await;
    let shown = engine.app.get(&format!("/api/v1/operations/{retried}")).await.json();
    assert_eq!((&shown["planSummary"]["swept"], &shown["planSummary"]["foreign"]), (&json!([vpc]), &json!([foreign])));
    let response = engine
        .app
        .graphql(
            "query($id: String!) { runtimeOperationStatus(id: $id) { state planSummary { swept foreign } } }",
            json!({ "id": retried }),
        )
        .await;
    let status = &response["data"]["runtimeOperationStatus"];
    assert_eq!((&status["state"], &status["planSummary"]["swept"]), (&json!("Succeeded"), &json!([vpc])), "{response}");
    assert_eq!(status["planSummary"]["foreign"], json!([foreign]), "{response}");
    let metrics = engine.app.metrics().await;
    assert!(metrics.contains("provisioner_orphans_found_total{outcome=\"deleted\"} 1\n"), "{metrics}");
    assert!(metrics.contains("provisioner_orphans_found_total{outcome=\"foreign\"} 1\n"), "{metrics}");
    process.stop().await;
}
