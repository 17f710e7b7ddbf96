//! Plans: every run is planned first, protected resources are never replaced, dry runs change nothing.

use super::*;

/// Every run is planned first and exactly the saved plan is applied; its summary (from tofu's own `show -json`)
/// is the termination message. A plan that would replace a protected resource is refused with its own exit code,
/// naming the resource, and changes nothing; a harmless change to the same configuration is applied.
#[tokio::test]
async fn the_runner_plans_first_and_refuses_to_replace_a_protected_resource() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let config = |input: &str, trigger: &str| job.protected_cluster_config(input, trigger);
    let protect = protect_the_cluster();

    job.write_config("apply", "vanilla_kubeadm", &config("v1", "generation-1"));
    let created = job.run_with("apply", &protect).await.assert_success();
    assert_eq!(created, PlanSummary { add: 2, risk: Some(PlanRisk::Safe), ..PlanSummary::default() });
    let state = || job.state_etag();
    let applied_state = state();

    // A new trigger replaces the cluster: refused before anything changes.
    job.write_config("apply", "vanilla_kubeadm", &config("v1", "generation-2"));
    let refused = job.run_with("apply", &protect).await;
    assert_eq!(refused.status.code(), Some(EXIT_DESTRUCTIVE_PLAN), "{}", refused.output);
    assert_eq!(
        refused.termination_message,
        "the plan would destroy or replace protected resources (terraform_data.cluster); nothing was changed"
    );
    assert!(!refused.output.contains("Apply complete"), "{}", refused.output);
    assert_eq!(state(), applied_state, "the state is untouched");

    // Without the replacement, the change is an update, applied as planned: risky, as the protected cluster is
    // updated in place.
    job.write_config("apply", "vanilla_kubeadm", &config("v2", "generation-1"));
    let changed = job.run_with("apply", &protect).await.assert_success();
    let risky = vec!["terraform_data.cluster".to_owned()];
    assert_eq!(changed, PlanSummary { change: 2, risk: Some(PlanRisk::Risky), risky, ..PlanSummary::default() });

    // A destroy is planned too, and may remove what an apply must keep.
    job.write_config("destroy", "vanilla_kubeadm", &config("v2", "generation-1"));
    let destroyed = job.run_with("destroy", &protect).await.assert_success();
    let mut addresses = destroyed.destroyed.clone();
    addresses.sort();
    assert_eq!(addresses, ["terraform_data.cluster", "terraform_data.workers"]);
    assert_eq!((destroyed.add, destroyed.change, destroyed.destroy), (0, 0, 2));
    assert_eq!(destroyed.risk, None, "a deprovisioning destroys everything by design");
}

/// A dry run plans and changes nothing: a new cluster is planned without its state bucket being created (from
/// empty local state), an existing one against its state, which stays as it was; a destructive plan is reported
/// as the real run would refuse it.
#[tokio::test]
async fn a_dry_run_plans_without_changing_anything() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let config = |input: &str, trigger: &str| job.protected_cluster_config(input, trigger);
    let protect = protect_the_cluster();

    job.write_config("plan", "vanilla_kubeadm", &config("v1", "generation-1"));
    let preview = job.run_with("plan", &protect).await.assert_success();
    assert_eq!(preview, PlanSummary { add: 2, risk: Some(PlanRisk::Safe), ..PlanSummary::default() });
    assert!(!job.bucket_exists(), "a dry run of a new cluster creates no state bucket");
    assert!(job.published_kubeconfig().await.is_none(), "a dry run publishes nothing");

    job.write_config("apply", "vanilla_kubeadm", &config("v1", "generation-1"));
    job.run_with("apply", &protect).await.assert_success();
    let state = || job.state_etag();
    let applied_state = state();

    job.write_config("plan", "vanilla_kubeadm", &config("v2", "generation-1"));
    let planned = job.run_with("plan", &protect).await.assert_success();
    assert_eq!((planned.change, planned.risk), (2, Some(PlanRisk::Risky)));
    assert_eq!(state(), applied_state, "a dry run leaves the state as it was");

    job.write_config("plan", "vanilla_kubeadm", &config("v1", "generation-2"));
    let refused = job.run_with("plan", &protect).await;
    assert_eq!(refused.status.code(), Some(EXIT_DESTRUCTIVE_PLAN), "{}", refused.output);
    assert!(refused.termination_message.contains("terraform_data.cluster"), "{}", refused.termination_message);
    assert_eq!(state(), applied_state);
}

