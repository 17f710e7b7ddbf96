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
