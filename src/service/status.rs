//! Reads: runtimes and operations with their stages, the live Job state, pages, and the kubeconfig.

use chrono::{DateTime, Utc};

use super::validation::{Invalid, InvalidReason};
use super::{Error, Result, Service, validation};
use crate::domain::run::{JobState, RunNames, Stage};
use crate::domain::{
    ClusterConfig, LastError, Operation, OperationId, OperationState, Runtime, RuntimeId, RuntimeState, RuntimeSummary,
    StageEntry, certificates_expiring,
};
use crate::store::{self, RuntimeRecord};

/// A runtime with its last operation (every runtime has one: it is created with its provisioning), its state and
/// conditions, and whether it sleeps: what both APIs show of a runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeStatus {
    pub runtime: Runtime,
    pub last_operation: OperationWithStages,
    pub summary: RuntimeSummary,
    pub hibernation: HibernationStatus,
}

impl RuntimeStatus {
    /// The configuration an upgrade queued or running applies (not a dry run's, which applies nothing).
    pub fn target_config(&self) -> Option<&ClusterConfig> {
        let operation = &self.last_operation.operation;
        let applies = operation.state.is_active() && !operation.dry_run;
        operation.target_config.as_ref().filter(|_| applies)
    }
}

/// A runtime with its last operation, as the use cases that change it read it.
pub(super) struct Latest {
    pub(super) runtime: Runtime,
    pub(super) last_operation: Operation,
    /// When its last operation entered each of its stages, in stage order.
    pub(super) stages: Vec<StageEntry>,
    /// When its provisioning (no dry run) succeeded, if it did: its cluster exists since.
    pub(super) provisioned_at: Option<DateTime<Utc>>,
}

/// An operation with when it entered each of its stages: what both APIs show of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationWithStages {
    pub operation: Operation,
    pub stages: Vec<StageEntry>,
}

/// One page of a list, and whether another follows.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub has_next_page: bool,
}

/// Whether a runtime sleeps, and whether a hibernation would be accepted now (Kyma's `HibernationStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HibernationStatus {
    pub hibernated: bool,
    pub hibernation_possible: bool,
}

impl HibernationStatus {
    /// `provisioned`: whether a provisioning of the runtime succeeded, so its cluster exists.
    fn of(runtime: &Runtime, last_operation: &Operation, provisioned: bool) -> Self {
        let changeable = runtime.deleted_at.is_none() && !runtime.preview && !last_operation.state.is_active();
        HibernationStatus {
            hibernated: runtime.hibernated,
            hibernation_possible: changeable && !runtime.hibernated && provisioned,
        }
    }
}

/// Which runtimes a page of [`Service::runtimes`] holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeQuery<'a> {
    /// Only those whose last operation is in this state.
    pub last_operation_state: Option<OperationState>,
    /// Only those in this state.
    pub state: Option<RuntimeState>,
    /// Only those with this label, as `key=value`.
    pub label: Option<&'a str>,
    /// Only those of this name.
    pub name: Option<&'a str>,
    /// Deprovisioned ones too.
    pub include_deleted: bool,
    /// Only previews (`true`) or only runtimes that are none (`false`); both when `None`.
    pub preview: Option<bool>,
    /// Only those whose record or last operation changed at or after this time.
    pub updated_since: Option<DateTime<Utc>>,
}

impl RuntimeQuery<'_> {
    /// Every runtime, deprovisioned ones and previews included: what `/api/v1/provisions` and GraphQL's
    /// `runtimes` have always listed.
    pub fn everything() -> Self {
        RuntimeQuery { include_deleted: true, ..RuntimeQuery::default() }
    }
}

/// Largest page of `runtimes`.
pub const MAX_PAGE_SIZE: i32 = 100;
/// `first` of a page when it is left out.
pub const DEFAULT_PAGE_SIZE: i32 = 20;

/// How long a request of a process that just started waits for the Job cache's first list.
pub(super) const JOB_CACHE_SYNC: std::time::Duration = std::time::Duration::from_secs(5);

/// How long an operation ran: from its first start to its end, or to now while it runs.
pub fn duration_seconds(operation: &Operation) -> Option<f64> {
    let started = operation.started_at?;
    let ended = operation.finished_at.filter(|_| !operation.state.is_active()).unwrap_or_else(store::now);
    Some((ended - started).num_milliseconds().max(0) as f64 / 1000.0)
}