/// A plan the approval policy holds back is saved beside the state and reported with its digest, and nothing is
/// applied; the approved run applies exactly that file, and only with its digest; a plan whose state moved on
/// since is refused as stale, changing nothing.
#[tokio::test]
async fn a_plan_held_back_for_approval_is_applied_only_as_approved_and_only_while_current() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let config = |input: &str| job.protected_cluster_config(input, "generation-1");
    let operation = Uuid::new_v4();
    let env = |policy: &str, approved: Option<&str>| {
        job.patch_manifest(json!({ "approvalPolicy": policy, "approvedPlanSha256": approved }));
        let mut env = protect_the_cluster().to_vec();
        env.push(("RUNNER_OPERATION_ID", operation.to_string()));
        env
    };
    let saved_plan = format!("plans/{operation}.tfplan.json");

    job.write_config("apply", "vanilla_kubeadm", &config("v1"));
    job.run_with("apply", &env("safeOnly", None)).await.assert_success();
    let applied_state = job.state_etag();

    // An in-place change of the protected cluster is risky: under safeOnly it waits.
    job.write_config("apply", "vanilla_kubeadm", &config("v2"));
    let waiting = job.run_with("apply", &env("safeOnly", None)).await.assert_report();
    let digest = waiting.saved_plan_sha256.clone().expect("the plan waits with its digest");
    assert_eq!((waiting.plan.change, waiting.plan.risk), (2, Some(PlanRisk::Risky)));
    assert_eq!(waiting.kubeconfig_sha256, None, "nothing is published");
    assert_eq!(job.state_etag(), applied_state, "nothing is applied");
    let object = job.json_object(&saved_plan).expect("the plan is saved beside the state");
    assert_eq!(object["sha256"], digest.as_str());

    let wrong = "0".repeat(64);
    let refused = job.run_with("apply", &env("safeOnly", Some(&wrong))).await;
    assert_eq!(refused.status.code(), Some(EXIT_STALE_PLAN), "{}", refused.output);
    assert!(
        refused.termination_message.contains(&format!("not the approved {wrong}")),
        "{}",
        refused.termination_message
    );
    assert_eq!(job.state_etag(), applied_state, "a plan that is not the approved one changes nothing");

    let approved = job.run_with("apply", &env("safeOnly", Some(&digest))).await.assert_report();
    assert_eq!((approved.plan.change, approved.saved_plan_sha256), (2, None));
    assert!(approved.kubeconfig_sha256.is_some(), "the approved apply publishes the kubeconfig");
    assert_ne!(job.state_etag(), applied_state, "the approved plan is applied");
    assert_eq!(job.json_object(&saved_plan), None, "an approval is good for one apply");

    // A plan waits; meanwhile the state moves on (here: an apply under auto); the approval comes too late.
    job.write_config("apply", "vanilla_kubeadm", &config("v3"));
    let digest = job.run_with("apply", &env("manual", None)).await.assert_report().saved_plan_sha256.unwrap();
    job.run_with("apply", &env("auto", None)).await.assert_success();
    let moved_state = job.state_etag();
    let stale = job.run_with("apply", &env("manual", Some(&digest))).await;
    assert_eq!(stale.status.code(), Some(EXIT_STALE_PLAN), "{}", stale.output);
    assert!(stale.termination_message.contains("state changed"), "{}", stale.termination_message);
    assert_eq!(job.state_etag(), moved_state, "a stale plan changes nothing");
}
