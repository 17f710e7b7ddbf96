//! How a run's Job fails at once on a refusal another pod would repeat, and how to read why a Job failed.

use k8s_openapi::api::batch::v1::{
    Job, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule,
};
use runner_contract::approval::EXIT_STALE_PLAN;
use runner_contract::plan::EXIT_DESTRUCTIVE_PLAN;

use crate::domain::FailureReason;

/// The Job controller's reason for a Job failed by a rule of [`pod_failure_policy`] (it has one).
const POD_FAILURE_POLICY_REASON: &str = "PodFailurePolicy";

/// The runner's refusals that another pod would repeat, by the index of their rule in [`pod_failure_policy`]: a
/// destructive plan (exit code 3) and a stale approved plan (exit code 4).
const REFUSALS: [(i32, FailureReason); 2] =
    [(EXIT_DESTRUCTIVE_PLAN, FailureReason::DestructivePlan), (EXIT_STALE_PLAN, FailureReason::StalePlan)];

/// Each refusal of `runner_container` fails the Job at once, under a rule of its own, so that the Job alone says why
/// it failed (the live status reads only the cached Job, not its pod): its condition's message names the rule's
/// index.
pub(super) fn pod_failure_policy(runner_container: &str) -> PodFailurePolicy {
    let rule = |exit_code: i32| PodFailurePolicyRule {
        action: "FailJob".to_owned(),
        on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
            container_name: Some(runner_container.to_owned()),
            operator: "In".to_owned(),
            values: vec![exit_code],
        }),
        ..PodFailurePolicyRule::default()
    };
    PodFailurePolicy { rules: REFUSALS.iter().map(|(exit_code, _)| rule(*exit_code)).collect() }
}

/// The refusal a Job failed by: the job controller's message ends "matching FailJob rule at index N".
fn refusal_of(message: &str) -> FailureReason {
    let index = message.rsplit_once("rule at index ").and_then(|(_, index)| index.trim().parse::<usize>().ok());
    index.and_then(|index| REFUSALS.get(index)).map_or(FailureReason::JobFailed, |(_, reason)| *reason)
}

/// The reason of a failed Job (`timeout` when it hit its deadline, `destructive_plan` when the runner refused the
/// plan) and the Job's own message.
pub fn failure(job: &Job) -> (FailureReason, String) {
    let condition = job.status.as_ref().and_then(|status| status.conditions.as_ref()).and_then(|conditions| {
        conditions.iter().find(|condition| condition.type_ == "Failed" && condition.status == "True")
    });
    let job_reason = condition.and_then(|condition| condition.reason.clone()).unwrap_or_default();
    let message =
        condition.and_then(|condition| condition.message.clone()).unwrap_or_else(|| "the Job failed".to_owned());
    let reason = match job_reason.as_str() {
        "DeadlineExceeded" => FailureReason::Timeout,
        POD_FAILURE_POLICY_REASON => refusal_of(&message),
        _ => FailureReason::JobFailed,
    };
    (reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_jobs_reason_says_why() {
        use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
        let failed = |reason: &str, message: &str| Job {
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: "Failed".into(),
                    status: "True".into(),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    ..JobCondition::default()
                }]),
                ..JobStatus::default()
            }),
            ..Job::default()
        };
        assert_eq!(failure(&failed("DeadlineExceeded", "too long")).0, FailureReason::Timeout);
        // As the job controller words it (pkg/controller/job/pod_failure_policy.go).
        let refused = |code: i32, index: usize| {
            format!(
                "Container terraform-runner for pod jobs/upgrade-x-abcde failed with exit code {code} matching FailJob \
                 rule at index {index}"
            )
        };
        let destructive = refused(3, 0);
        assert_eq!(failure(&failed("PodFailurePolicy", &destructive)), (FailureReason::DestructivePlan, destructive));
        assert_eq!(failure(&failed("PodFailurePolicy", &refused(4, 1))).0, FailureReason::StalePlan);
        assert_eq!(failure(&failed("BackoffLimitExceeded", "failed")).0, FailureReason::JobFailed);
    }
}
