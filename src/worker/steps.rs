//! The steps themselves, one per stage: each idempotent, so that a run resumed after a restart repeats the stage
//! it was in safely.

use std::time::Duration;

use chrono::{DateTime, Utc};
use runner_contract::redact::Redactor;

use super::step_error::{StepError, StepOutcome};
use super::{JOB_DEADLINE_MARGIN, STEP_TIMEOUT, STOP_MARGIN, Worker};
use crate::domain::run::{JobState, RunNames, Stage};
use crate::domain::run_log;
use crate::domain::{Component, FailureReason, LastError, OperationType, ProviderVersion, RunAction, Runtime};
use crate::executor::{JobStop, RUNNER_GRACE_PERIOD, run_labels};
use crate::store::{self, Claim, Store};

impl Worker {
    pub(super) async fn step(
        &self,
        stage: Stage,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
        failing: bool,
    ) -> Result<StepOutcome, StepError> {
        match stage {
            Stage::Queued | Stage::Done => Ok(StepOutcome::Next),
            Stage::ResolveCredential => self.resolve_credential(run).await,
            Stage::RenderConfig => self.render_config(run).await,
            Stage::CreateJob => self.create_job(run, deadline).await,
            Stage::WaitForJob => self.wait_for_job(run, deadline).await,
            Stage::Finalize => match run.claim.operation.run_action() {
                RunAction::Plan => Ok(StepOutcome::Next),
                RunAction::Apply => self.check_outputs(run).await,
                RunAction::Destroy => {
                    self.executor.delete_secret(&run.names.outputs_secret).await?;
                    Ok(StepOutcome::Next)
                }
            },
            Stage::Cleanup => self.clean_up(run, failing).await,
        }
    }

    pub(super) async fn resolve_credential(&self, run: &mut Run<'_>) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        // Once per run: after a restart the Secret written earlier is reused. On the first claim no earlier claim
        // can have written it, which saves a request per run.
        if operation.claims > 1 && self.executor.credentials_exist(&run.names, operation.id).await? {
            run.redact = self.executor.credential_values(&run.names).await?;
            return Ok(StepOutcome::Next);
        }
        let runtime = run.runtime(&self.store).await?;
        let config = &runtime.cluster_config;
        let credential = self.auth.credential(&config.credential_id).await?;
        // The credential may have changed in auth-service since the request was checked.
        let mismatch =
            config.topology.credential_mismatch(&config.credential_id, credential.kind().as_str(), credential.cloud());
        if let Some(message) = mismatch {
            let error = LastError::new(FailureReason::CredentialMismatch, Component::AuthService, message);
            return Ok(StepOutcome::Fail(error));
        }
        run.redact = credential.secret_values();
        let labels = run_labels(operation.runtime_id, operation.id);
        self.executor.ensure_credentials(&run.names, &labels, &credential.secret_files()).await?;
        Ok(StepOutcome::Next)
    }

    pub(super) async fn render_config(&self, run: &mut Run<'_>) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        let runtime = run.runtime(&self.store).await?;
        let provider = match &operation.terraform_provider {
            Some(provider) => provider.clone(),
            None => ProviderVersion::pinned(runtime.cluster_config.topology.cloud()),
        };
        let rendered =
            self.renderer.render(runtime, operation.operation_type, operation.run_action(), &provider).map_err(
                |error| StepError::permanent(FailureReason::RenderFailed, Component::Renderer, error.to_string()),
            )?;
        let labels = run_labels(operation.runtime_id, operation.id);
        self.executor.ensure_config(&run.names, &labels, rendered.files).await?;
        Ok(StepOutcome::Next)
    }