/// A runtime's status from its record, its last operation and when it was provisioned.
fn status_of(
    runtime: Runtime,
    last_operation: OperationWithStages,
    provisioned_at: Option<DateTime<Utc>>,
) -> RuntimeStatus {
    let mut summary = RuntimeSummary::of(&runtime, &last_operation.operation, provisioned_at);
    summary.conditions.extend(certificates_expiring(&runtime, store::now()));
    RuntimeStatus {
        summary,
        hibernation: HibernationStatus::of(&runtime, &last_operation.operation, provisioned_at.is_some()),
        runtime,
        last_operation,
    }
}

fn operation_not_found(operation_id: OperationId) -> Error {
    Error::NotFound { what: "operation", id: operation_id.0.to_string() }
}

/// `first` of a page: [`DEFAULT_PAGE_SIZE`] when left out, at most [`MAX_PAGE_SIZE`].
fn page_size(first: Option<i32>) -> Result<u64> {
    let first = first.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&first) {
        return Err(Invalid::new(InvalidReason::OutOfRange, "first", format!("must be 1 to {MAX_PAGE_SIZE}")).into());
    }
    Ok(first as u64)
}

impl Service {
    /// An operation with its stages, in one statement (two for a tenant's service, which checks the runtime).
    pub async fn operation_status(&self, operation_id: OperationId) -> Result<OperationWithStages> {
        let found = self.store.find_operation_with_stages(operation_id.0).await?;
        let (operation, stages) = found.ok_or_else(|| operation_not_found(operation_id))?;
        Ok(OperationWithStages { operation: self.visible(operation).await?, stages })
    }

    /// An operation this service may see, with its live Job state.
    pub(super) async fn visible_operation(&self, operation_id: OperationId) -> Result<Operation> {
        let operation = self.store.find_operation(operation_id.0).await?;
        self.visible(operation.ok_or_else(|| operation_not_found(operation_id))?).await
    }

    /// `operation` with its live Job state when this service may see it (a tenant's sees only its runtimes').
    async fn visible(&self, operation: Operation) -> Result<Operation> {
        if self.tenant.is_some() {
            let runtime = self.store.find_runtime(operation.runtime_id).await?;
            let not_found = || operation_not_found(OperationId(operation.id));
            runtime.filter(|runtime| self.sees(runtime)).ok_or_else(not_found)?;
        }
        Ok(self.with_live_job_state(operation))
    }

    /// `operation` with its stages, as both APIs show it (the answer of a change, an event of a subscription).
    pub async fn with_stages(&self, operation: Operation) -> Result<OperationWithStages> {
        let mut operations = self.all_with_stages(vec![operation]).await?;
        Ok(operations.pop().expect("one operation in, one out"))
    }

    /// `operations` with their stages, read in one query.
    async fn all_with_stages(&self, operations: Vec<Operation>) -> Result<Vec<OperationWithStages>> {
        let ids: Vec<uuid::Uuid> = operations.iter().map(|operation| operation.id).collect();
        let mut stages = self.store.stages_of(&ids).await?;
        Ok(operations
            .into_iter()
            .map(|operation| OperationWithStages {
                stages: stages.remove(&operation.id).unwrap_or_default(),
                operation,
            })
            .collect())
    }

    /// An active operation as its Job shows it right now (from the watch-backed cache, no API request): a Job
    /// that failed a second ago reads as failed before the worker has handled it.
    fn with_live_job_state(&self, mut operation: Operation) -> Operation {
        let Some(executor) = &self.executor else { return operation };
        if !operation.state.is_active() {
            return operation;
        }
        let names = RunNames::of(&operation);
        match executor.cached_job_state(&names, operation.id) {
            JobState::Failed { reason, message } => {
                operation.state = OperationState::Failed;
                operation.message = message.clone();
                operation.last_error = Some(LastError::of_failed_run(reason, message));
            }
            JobState::Succeeded if operation.stage == Stage::WaitForJob => {
                operation.message = format!("Job {} completed; finishing the operation", names.job);
            }
            JobState::Succeeded | JobState::Running | JobState::Missing => {}
        }
        operation
    }

