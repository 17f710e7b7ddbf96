//! Failures on the cloud's answers, with the real AWS provider on moto answering as AWS does: each is classified
//! from Terraform's diagnostics, names the resource, and is retried by the runner only when it is transient.

use runner_contract::failure::{CloudFailureClass, EXIT_CLOUD_FAILURE, RunFailure};

use super::*;

const VPC: &str = "module.network.aws_vpc.this";

/// A vanilla-shaped configuration whose one AWS resource is a VPC (in a module, so that its address is the kind
/// the real modules have); `max_retries` bounds the provider's own retries of throttled requests.
fn vpc_config(job: &Job, max_retries: u32) -> String {
    // The runner copies only `main.tf` into its work folder, where Terraform then finds the module.
    let module = job.path("work/network");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::write(module.join("main.tf"), "resource \"aws_vpc\" \"this\" {\n  cidr_block = \"10.0.0.0/16\"\n}\n")
        .unwrap();
    format!(
        "provider \"aws\" {{\n  region      = \"{REGION}\"\n  max_retries = {max_retries}\n}}\n\n\
         module \"network\" {{\n  source = \"./network\"\n}}\n\n{}",
        vanilla_outputs(&job.kubeconfig_parameter(), API_ENDPOINT)
    )
}

fn fault(code: &'static str, message: &'static str, times: u32) -> CloudFault {
    CloudFault { action: "CreateVpc", code, message, times }
}

const RETRY_LINE: &str = "a transient cloud failure: planning and applying again after a pause";

impl Outcome {
    /// The failure a run that failed on the cloud's answer reports.
    fn cloud_failure(&self) -> RunFailure {
        assert_eq!(self.status.code(), Some(EXIT_CLOUD_FAILURE), "{}", self.output);
        serde_json::from_str(&self.termination_message).unwrap_or_else(|error| {
            panic!("the termination message is no RunFailure ({error}): {}", self.termination_message)
        })
    }
}

/// A quota and an access denial fail the run at once (a person has to act), with their class, the resource and
/// AWS's message; nothing is retried. Once the cloud answers again, the same run applies.
#[tokio::test]
async fn a_quota_and_an_access_denial_fail_at_once_naming_the_resource() {
    let job = Job::answering(&[
        fault("VpcLimitExceeded", "The maximum number of VPCs has been reached.", 1),
        fault("UnauthorizedOperation", "You are not authorized to perform this operation.", 1),
    ])
    .await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &vpc_config(&job, 0));
    let retries = [("RUNNER_TRANSIENT_PAUSE", "1s".to_owned())];

    let quota = job.run_with("apply", &retries).await;
    let failure = quota.cloud_failure();
    assert_eq!((failure.cloud.class, failure.cloud.address.as_deref()), (CloudFailureClass::QuotaExceeded, Some(VPC)));
    assert!(failure.message.contains("VpcLimitExceeded: The maximum number of VPCs has been reached."), "{failure:?}");
    assert!(failure.message.contains(&format!("(at {VPC})")), "{failure:?}");
    assert!(!quota.output.contains(RETRY_LINE), "a quota is not retried:\n{}", quota.output);
    // The log reads as Terraform's text, not as its JSON.
    assert!(quota.output.contains("Error: creating EC2 VPC"), "{}", quota.output);
    assert!(!quota.output.contains("\"@message\""), "{}", quota.output);

    let denied = job.run_with("apply", &retries).await.cloud_failure();
    assert_eq!((denied.cloud.class, denied.cloud.address.as_deref()), (CloudFailureClass::Unauthorized, Some(VPC)));
    assert!(denied.message.contains("UnauthorizedOperation"), "{denied:?}");

    let applied = job.run_with("apply", &retries).await.assert_success();
    assert_eq!(applied.add, 1);
}

/// Throttling that outlasts the provider's own retries is transient: the runner pauses, plans again and applies;
/// the run succeeds. With no retries left it fails as `rate_limited`.
#[tokio::test]
async fn throttling_is_retried_by_the_runner_until_its_retries_are_spent() {
    // The provider tries once (max_retries = 1 is one attempt): the run's first apply fails, its retry passes.
    let throttled = fault("RequestLimitExceeded", "Request limit exceeded.", 1);
    let job = Job::answering(&[throttled]).await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &vpc_config(&job, 1));
    let outcome = job.run_with("apply", &[("RUNNER_TRANSIENT_PAUSE", "1s".to_owned())]).await;
    assert_eq!(outcome.assert_success().add, 1);
    assert_eq!(outcome.output.matches(RETRY_LINE).count(), 1, "{}", outcome.output);
    assert!(outcome.output.contains("class=\"rate_limited\""), "{}", outcome.output);

    let job = Job::answering(&[fault("RequestLimitExceeded", "Request limit exceeded.", 1)]).await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &vpc_config(&job, 1));
    let spent = job.run_with("apply", &[("RUNNER_TRANSIENT_RETRIES", "0".to_owned())]).await.cloud_failure();
    assert_eq!((spent.cloud.class, spent.cloud.address.as_deref()), (CloudFailureClass::RateLimited, Some(VPC)));
}