    pub(super) async fn create_job(
        &self,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
    ) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        // One Terraform per runtime: a Job of an earlier operation that is still running (its run ended without
        // stopping it, or another replica's) must end first. Waiting is transient: it is retried until the deadline.
        if let Some(other) = self.executor.other_run_of_runtime(operation.runtime_id, operation.id).await? {
            return Err(StepError {
                transient: true,
                detail: format!("{other} of another operation on this runtime is still running"),
                error: LastError::new(
                    FailureReason::JobStillRunning,
                    Component::Kubernetes,
                    format!("waiting for {other} of an earlier operation on this runtime to end"),
                ),
            });
        }
        // The Job's own deadline is a backstop for a service that is gone: the worker's comes first and stops the
        // Job gracefully, with the operation's timeout in its message.
        let remaining = (deadline - store::now()).to_std().unwrap_or(Duration::from_secs(1));
        let labels = run_labels(operation.runtime_id, operation.id);
        let action = operation.run_action();
        self.executor.ensure_job(&self.modules, action, &run.names, &labels, remaining + JOB_DEADLINE_MARGIN).await?;
        Ok(StepOutcome::Next)
    }

    pub(super) async fn wait_for_job(
        &self,
        run: &mut Run<'_>,
        deadline: DateTime<Utc>,
    ) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        if run.redact.is_empty() {
            run.redact = self.executor.credential_values(&run.names).await?;
        }
        let remaining = (deadline - store::now()).to_std().unwrap_or_default();
        let error = match self.executor.wait_for_job(&run.names, operation.id, remaining, &run.redact).await? {
            JobState::Succeeded => {
                if let Some(report) = self.executor.run_report(&run.names).await? {
                    self.store.record_plan_summary(operation.id, run.claim.token, &report.plan).await?;
                }
                return Ok(StepOutcome::Next);
            }
            JobState::Running => timeout_error(operation.operation_type, self.timeout_of(operation.operation_type)),
            JobState::Missing => LastError::new(
                FailureReason::JobMissing,
                Component::Kubernetes,
                format!("Job {} disappeared before it finished", run.names.job),
            ),
            JobState::Failed { reason, message } => LastError::new(reason, Component::TerraformRunner, message),
        };
        Ok(StepOutcome::Fail(error))
    }

    /// The logs are kept before anything goes: the credential values to redact them with (the Secret is deleted
    /// last), and the logs followed before a running Job is stopped, so that its last lines are in. A clean-up
    /// that runs again after a restart keeps the first archive.
    pub(super) async fn clean_up(&self, run: &mut Run<'_>, failing: bool) -> Result<StepOutcome, StepError> {
        let operation = &run.claim.operation;
        if run.redact.is_empty() {
            run.redact = self.executor.credential_values(&run.names).await?;
        }
        let logs = match self.store.run_logs_archived(operation.id).await? {
            true => None,
            false => self.executor.open_final_logs(operation.id).await?,
        };
        if failing {
            self.stop_the_job_of_a_failed_run(run).await?;
        }
        if let Some(logs) = logs {
            let redactor = Redactor::new(run.redact.clone());
            let logs = logs.read(RUNNER_GRACE_PERIOD + STOP_MARGIN).await;
            let redacted = logs.into_iter().map(|log| (log.container, redactor.redact(&log.log))).collect();
            let kept = run_log::within_budget(redacted, self.settings.run_log_max_bytes);
            self.store.archive_run_logs(operation.id, &kept).await?;
        }
        self.executor.delete_secret(&run.names.credentials_secret).await?;
        Ok(StepOutcome::Next)
    }

    /// A failed run may have left its Job running (a timeout, exhausted attempts): it is stopped, and its pods
    /// waited for, before the credentials they mount go away and the run ends.
    pub(super) async fn stop_the_job_of_a_failed_run(&self, run: &Run<'_>) -> Result<(), StepError> {
        let operation_id = run.claim.operation.id;
        let job = &run.names.job;
        match self.executor.stop_job(&run.names, operation_id, RUNNER_GRACE_PERIOD + STOP_MARGIN).await? {
            JobStop::NotRunning => {}
            JobStop::Stopped => {
                tracing::error!(%operation_id, %job, "stopped the Job of a failed run; its pods are gone")
            }
            JobStop::StillRunning { pods } => tracing::error!(
                %operation_id,
                %job,
                ?pods,
                "pods of a stopped Job were still running after their grace period; a new operation on this runtime \
                 waits for them"
            ),
        }
        Ok(())
    }
}

/// How long one try of a step may take: waiting for the Job is bounded by the deadline instead, and stopping a
/// failed run's Job by the runner's grace period.
pub(super) fn step_limit(stage: Stage, failing: bool) -> Option<Duration> {
    match stage {
        Stage::WaitForJob => None,
        Stage::Cleanup if failing => Some(STEP_TIMEOUT + RUNNER_GRACE_PERIOD + STOP_MARGIN),
        _ => Some(STEP_TIMEOUT),
    }
}

pub(super) fn timeout_error(operation_type: OperationType, timeout: Duration) -> LastError {
    let what = operation_type.verb();
    LastError::new(
        FailureReason::Timeout,
        Component::Provisioner,
        format!("{what} did not finish within {}", humantime::format_duration(timeout)),
    )
}

/// The state of one run while it is driven.
pub(super) struct Run<'a> {
    pub(super) claim: &'a Claim,
    pub(super) names: RunNames,
    /// Credential values to keep out of failure messages.
    pub(super) redact: Vec<String>,
    pub(super) runtime: Option<Runtime>,
}

impl Run<'_> {
    /// The runtime as this run works on it: with an upgrade's target configuration (the stored runtime keeps the
    /// configuration last applied until the upgrade succeeded).
    pub(super) async fn runtime(&mut self, store: &Store) -> Result<&Runtime, StepError> {
        if self.runtime.is_none() {
            let operation = &self.claim.operation;
            let runtime_id = operation.runtime_id;
            let mut runtime = store.find_runtime(runtime_id).await?.ok_or_else(|| {
                StepError::permanent(
                    FailureReason::RuntimeMissing,
                    Component::Database,
                    format!("runtime {runtime_id} does not exist"),
                )
            })?;
            if let Some(config) = &operation.target_config {
                runtime.cluster_config = config.clone();
            }
            self.runtime = Some(runtime);
        }
        Ok(self.runtime.as_ref().expect("loaded above"))
    }
}
