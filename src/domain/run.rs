//! The step machine of a run (of any operation type) and the names of the Kubernetes objects
//! it uses. Pure: the worker performs the steps, this module only says which comes next and what things are called.

use uuid::Uuid;

use super::{Component, FailureReason, LastError, OperationType, RunAction};

spelled! {
    /// The steps of a run, in order (the derived ordering is the step order). The current one is stored with the
    /// operation, so a new process resumes there.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Stage {
        /// Recorded, not yet picked up by a worker.
        Queued => "Queued",
        /// Its held-back plan approved, not yet picked up by a worker. Not `Queued`: a replica of 0.1.0, which
        /// knows no approvals and would plan afresh, claims only stages it knows, so it leaves this one alone.
        Approved => "Approved",
        /// Resolve the cloud credential in auth-service and write it to the credentials Secret.
        ResolveCredential => "ResolveCredential",
        /// Render the Terraform configuration into the config ConfigMap.
        RenderConfig => "RenderConfig",
        /// Create the Job that runs terraform.
        CreateJob => "CreateJob",
        /// Follow the Job until it completes or fails.
        WaitForJob => "WaitForJob",
        /// Provisioning and upgrades: require the outputs Secret. Deprovisioning: remove it and mark the runtime
        /// deleted. A dry run: nothing.
        Finalize => "Finalize",
        /// Stop the Job of a failed run, then delete the credentials Secret, whatever the result.
        Cleanup => "Cleanup",
        /// A chained upgrade between two minors: the runtime shows the one just applied, the next one's run
        /// starts at the first step. A chain is also queued here: a replica of 0.1.0 (which would apply the
        /// target in one jump) claims only stages it knows, so it leaves chains alone.
        NextMinor => "NextMinor",
        /// The run saved its plan for approval and ended; an approval starts a new run that applies it.
        AwaitingApproval => "AwaitingApproval",
        /// Nothing left to do.
        Done => "Done",
    }
}

impl Stage {
    /// The step after this one has succeeded.
    pub fn next(self) -> Stage {
        match self {
            Stage::Queued | Stage::Approved | Stage::NextMinor => Stage::ResolveCredential,
            Stage::ResolveCredential => Stage::RenderConfig,
            Stage::RenderConfig => Stage::CreateJob,
            Stage::CreateJob => Stage::WaitForJob,
            Stage::WaitForJob => Stage::Finalize,
            Stage::Finalize => Stage::Cleanup,
            Stage::Cleanup | Stage::AwaitingApproval | Stage::Done => Stage::Done,
        }
    }

    /// What the operation is doing while at this step, as its status message.
    pub fn message(self, operation_type: OperationType, action: RunAction) -> &'static str {
        match (self, action, operation_type) {
            (Stage::Queued, _, _) => "Operation queued: waiting for a worker",
            (Stage::Approved, _, _) => "Plan approved: waiting for a worker to apply it",
            (Stage::NextMinor, _, _) => "Upgrading one minor version at a time: waiting for a worker to start the next",
            (Stage::ResolveCredential, _, _) => "Resolving the cloud credential",
            (Stage::RenderConfig, _, _) => "Rendering the Terraform configuration",
            (Stage::CreateJob, RunAction::Apply, _) => "Starting the terraform apply Job",
            (Stage::CreateJob, RunAction::Destroy, _) => "Starting the terraform destroy Job",
            (Stage::CreateJob, RunAction::Plan, _) => "Starting the terraform plan Job (dry run)",
            (Stage::WaitForJob, RunAction::Apply, _) => "terraform apply is running",
            (Stage::WaitForJob, RunAction::Destroy, _) => "terraform destroy is running",
            (Stage::WaitForJob, RunAction::Plan, _) => "terraform plan is running (dry run)",
            (Stage::Finalize, RunAction::Apply, _) => "Checking the published kubeconfig",
            (Stage::Finalize, RunAction::Destroy, _) => "Removing the cluster's outputs",
            (Stage::Finalize, RunAction::Plan, _) => "Recording the plan",
            (Stage::Cleanup, _, _) => "Removing the run's credentials",
            (Stage::AwaitingApproval, _, _) => "The plan waits for approval; nothing was changed",
            (Stage::Done, RunAction::Plan, _) => "Dry run planned; nothing was changed",
            (Stage::Done, _, OperationType::Provision) => "Cluster provisioned",
            (Stage::Done, _, OperationType::Upgrade) => "Cluster upgraded",
            (Stage::Done, _, OperationType::Hibernate) => "Cluster hibernated",
            (Stage::Done, _, OperationType::WakeUp) => "Cluster woken up",
            (Stage::Done, _, OperationType::RenewCertificates) => "Certificates renewed",
            (Stage::Done, _, OperationType::Deprovision) => "Cluster deprovisioned",
        }
    }
}

