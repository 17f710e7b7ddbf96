//! A run's logs: read from the pod while it lives, followed, or the kept archive after it ended.

use std::collections::HashMap;

use runner_contract::redact::Redactor;
use uuid::Uuid;

use super::validation::{Invalid, InvalidReason};
use super::{Conflict, Error, Result, Service, executor_error, live_logs, over_budget};
use crate::domain::run::{RunNames, Stage};
use crate::domain::run_log::{self, ContainerLog, KeptLog, LogBudget};
use crate::domain::{Operation, OperationId, RuntimeId};
use crate::executor::{self};
use crate::store::{self, ArchivedLog};

/// Before the Job is created there is no pod to ask for logs: the 409 that says so.
fn before_its_job(operation: &Operation) -> Option<Error> {
    let no_pod = |message: String| Error::Conflict { conflict: Conflict::NoRunnerPod, message };
    if operation.started_at.is_none() && !operation.state.is_active() {
        // Ended (cancelled) while queued: no worker ever ran it, so there is no pod to ask the cluster for.
        return Some(no_pod(format!("operation {} ended ({}) before it ran", operation.id, operation.state)));
    }
    (operation.stage < Stage::CreateJob).then(|| {
        no_pod(format!("no runner pod exists yet: operation {} is at stage {}", operation.id, operation.stage.as_str()))
    })
}

/// The kept logs of an operation unpacked within `budget`; `None` when it kept none.
fn kept_logs(archived: &[ArchivedLog], budget: &LogBudget) -> Result<Option<Vec<KeptLog>>> {
    if archived.is_empty() {
        return Ok(None);
    }
    let unpacked = archived.iter().map(|log| log.unpack(budget)).collect::<Result<Vec<_>, _>>();
    match unpacked {
        Ok(kept) => Ok(Some(kept)),
        Err(store::Error::OverBudget { .. }) => Err(over_budget(budget)),
        Err(error) => Err(error.into()),
    }
}

impl Service {
    /// A fresh budget for the logs one request reads.
    pub fn log_budget(&self) -> LogBudget {
        LogBudget::new(self.log_bytes_per_request)
    }

    /// The runner logs of a runtime's operation: its last one, or `operation_id`, which must be one of its own.
    pub async fn logs(
        &self,
        runtime_id: RuntimeId,
        operation_id: Option<OperationId>,
        tail_lines: Option<i64>,
        budget: &LogBudget,
    ) -> Result<Vec<ContainerLog>> {
        let status = self.latest(runtime_id).await?;
        let operation = match operation_id {
            None => status.last_operation,
            Some(OperationId(id)) => {
                let operation = self.store.find_operation(id).await?;
                operation
                    .filter(|operation| operation.runtime_id == status.runtime.id)
                    .ok_or_else(|| Error::NotFound { what: "operation of this runtime", id: id.to_string() })?
            }
        };
        let archived = self.archived_logs_of(operation.id).await?;
        self.logs_of(&operation, &archived, tail_lines, budget).await
    }

    /// The runner logs of an operation (the last `tail_lines` of each container): kept in the database once its
    /// run ended, read from its pod while it runs; 409 while it has no pod, and for a run that kept none.
    pub async fn operation_logs(
        &self,
        operation_id: OperationId,
        tail_lines: Option<i64>,
        budget: &LogBudget,
    ) -> Result<Vec<ContainerLog>> {
        let operation = self.visible_operation(operation_id).await?;
        let archived = self.archived_logs_of(operation.id).await?;
        self.logs_of(&operation, &archived, tail_lines, budget).await
    }

    /// The kept logs of each of `operation_ids` that has any, still compressed, in one query: for the logs of
    /// many operations at once (see [`Service::logs_of`]).
    pub async fn archived_logs(&self, operation_ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<ArchivedLog>>> {
        Ok(self.store.archived_logs(operation_ids).await?)
    }

    async fn archived_logs_of(&self, operation_id: Uuid) -> Result<Vec<ArchivedLog>> {
        Ok(self.archived_logs(&[operation_id]).await?.remove(&operation_id).unwrap_or_default())
    }

    /// The runner's log of an operation as it prints it, until its container ends (see
    /// `Executor::follow_runner_log`), read once for all who follow it; once the run ended, its kept log at once.
    pub async fn follow_operation_log(
        &self,
        operation_id: OperationId,
    ) -> Result<futures::stream::BoxStream<'static, Result<String>>> {
        use futures::StreamExt as _;
        let operation = self.visible_operation(operation_id).await?;
        let archived = self.archived_logs_of(operation.id).await?;
        if let Some(kept) = kept_logs(&archived, &self.log_budget())? {
            let runner = kept.into_iter().find(|log| log.container == executor::RUNNER_CONTAINER);
            return Ok(futures::stream::iter(runner.map(|log| Ok(log.text))).boxed());
        }
        if let Some(refusal) = before_its_job(&operation) {
            return Err(refusal);
        }
        let start = async || {
            let redactor = self.run_redactor(&operation).await?;
            let lines = self.executor()?.follow_runner_log(operation.id, operation.state.is_active());
            Ok(live_logs::redact_stream(lines.map(|line| line.map_err(executor_error)).boxed(), redactor))
        };
        self.log_followers.follow(operation.id, start).await
    }

    /// The runner logs of `operation`, one this service read, whose kept logs are `archived` (read with
    /// [`Service::archived_logs`]; empty when it has none).
    pub async fn logs_of(
        &self,
        operation: &Operation,
        archived: &[ArchivedLog],
        tail_lines: Option<i64>,
        budget: &LogBudget,
    ) -> Result<Vec<ContainerLog>> {
        let lines = match tail_lines {
            None => None,
            Some(lines) => Some(
                usize::try_from(lines)
                    .ok()
                    .filter(|lines| *lines >= 1)
                    .ok_or_else(|| Invalid::new(InvalidReason::OutOfRange, "tailLines", "must be at least 1"))?,
            ),
        };
        if let Some(kept) = kept_logs(archived, budget)? {
            return Ok(kept
                .into_iter()
                .map(|log| ContainerLog {
                    log: run_log::tail_lines(&log.text, lines).to_owned(),
                    container: log.container,
                })
                .collect());
        }
        if let Some(refusal) = before_its_job(operation) {
            return Err(refusal);
        }
        let no_pod = |why: String| Error::Conflict { conflict: Conflict::NoRunnerPod, message: why };
        let redactor = self.run_redactor(operation).await?;
        // One byte over what is left is enough to tell a log over the budget: no more is read from the pod.
        let limit = budget.left().saturating_add(1);
        match self.executor()?.logs(operation.id, tail_lines, limit).await {
            Ok(logs) => {
                let bytes = logs.iter().map(|log| log.log.len()).sum();
                if !budget.spend(bytes) {
                    return Err(over_budget(budget));
                }
                Ok(live_logs::redact_logs(logs, &redactor))
            }
            Err(executor::Error::NoPod(_)) if !operation.state.is_active() => Err(no_pod(format!(
                "operation {} ended ({}) without a runner pod or kept logs",
                operation.id, operation.state
            ))),
            Err(executor::Error::NoPod(_)) => Err(no_pod(format!(
                "no runner pod exists for operation {} (stage {})",
                operation.id,
                operation.stage.as_str()
            ))),
            Err(error) => Err(executor_error(error)),
        }
    }

    /// The credential values of a running operation's run, to redact its live logs with.
    async fn run_redactor(&self, operation: &Operation) -> Result<Redactor> {
        let names = RunNames::of(operation);
        let values = self.executor()?.credential_values(&names).await.map_err(executor_error)?;
        Ok(Redactor::new(values))
    }
}
