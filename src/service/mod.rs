//! Use cases of the provisioner. Both APIs (GraphQL and REST) call these functions and nothing below them, so
//! validation, conflicts and errors are the same whichever door a request comes through.

mod adoption;
mod approval;
mod certificate_renewal;
mod certificates;
mod changes;
mod deletion;
mod error;
mod forced_deletion;
mod health;
mod idempotency;
mod kubeconfigs;
mod live_logs;
mod log_followers;
mod logs;
mod managed_changes;
mod operation_changes;
mod operation_events;
mod provision;
mod retry;
mod status;
mod streams;
pub mod validation;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::credentials::Credentials;
use crate::domain::deletion::DeletionPolicy;
use crate::domain::managed_by::ResourceRef;
pub use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::domain::tenant::Tenant;
use crate::domain::{Runtime, TraceParent};
use crate::executor::Executor;
pub use crate::store::ArchivedLog;
use crate::store::Store;
pub use changes::Requested;
pub use error::{Conflict, Error, Result};
use error::{executor_error, operation_in_progress, over_budget, too_many};
pub use health::ExecutorHealth;
pub use kubeconfigs::HandedOut;
pub use provision::ProvisionAccepted;
use status::JOB_CACHE_SYNC;
use status::Latest;
pub use status::{
    DEFAULT_PAGE_SIZE, HibernationStatus, MAX_PAGE_SIZE, OperationWithStages, Page, RuntimeQuery, RuntimeStatus,
    duration_seconds,
};
pub use validation::{
    ApprovalPolicyChange, DeletionProtectionChange, Invalid, InvalidReason, Rejected, RuntimePatch,
    deserialize_naming_every_field, parse_operation_id, parse_runtime_id, runtime_patch_from_json, upgrade_from_json,
};

/// The use cases, for every runtime or for one tenant's; cheap to clone (each request takes its own), since all
/// but the tenant is shared.
#[derive(Clone)]
pub struct Service {
    shared: Arc<Shared>,
    /// The tenant this service acts for (see [`Service::for_tenant`]); `None` sees every runtime.
    tenant: Option<Tenant>,
    /// The `Runtime` resource this service acts for (see [`Service::for_resource`]): the only one that changes the
    /// runtimes it manages.
    resource: Option<ResourceRef>,
}

/// What every [`Service`] of a process shares; its fields read as the service's own.
pub struct Shared {
    store: Store,
    policy: ValidationPolicy,
    credentials: Credentials,
    executor: Option<Executor>,
    /// Wakes this process's worker when an operation is queued.
    wake: Arc<Notify>,
    watches: operation_changes::Watches,
    log_followers: log_followers::LogFollowers,
    /// How long an `Idempotency-Key` replays its first answer (`APP_IDEMPOTENCY_KEY_TTL`).
    idempotency_ttl: chrono::TimeDelta,
    /// How many bytes of logs one request may read (`APP_MAX_LOG_BYTES_PER_REQUEST`).
    log_bytes_per_request: usize,
    streams: streams::Streams,
    /// Open WebSockets, counted apart from the streams they carry, to the same limits.
    sockets: streams::Streams,
    /// Which runtimes are protected from deletion when created, and whether a deletion must be confirmed.
    deletion: DeletionPolicy,
    /// How long a minted kubeconfig signs in (`APP_KUBECONFIG_LIFETIME`).
    kubeconfig_lifetime: std::time::Duration,
}

impl std::ops::Deref for Service {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// The service's own settings.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    pub idempotency_key_ttl: std::time::Duration,
    pub log_bytes_per_request: usize,
    pub stream_limits: StreamLimits,
    pub deletion: DeletionPolicy,
    pub kubeconfig_lifetime: std::time::Duration,
}

pub use operation_events::OperationEvent;
pub use streams::{StreamLimits, StreamSlot};

impl Service {
    pub fn new(
        store: Store,
        policy: ValidationPolicy,
        credentials: Credentials,
        executor: Option<Executor>,
        wake: Arc<Notify>,
        settings: ServiceSettings,
    ) -> Self {
        let idempotency_ttl =
            chrono::TimeDelta::from_std(settings.idempotency_key_ttl).unwrap_or(chrono::TimeDelta::MAX);
        let shared = Shared {
            store,
            policy,
            credentials,
            executor,
            wake,
            watches: operation_changes::Watches::default(),
            log_followers: log_followers::LogFollowers::default(),
            idempotency_ttl,
            log_bytes_per_request: settings.log_bytes_per_request,
            streams: streams::Streams::new(settings.stream_limits),
            sockets: streams::Streams::new(settings.stream_limits),
            deletion: settings.deletion,
            kubeconfig_lifetime: settings.kubeconfig_lifetime,
        };
        Service { shared: Arc::new(shared), tenant: None, resource: None }
    }

    /// This service for a request that names `tenant`: it creates runtimes of that tenant and finds no other
    /// runtime and no operation of one (as not found, so that nothing tells another tenant's ids apart from
    /// unknown ones). Without a tenant, every runtime.
    pub fn for_tenant(&self, tenant: Option<Tenant>) -> Service {
        Service { shared: self.shared.clone(), tenant, resource: None }
    }

    /// This service for the reconciler of the `Runtime` resource `resource`, whose namespace is `tenant`: the
    /// runtimes it creates or adopts are managed by it, and it alone changes them.
    pub fn for_resource(&self, tenant: Tenant, resource: ResourceRef) -> Service {
        Service { shared: self.shared.clone(), tenant: Some(tenant), resource: Some(resource) }
    }

    /// Refuses a change of `runtime` when a `Runtime` resource other than the one this service acts for manages
    /// it.
    fn check_writer(&self, runtime: &Runtime) -> Result<()> {
        match &runtime.managed_by {
            Some(manager) if self.resource.as_ref() != Some(manager) => Err(Error::Conflict {
                conflict: Conflict::ManagedByResource,
                message: format!(
                    "runtime {} is managed by the Runtime resource {manager}: change that object instead",
                    runtime.id
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Whether `runtime` is one this service may see.
    fn sees(&self, runtime: &Runtime) -> bool {
        self.tenant.as_ref().is_none_or(|tenant| runtime.tenant.as_ref() == Some(tenant))
    }

    /// A place for one long-lived stream of `caller` in this service's tenant (a followed log, a subscription),
    /// held until the slot is dropped; refused when the caller in this tenant or everyone together holds as many
    /// as allowed.
    pub fn open_stream(&self, caller: &str) -> Result<StreamSlot> {
        self.streams.open(self.holder(caller)).map_err(|full| too_many("streams", caller, full))
    }

    /// A place for one open WebSocket of `caller` in this service's tenant, to the same limits as streams.
    pub fn open_socket(&self, caller: &str) -> Result<StreamSlot> {
        self.sockets.open(self.holder(caller)).map_err(|full| too_many("WebSockets", caller, full))
    }

    fn holder(&self, caller: &str) -> streams::Holder {
        streams::Holder { username: caller.to_owned(), tenant: self.tenant.clone() }
    }
}

/// The trace context of the request being served, which the operation it queues keeps; `None` without traces.
fn trace_of_request() -> Option<TraceParent> {
    crate::telemetry::current_traceparent().and_then(|traceparent| TraceParent::parse(&traceparent))
}