/// Where a run stands between two steps: its stage and, once it has failed, why. These are the step loop's rules,
/// without I/O: the worker performs the steps and records what [`RunState::record`] says.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    pub stage: Stage,
    pub failure: Option<LastError>,
    /// The run saved its plan for approval: once cleaned up it ends waiting, not succeeded.
    pub holds_plan: bool,
    /// The run applies one minor of a chained upgrade and another follows: once cleaned up it hands over.
    pub minor_follows: bool,
}

/// What the worker records before the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// At a stage, moving on normally.
    Stage,
    /// At a stage of the clean-up after this failure.
    Failing(&'a LastError),
    /// The run ended well.
    Succeeded,
    /// The run ended with this failure.
    Failed(&'a LastError),
    /// The run ended with its plan saved for approval.
    AwaitingApproval,
    /// The run applied one minor of a chained upgrade; the next minor's run follows.
    NextMinor,
}

/// What a step's end meant for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterStep {
    Next,
    /// The run failed: it cleans up now.
    Failed,
    /// A clean-up step failed for good; the run goes on with the next one.
    CleanupFailed,
}

impl RunState {
    /// Where a claimed operation resumes. A queued one (or an approved one) starts at its first step. A stored error is the run's
    /// failure only once the run has moved to Cleanup with it (an error stored at an earlier stage was a transient
    /// one being retried). An operation past its attempts fails and cleans up. `holds_plan`: see
    /// [`crate::domain::Operation::holds_plan_for_approval`].
    pub fn resume(
        stage: Stage,
        stored_error: Option<&LastError>,
        (attempts, max_attempts): (i32, i32),
        holds_plan: bool,
    ) -> RunState {
        let stage = match stage {
            Stage::Queued | Stage::Approved | Stage::NextMinor => Stage::ResolveCredential,
            stage => stage,
        };
        let failure = stored_error.filter(|_| stage >= Stage::Cleanup).cloned();
        if attempts > max_attempts && failure.is_none() {
            let message = format!("the operation was started {max_attempts} times without making progress");
            return RunState {
                stage: Stage::Cleanup,
                failure: Some(LastError::new(FailureReason::AttemptsExhausted, Component::Provisioner, message)),
                holds_plan,
                minor_follows: false,
            };
        }
        RunState { stage, failure, holds_plan, minor_follows: false }
    }

    /// The run applies a minor of a chained upgrade that is not the last.
    pub fn with_minor_following(self, minor_follows: bool) -> RunState {
        RunState { minor_follows, ..self }
    }

    /// The run's plan was saved for approval: it cleans up as usual, then ends waiting.
    pub fn hold_for_approval(&mut self) {
        self.holds_plan = true;
    }

    /// The deadline passed, or a caller cancelled the operation: the run fails with `reason` and cleans up
    /// (which stops its Job), unless it already is.
    pub fn end_early(&mut self, reason: LastError) {
        if self.failure.is_none() && self.stage < Stage::Cleanup {
            self.failure = Some(reason);
            self.stage = Stage::Cleanup;
        }
    }

    /// Moves on after a step: to the next stage when it succeeded; to Cleanup when a step of the run failed (the
    /// first failure is the one kept); to the next clean-up step when a clean-up step failed for good.
    pub fn after_step(&mut self, result: Result<(), LastError>) -> AfterStep {
        match result {
            Ok(()) => {
                self.stage = match self.stage {
                    Stage::Cleanup if self.holds_plan && self.failure.is_none() => Stage::AwaitingApproval,
                    Stage::Cleanup if self.minor_follows && self.failure.is_none() => Stage::NextMinor,
                    stage => stage.next(),
                };
                AfterStep::Next
            }
            Err(error) if self.stage < Stage::Cleanup => {
                self.failure.get_or_insert(error);
                self.stage = Stage::Cleanup;
                AfterStep::Failed
            }
            Err(_) => {
                self.stage = self.stage.next();
                AfterStep::CleanupFailed
            }
        }
    }

    pub fn record(&self) -> Record<'_> {
        match (&self.failure, self.stage) {
            (None, Stage::Done) => Record::Succeeded,
            (None, Stage::AwaitingApproval) => Record::AwaitingApproval,
            (None, Stage::NextMinor) => Record::NextMinor,
            (Some(failure), Stage::Done) => Record::Failed(failure),
            (Some(failure), _) => Record::Failing(failure),
            (None, _) => Record::Stage,
        }
    }
}