    /// A runtime with its last operation and whether it sleeps, in one statement.
    pub async fn runtime_status(&self, runtime_id: RuntimeId) -> Result<RuntimeStatus> {
        let Latest { runtime, last_operation, stages, provisioned_at } = self.latest(runtime_id).await?;
        Ok(status_of(runtime, OperationWithStages { operation: last_operation, stages }, provisioned_at))
    }

    /// A runtime this service may see, with its last operation, its stages and when it was provisioned, in one
    /// statement.
    /// [`Self::latest`] of a runtime this service may change (see [`Service::check_writer`]).
    pub(super) async fn latest_to_change(&self, runtime_id: RuntimeId) -> Result<Latest> {
        let latest = self.latest(runtime_id).await?;
        self.check_writer(&latest.runtime)?;
        Ok(latest)
    }

    pub(super) async fn latest(&self, runtime_id: RuntimeId) -> Result<Latest> {
        let id = runtime_id.0;
        let not_found = || Error::NotFound { what: "runtime", id: id.to_string() };
        let record = self.store.find_runtime_record(id).await?.filter(|record| self.sees(&record.runtime));
        let RuntimeRecord { runtime, last_operation, provisioned_at } = record.ok_or_else(not_found)?;
        let (last_operation, stages) = last_operation.ok_or_else(not_found)?;
        let last_operation = self.with_live_job_state(last_operation);
        Ok(Latest { runtime, last_operation, stages, provisioned_at })
    }

    /// The statuses of runtimes with their last operations, in two queries whatever their number: the stages of
    /// the operations, and which runtimes were provisioned when.
    async fn statuses(&self, runtimes: Vec<(Runtime, Operation)>) -> Result<Vec<RuntimeStatus>> {
        let ids: Vec<uuid::Uuid> = runtimes.iter().map(|(runtime, _)| runtime.id).collect();
        let provisioned = self.store.provisioned_among(&ids).await?;
        let (runtimes, operations): (Vec<Runtime>, Vec<Operation>) = runtimes.into_iter().unzip();
        let operations = self.all_with_stages(operations).await?;
        Ok(runtimes
            .into_iter()
            .zip(operations)
            .map(|(runtime, last_operation)| {
                let provisioned_at = provisioned.get(&runtime.id).copied();
                status_of(runtime, last_operation, provisioned_at)
            })
            .collect())
    }

    /// One page of runtimes in creation order that `query` asks for; in a fixed number of queries whatever the
    /// page size.
    pub async fn runtimes(
        &self,
        query: RuntimeQuery<'_>,
        after: Option<&str>,
        first: Option<i32>,
    ) -> Result<Page<RuntimeStatus>> {
        let first = page_size(first)?;
        let label = query.label.map(|filter| validation::parse_label_filter("label", filter)).transpose()?;
        let after = after.map(|cursor| validation::parse_id("after", cursor)).transpose()?;
        let filter = store::RuntimeFilter {
            tenant: self.tenant.as_ref(),
            last_operation_state: query.last_operation_state,
            state: query.state,
            label: label.as_ref().map(|(key, value)| (key.as_str(), value.as_str())),
            name: query.name,
            include_deleted: query.include_deleted,
            preview: query.preview,
            updated_since: query.updated_since,
        };
        let page = self.store.list_runtimes(&filter, after, first).await?;
        let runtimes = page
            .runtimes
            .into_iter()
            .filter_map(|(runtime, last_operation)| Some((runtime, self.with_live_job_state(last_operation?))))
            .collect();
        Ok(Page { items: self.statuses(runtimes).await?, has_next_page: page.has_next_page })
    }

    /// One page of a runtime's operations, newest first, with their stages; `after` is the cursor (id) of the
    /// last operation of the previous page.
    pub async fn runtime_operations(
        &self,
        runtime_id: RuntimeId,
        after: Option<&str>,
        first: Option<i32>,
    ) -> Result<Page<OperationWithStages>> {
        let first = page_size(first)?;
        let id = runtime_id.0;
        let after = after.map(|cursor| validation::parse_id("after", cursor)).transpose()?;
        if !self.store.find_runtime(id).await?.is_some_and(|runtime| self.sees(&runtime)) {
            return Err(Error::NotFound { what: "runtime", id: id.to_string() });
        }
        let page = self.store.list_operations(id, after, first).await?;
        let operations = page.operations.into_iter().map(|operation| self.with_live_job_state(operation)).collect();
        Ok(Page { items: self.all_with_stages(operations).await?, has_next_page: page.has_next_page })
    }
}