/// What a run's Job is doing, as far as the API server says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Missing,
    Running,
    Succeeded,
    /// `message` is the runner's termination message (bounded and redacted) or the Job's failure reason.
    Failed {
        reason: FailureReason,
        message: String,
    },
}

/// The deterministic names of one run's Kubernetes objects: a retry or a new process finds what an earlier
/// attempt created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNames {
    pub job: String,
    pub config_map: String,
    pub credentials_secret: String,
    pub outputs_secret: String,
    /// The run applies an approved plan: the operation's second Job, whose logs are kept beside the first's.
    pub applies_approved_plan: bool,
}

impl RunNames {
    pub fn new(operation_type: OperationType, runtime_id: Uuid) -> Self {
        let job = match operation_type {
            OperationType::Provision => format!("provision-{runtime_id}"),
            OperationType::Deprovision => format!("deprovision-{runtime_id}"),
            OperationType::Upgrade => format!("upgrade-{runtime_id}"),
            OperationType::Hibernate => format!("hibernate-{runtime_id}"),
            OperationType::WakeUp => format!("wake-up-{runtime_id}"),
            // Short enough for `-approved` within the 63 characters of a Job's name label.
            OperationType::RenewCertificates => format!("renewal-{runtime_id}"),
        };
        RunNames {
            config_map: format!("{job}-config"),
            credentials_secret: format!("{job}-credentials"),
            outputs_secret: format!("provision-{runtime_id}-outputs"),
            job,
            applies_approved_plan: false,
        }
    }

    /// The names of the operation's current run: each minor of a chained upgrade has its own
    /// (`upgrade-<id>-1-33`), and once a plan is approved, those of the Job that applies it (the first Job, which
    /// saved the plan, stays as it ended).
    pub fn of(operation: &super::Operation) -> Self {
        let mut names = RunNames::new(operation.operation_type, operation.runtime_id);
        if let Some(minor) = operation.minor_target() {
            names = names.suffixed(&format!("{}-{}", minor.major, minor.minor));
        }
        if operation.approved_plan().is_none() {
            return names;
        }
        RunNames { applies_approved_plan: true, ..names.suffixed("approved") }
    }

    /// The same run's objects under `<job>-<suffix>` (the outputs Secret is the runtime's, whatever the run).
    fn suffixed(self, suffix: &str) -> RunNames {
        let job = format!("{}-{suffix}", self.job);
        RunNames { config_map: format!("{job}-config"), credentials_secret: format!("{job}-credentials"), job, ..self }
    }

    /// The name a container's log of this run is archived under.
    pub fn archived_log_name(&self, container: &str) -> String {
        match self.applies_approved_plan {
            true => format!("{container} (approved plan)"),
            false => container.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    #[test]
    fn stages_run_in_order_and_end_done() {
        let mut stage = Stage::Queued;
        let mut seen = vec![stage];
        while stage != Stage::Done {
            stage = stage.next();
            seen.push(stage);
        }
        // A run that holds its plan for approval ends at AwaitingApproval instead (see RunState); once approved,
        // it waits at Approved and starts over at the first step.
        let waiting = [Stage::Approved, Stage::NextMinor, Stage::AwaitingApproval];
        let held: Vec<Stage> = Stage::ALL.iter().copied().filter(|stage| !waiting.contains(stage)).collect();
        assert_eq!(seen, held);
        assert_eq!(Stage::Approved.next(), Stage::ResolveCredential);
        assert_eq!(Stage::NextMinor.next(), Stage::ResolveCredential);
        assert_eq!(Stage::Done.next(), Stage::Done);
    }

    #[test]
    fn stages_round_trip_through_their_stored_names() {
        for stage in Stage::ALL {
            assert_eq!(Stage::parse(stage.as_str()), Some(*stage));
        }
        assert_eq!(Stage::parse("Nope"), None);
    }

    fn error(reason: FailureReason) -> LastError {
        LastError::new(reason, Component::Kubernetes, "x")
    }

    #[test]
    fn runs_resume_where_they_stopped_and_only_a_cleanup_error_is_a_failure() {
        let retrying = error(FailureReason::KubernetesError);
        let cases = [
            // (stored stage, stored error, attempts, resumes at, failed with)
            (Stage::Queued, None, 1, Stage::ResolveCredential, None),
            (Stage::Approved, None, 1, Stage::ResolveCredential, None),
            (Stage::WaitForJob, None, 3, Stage::WaitForJob, None),
            (Stage::CreateJob, Some(&retrying), 2, Stage::CreateJob, None),
            (Stage::Cleanup, Some(&retrying), 2, Stage::Cleanup, Some(FailureReason::KubernetesError)),
            (Stage::RenderConfig, None, 11, Stage::Cleanup, Some(FailureReason::AttemptsExhausted)),
            (Stage::Cleanup, Some(&retrying), 11, Stage::Cleanup, Some(FailureReason::KubernetesError)),
        ];
        for (stage, stored, attempts, resumes_at, failed_with) in cases {
            let run = RunState::resume(stage, stored, (attempts, 10), false);
            assert_eq!(run.stage, resumes_at, "{stage:?} {stored:?} {attempts}");
            assert_eq!(run.failure.map(|failure| failure.reason), failed_with, "{stage:?} {stored:?} {attempts}");
        }
    }

    #[test]
    fn a_failure_sends_the_run_to_cleanup_once_and_cleanup_goes_on_to_the_end() {
        let mut run = RunState::resume(Stage::CreateJob, None, (1, 10), false);
        assert_eq!(run.record(), Record::Stage);
        assert_eq!(run.after_step(Ok(())), AfterStep::Next);
        assert_eq!(run.stage, Stage::WaitForJob);
        assert_eq!(run.after_step(Err(error(FailureReason::JobFailed))), AfterStep::Failed);
        assert_eq!(run.stage, Stage::Cleanup);
        assert!(matches!(run.record(), Record::Failing(failure) if failure.reason == FailureReason::JobFailed));
        // A deadline after the failure changes nothing: the first failure is the one reported.
        run.end_early(error(FailureReason::Timeout));
        assert_eq!(run.failure.as_ref().map(|failure| failure.reason), Some(FailureReason::JobFailed));
        assert_eq!(run.after_step(Err(error(FailureReason::KubernetesError))), AfterStep::CleanupFailed);
        assert_eq!(run.stage, Stage::Done);
        assert!(matches!(run.record(), Record::Failed(failure) if failure.reason == FailureReason::JobFailed));
    }

    #[test]
    fn a_deadline_fails_a_run_only_before_cleanup() {
        let mut run = RunState::resume(Stage::WaitForJob, None, (1, 10), false);
        run.end_early(error(FailureReason::Timeout));
        assert_eq!(run.stage, Stage::Cleanup);
        assert!(matches!(run.record(), Record::Failing(failure) if failure.reason == FailureReason::Timeout));
        let mut cleaning = RunState::resume(Stage::Cleanup, None, (1, 10), false);
        cleaning.end_early(error(FailureReason::Timeout));
        assert_eq!(cleaning.failure, None, "a successful run that is cleaning up does not time out");
        assert_eq!(cleaning.after_step(Ok(())), AfterStep::Next);
        assert_eq!(cleaning.record(), Record::Succeeded);
    }

    #[test]
    fn names_are_deterministic_and_valid_kubernetes_names() {
        let runtime_id = Uuid::parse_str("0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10").unwrap();
        let names = RunNames::new(OperationType::Deprovision, runtime_id);
        assert_eq!(names, RunNames::new(OperationType::Deprovision, runtime_id));
        assert_eq!(RunNames::new(OperationType::Upgrade, runtime_id).job, format!("upgrade-{runtime_id}"));
        assert_eq!(RunNames::new(OperationType::WakeUp, runtime_id).job, format!("wake-up-{runtime_id}"));
        assert_eq!(RunNames::new(OperationType::Hibernate, runtime_id).job, format!("hibernate-{runtime_id}"));
        assert_eq!(names.job, format!("deprovision-{runtime_id}"));
        assert_eq!(names.outputs_secret, format!("provision-{runtime_id}-outputs"));
        for name in [&names.job, &names.config_map, &names.credentials_secret, &names.outputs_secret] {
            assert!(name.len() <= 63, "{name} is {} characters", name.len());
            assert!(name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-'));
        }
        assert_eq!(RunNames::new(OperationType::Provision, runtime_id).job, format!("provision-{runtime_id}"));
    }

    #[test]
    fn each_minor_of_a_chain_runs_under_names_of_its_own() {
        let runtime_id = Uuid::parse_str("0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10").unwrap();
        let provider = crate::domain::ProviderVersion::pinned(crate::domain::Cloud::Aws);
        let mut operation = super::super::Operation::queued(runtime_id, OperationType::Upgrade, provider, Utc::now());
        operation.minors =
            vec![crate::domain::upgrade_chain::MinorRun { version: "1.33".parse().unwrap(), started_at: Utc::now() }];
        let names = RunNames::of(&operation);
        assert_eq!(names.job, format!("upgrade-{runtime_id}-1-33"));
        assert_eq!(names.config_map, format!("upgrade-{runtime_id}-1-33-config"));
        assert_eq!(names.outputs_secret, format!("provision-{runtime_id}-outputs"), "the runtime's, not the run's");
        operation.saved_plan_sha256 = Some("ab".repeat(32));
        operation.approved = Some(crate::domain::approval::Approval { by: "alice".into(), at: Utc::now() });
        let approved = RunNames::of(&operation);
        assert_eq!(approved.job, format!("upgrade-{runtime_id}-1-33-approved"));
        assert!(approved.applies_approved_plan);
        assert!(approved.job.len() <= 63, "a Job's name is a label value: {}", approved.job);
    }

    #[test]
    fn a_minor_of_a_chain_hands_over_after_its_clean_up_unless_it_failed_or_waits() {
        let mut run = RunState::resume(Stage::NextMinor, None, (1, 10), false).with_minor_following(true);
        assert_eq!(run.stage, Stage::ResolveCredential, "a chain starts each minor at the first step");
        run.stage = Stage::Cleanup;
        assert_eq!(run.after_step(Ok(())), AfterStep::Next);
        assert_eq!((run.stage, run.record()), (Stage::NextMinor, Record::NextMinor));
        // A deadline at the hand-over changes nothing: the minor was applied.
        run.end_early(error(FailureReason::Timeout));
        assert_eq!(run.record(), Record::NextMinor);

        let mut failed = RunState::resume(Stage::WaitForJob, None, (1, 10), false).with_minor_following(true);
        failed.after_step(Err(error(FailureReason::JobFailed)));
        failed.after_step(Ok(()));
        assert!(matches!(failed.record(), Record::Failed(_)), "a failed minor ends the chain");

        let mut waiting = RunState::resume(Stage::Cleanup, None, (1, 10), true).with_minor_following(true);
        waiting.after_step(Ok(()));
        assert_eq!(waiting.record(), Record::AwaitingApproval, "a minor's held plan waits first");
    }

    #[test]
    fn a_run_holding_its_plan_ends_waiting_after_its_clean_up() {
        let mut run = RunState::resume(Stage::Finalize, None, (1, 10), false);
        run.hold_for_approval();
        run.after_step(Ok(()));
        assert_eq!(run.after_step(Ok(())), AfterStep::Next);
        assert_eq!((run.stage, run.record()), (Stage::AwaitingApproval, Record::AwaitingApproval));
        // Resumed in its clean-up (the saved plan is recorded), it ends the same way; a failure ends it failed.
        let mut resumed = RunState::resume(Stage::Cleanup, None, (2, 10), true);
        resumed.after_step(Ok(()));
        assert_eq!(resumed.record(), Record::AwaitingApproval);
        let mut failed = RunState::resume(Stage::Cleanup, Some(&error(FailureReason::JobFailed)), (2, 10), true);
        failed.after_step(Ok(()));
        assert!(matches!(failed.record(), Record::Failed(_)));
    }

    #[test]
    fn the_run_of_an_approved_plan_has_its_own_job_and_keeps_its_logs_beside_the_first() {
        use crate::domain::{Operation, ProviderVersion, approval::Approval};
        let now = chrono::Utc::now();
        let queued = Operation::queued(
            Uuid::now_v7(),
            OperationType::Deprovision,
            ProviderVersion::pinned(crate::domain::Cloud::Aws),
            now,
        );
        let first = RunNames::of(&queued);
        assert_eq!(first, RunNames::new(OperationType::Deprovision, queued.runtime_id));
        let approved = Operation {
            saved_plan_sha256: Some("a".repeat(64)),
            approved: Some(Approval { by: "alice".to_owned(), at: now }),
            ..queued
        };
        let second = RunNames::of(&approved);
        assert_eq!(second.job, format!("{}-approved", first.job));
        assert_eq!(second.outputs_secret, first.outputs_secret);
        assert!(second.job.len() <= 63 && second.credentials_secret != first.credentials_secret);
        assert_eq!(second.archived_log_name("terraform-runner"), "terraform-runner (approved plan)");
        assert_eq!(first.archived_log_name("terraform-runner"), "terraform-runner");
    }
}
