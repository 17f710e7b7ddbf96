//! The reconciler: keeps each Runtime's runtime what its spec says, through the same service use cases as REST
//! and GraphQL, and the object's status what the service shows. Created: a provisioning, keyed by the object's
//! uid so that a restart or a second replica never queues two. A new generation: an upgrade, hibernation or
//! wake-up (each keyed by the uid and the generation). Deleted: the finalizer holds the object until the
//! deprovisioning succeeded. What the service refuses is a condition, never a retry loop: the object is looked at
//! again when it changes, or when its runtime's operation does ([`super::operation_feed`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::domain::managed_by::ResourceRef;
use crate::domain::tenant::Tenant;
use crate::domain::{OperationType, RuntimeId, RuntimeState};
use crate::service::{self, Requested, RuntimeStatus, Service};

use super::convert::{provision_request, upgrade_to};
use super::events::RuntimeEvents;
use super::kubeconfig_secret::publish_kubeconfig;
use super::operation_feed;
use super::resource::{FIELD_MANAGER, RuntimeResource, RuntimeResourceStatus};
use super::status::{Refusal, refused_status, resource_status};

/// Held on every Runtime until its deprovisioning succeeded.
pub const FINALIZER: &str = "provisioner.kubeopera.io/deprovision";
/// On a Runtime being deleted, the runtime's name forces its deprovisioning (as REST's `force` with the name as
/// confirmation): the state is given up where a destroy cannot finish.
pub const FORCE_ANNOTATION: &str = "provisioner.kubeopera.io/force-deprovision";

/// How soon an object is looked at again when neither it nor its runtime's operation changed: a change the
/// watch or the operations' feed missed is caught up.
const LOOK_AGAIN: Duration = Duration::from_secs(300);
/// After an error of the API server or the database.
const AFTER_ERROR: Duration = Duration::from_secs(10);

/// Which namespaces' Runtimes the process reconciles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeNamespaces {
    All,
    Only(Vec<String>),
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Service(#[from] service::Error),
}

struct Context {
    client: kube::Client,
    service: Service,
    events: RuntimeEvents,
}

/// The reconciler of one process: the Runtimes of `namespaces`, with `client` (the process's own identity).
pub struct RuntimeResources {
    pub client: kube::Client,
    pub service: Service,
    pub namespaces: RuntimeNamespaces,
}

impl RuntimeResources {
    /// Runs one controller per watched scope while this process holds the reconciler's lease (one process at a
    /// time does; see [`super::leadership`]), until `stopped` turns true.
    pub async fn run(self, stopped: watch::Receiver<bool>) -> Result<(), String> {
        run(self.client, self.service, self.namespaces, stopped).await
    }
}

/// The controllers run under the Lease in the namespace of the process's own client (its pod's namespace).
async fn run(
    client: kube::Client,
    service: Service,
    namespaces: RuntimeNamespaces,
    stopped: watch::Receiver<bool>,
) -> Result<(), String> {
    let namespace = client.default_namespace().to_owned();
    let identity = super::leadership::identity();
    let events = RuntimeEvents::new(client.clone(), identity.clone());
    let context = Arc::new(Context { client: client.clone(), service, events });
    let apis: Vec<(Api<RuntimeResource>, Option<String>)> = match namespaces {
        RuntimeNamespaces::All => vec![(Api::all(client.clone()), None)],
        RuntimeNamespaces::Only(names) => {
            names.iter().map(|name| (Api::namespaced(client.clone(), name), Some(name.clone()))).collect()
        }
    };
    let controllers = || {
        let feed = operation_feed::channel();
        let controllers: Vec<_> = apis
            .iter()
            .map(|(api, namespace)| {
                let mut stopped = stopped.clone();
                Controller::new(api.clone(), watcher::Config::default())
                    .reconcile_on(operation_feed::triggers(&feed, namespace.clone()))
                    .graceful_shutdown_on(async move {
                        let _ = stopped.wait_for(|stop| *stop).await;
                    })
                    .run(reconcile, error_policy, context.clone())
                    .for_each(|result| async move {
                        match result {
                            // An operation's change told after its object went.
                            Err(controller::Error::ObjectNotFound(object)) => {
                                tracing::debug!(%object, "a changed Runtime is gone");
                            }
                            Err(error) => tracing::warn!(%error, "a Runtime was not reconciled"),
                            Ok(_) => {}
                        }
                    })
            })
            .collect();
        let following = operation_feed::follow(context.service.clone(), feed);
        async move {
            tokio::select! {
                _ = futures::future::join_all(controllers) => {}
                () = following => {}
            }
        }
    };
    super::leadership::lead(client, &namespace, &identity, stopped.clone(), controllers).await
}

fn error_policy(_object: Arc<RuntimeResource>, error: &ReconcileError, _context: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconciling a Runtime failed; it is looked at again");
    Action::requeue(AFTER_ERROR)
}

/// One Runtime as it is now.
struct Reconciling<'a> {
    object: &'a RuntimeResource,
    api: Api<RuntimeResource>,
    service: Service,
    client: kube::Client,
    name: String,
    requested_by: String,
    uid: String,
    events: &'a RuntimeEvents,
}

#[tracing::instrument(skip_all, fields(namespace = object.namespace().as_deref().unwrap_or(""), name = %object.name_any()))]
async fn reconcile(object: Arc<RuntimeResource>, context: Arc<Context>) -> Result<Action, ReconcileError> {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let api = Api::namespaced(context.client.clone(), &namespace);
    let service = match Tenant::parse(&namespace) {
        Ok(tenant) => {
            let resource = ResourceRef { namespace: namespace.clone(), name: name.clone() };
            context.service.for_resource(tenant, resource)
        }
        Err(message) => {
            let message = format!("namespace {namespace}: {message}");
            let refusal = Refusal { reason: "InvalidTenant".to_owned(), message };
            write_status(&api, &object, refused_status(object.meta().generation, &refusal, None, Utc::now())).await?;
            return Ok(Action::await_change());
        }
    };
    let requested_by = format!("runtime-resource:{namespace}/{name}");
    let uid = object.uid().unwrap_or_default();
    let reconciling = Reconciling {
        object: &object,
        api,
        service,
        client: context.client.clone(),
        name,
        requested_by,
        uid,
        events: &context.events,
    };
    if object.meta().deletion_timestamp.is_some() { reconciling.clean_up().await } else { reconciling.apply().await }
}

/// The Secret a reconcile wrote the kubeconfig into, and until when that kubeconfig signs in.
struct Published {
    secret: String,
    expires_at: Option<chrono::DateTime<Utc>>,
}

impl Reconciling<'_> {
    async fn apply(&self) -> Result<Action, ReconcileError> {
        self.ensure_finalizer().await?;
        let recorded = self.object.status.as_ref().and_then(|status| status.runtime_id);
        let runtime_id = match (recorded, self.object.spec.adopt) {
            (Some(id), _) => id,
            (None, Some(id)) => match self.adopt(id).await? {
                Ok(id) => id,
                Err(refusal) => return self.refused(&refusal).await,
            },
            (None, None) => match self.provision().await? {
                Ok(id) => id,
                Err(refusal) => return self.refused(&refusal).await,
            },
        };
        let runtime = self.service.runtime_status(RuntimeId(runtime_id)).await?;
        let refusal = self.converge(&runtime).await?;
        let runtime = self.service.runtime_status(RuntimeId(runtime_id)).await?;
        let (published, forbidden) = match self.kubeconfig(&runtime).await {
            Err(ReconcileError::Kube(kube::Error::Api(status))) if status.code == 403 => (None, Some(forbidden())),
            published => (published?, None),
        };
        // A grant is no change of the object: a refused Secret is tried again soon. A kubeconfig with a lifetime is
        // looked at again well before it expires, so that the Secret holds its successor in time.
        let again = match (&forbidden, published.as_ref().and_then(|published| published.expires_at)) {
            (Some(_), _) => AFTER_ERROR,
            (None, Some(expires_at)) => LOOK_AGAIN.min(((expires_at - Utc::now()) / 4).to_std().unwrap_or(AFTER_ERROR)),
            (None, None) => LOOK_AGAIN,
        };
        let secret = published.map(|published| published.secret);
        self.report(&runtime, secret.as_deref(), refusal.or(forbidden).as_ref()).await?;
        Ok(Action::requeue(again.max(AFTER_ERROR)))
    }

    /// Takes over the runtime `spec.adopt` names and records it in the status at once.
    async fn adopt(&self, runtime_id: uuid::Uuid) -> Result<Result<uuid::Uuid, Refusal>, ReconcileError> {
        if let Err(error) = self.service.adopt_runtime(RuntimeId(runtime_id)).await {
            return Ok(Err(refusal_of(error)?));
        }
        self.record_runtime(runtime_id).await?;
        Ok(Ok(runtime_id))
    }

    async fn record_runtime(&self, runtime_id: uuid::Uuid) -> Result<(), ReconcileError> {
        let status = json!({ "runtimeId": runtime_id, "observedGeneration": self.object.meta().generation });
        self.patch_status(status).await
    }

    /// Queues the provisioning (once: keyed by the object's uid) and records its runtime in the status at once.
    async fn provision(&self) -> Result<Result<uuid::Uuid, Refusal>, ReconcileError> {
        let request = provision_request(&self.name, &self.object.spec);
        let accepted = match self.service.provision_runtime(request, Some(&self.uid), false, &self.requested_by).await {
            Ok(accepted) => accepted,
            Err(error) => return Ok(Err(refusal_of(error)?)),
        };
        let runtime_id = accepted.operation.runtime_id;
        tracing::info!(%runtime_id, replayed = accepted.replayed, "the Runtime's provisioning is queued");
        if !accepted.replayed {
            self.events.queued(self.object, &accepted.operation).await;
        }
        self.record_runtime(runtime_id).await?;
        Ok(Ok(runtime_id))
    }

    /// Queues what makes the runtime what the spec says, one change at a time and only while nothing runs: the
    /// protection and approval policy first (they queue nothing), then a wake-up, an upgrade or a hibernation.
    async fn converge(&self, runtime: &RuntimeStatus) -> Result<Option<Refusal>, ReconcileError> {
        let spec = &self.object.spec;
        let id = RuntimeId(runtime.runtime.id);
        let current = &runtime.runtime;
        if current.deleted_at.is_some() || runtime.last_operation.operation.state.is_active() {
            return Ok(None);
        }
        if let Some(protected) = spec.deletion_protection.filter(|protected| *protected != current.deletion_protection)
        {
            self.service.set_deletion_protection(id, protected).await?;
        }
        if let Some(policy) = spec.approval_policy.filter(|policy| *policy != current.approval_policy) {
            self.service.set_approval_policy(id, policy).await?;
        }
        let key = |change: &str| format!("{}:{}:{change}", self.uid, self.object.meta().generation.unwrap_or(0));
        let by = self.requested_by.as_str();
        let requested = if current.hibernated && !spec.hibernated {
            self.service.wake_up_runtime(id, by, Some(&key("wake"))).await
        } else if let Some(upgrade) = upgrade_to(&current.cluster_config, &spec.cluster) {
            self.service.upgrade_cluster(id, upgrade, false, None, by, Some(&key("upgrade"))).await
        } else if spec.hibernated && !current.hibernated {
            self.service.hibernate_runtime(id, by, Some(&key("hibernate"))).await
        } else {
            return Ok(None);
        };
        self.outcome(requested).await
    }

    /// Writes the kubeconfig into the object's Secret once the cluster exists; the Secret, or `None` before.
    async fn kubeconfig(&self, runtime: &RuntimeStatus) -> Result<Option<Published>, ReconcileError> {
        if !matches!(runtime.summary.state, RuntimeState::Ready | RuntimeState::Updating | RuntimeState::Hibernated) {
            return Ok(self
                .object
                .status
                .as_ref()
                .and_then(|status| status.kubeconfig_secret_ref.clone())
                .map(|r| Published { secret: r.name, expires_at: None }));
        }
        let handed_out = match self.service.kubeconfig(RuntimeId(runtime.runtime.id)).await {
            Ok(handed_out) => handed_out,
            Err(service::Error::Conflict { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let secret = publish_kubeconfig(&self.client, self.object, &handed_out).await?;
        Ok(Some(Published { secret, expires_at: handed_out.expires_at }))
    }

    async fn report(
        &self,
        runtime: &RuntimeStatus,
        secret: Option<&str>,
        refusal: Option<&Refusal>,
    ) -> Result<(), ReconcileError> {
        let before = self.object.status.as_ref();
        if let Some(refusal) = refusal {
            self.events.refused(self.object, refusal, before).await;
        }
        let generation = self.object.meta().generation;
        let status = resource_status(runtime, generation, secret, refusal, before, Utc::now());
        write_status(&self.api, self.object, status).await
    }

    async fn refused(&self, refusal: &Refusal) -> Result<Action, ReconcileError> {
        tracing::info!(reason = refusal.reason, message = refusal.message, "the Runtime's spec is refused");
        let before = self.object.status.as_ref();
        self.events.refused(self.object, refusal, before).await;
        write_status(
            &self.api,
            self.object,
            refused_status(self.object.meta().generation, refusal, before, Utc::now()),
        )
        .await?;
        Ok(Action::await_change())
    }

    /// The object goes once its runtime is deprovisioned (or never had one); a protected runtime keeps it, and
    /// says why, until the spec turns the protection off.
    async fn clean_up(&self) -> Result<Action, ReconcileError> {
        if !self.object.finalizers().iter().any(|finalizer| finalizer == FINALIZER) {
            return Ok(Action::await_change());
        }
        let Some(runtime_id) = self.object.status.as_ref().and_then(|status| status.runtime_id) else {
            return self.remove_finalizer().await;
        };
        let runtime = match self.service.runtime_status(RuntimeId(runtime_id)).await {
            Ok(runtime) => runtime,
            Err(service::Error::NotFound { .. }) => return self.remove_finalizer().await,
            Err(error) => return Err(error.into()),
        };
        if runtime.summary.state == RuntimeState::Deleted {
            return self.remove_finalizer().await;
        }
        // What runs now ends first (a deprovisioning queued meanwhile would be refused as a conflict).
        let running = &runtime.last_operation.operation;
        if running.state.is_active() && running.operation_type != OperationType::Deprovision {
            return Ok(Action::requeue(LOOK_AGAIN));
        }
        let refusal = self.deprovision(&runtime).await?;
        let runtime = self.service.runtime_status(RuntimeId(runtime_id)).await?;
        let secret = self.object.status.as_ref().and_then(|status| status.kubeconfig_secret_ref.clone());
        self.report(&runtime, secret.map(|secret| secret.name).as_deref(), refusal.as_ref()).await?;
        Ok(match refusal {
            Some(_) => Action::await_change(),
            None => Action::requeue(LOOK_AGAIN),
        })
    }

    async fn deprovision(&self, runtime: &RuntimeStatus) -> Result<Option<Refusal>, ReconcileError> {
        let id = RuntimeId(runtime.runtime.id);
        if runtime.runtime.deletion_protection && self.object.spec.deletion_protection == Some(false) {
            self.service.set_deletion_protection(id, false).await?;
        }
        let forced = self.object.annotations().get(FORCE_ANNOTATION) == Some(&self.name);
        let key = format!("{}:deprovision{}", self.uid, if forced { ":force" } else { "" });
        self.outcome(
            self.service.deprovision_runtime(id, Some(&self.name), forced, &self.requested_by, Some(&key)).await,
        )
        .await
    }

    /// A requested change: logged and an event when queued now; a refusal for a reason of the request; nothing
    /// when there was nothing to change.
    async fn outcome(&self, requested: service::Result<Requested>) -> Result<Option<Refusal>, ReconcileError> {
        match requested {
            Ok(requested) => {
                let operation = requested.operation();
                let operation_type = operation.operation_type.as_str();
                tracing::info!(operation_id = %operation.id, operation_type, "the Runtime's change is requested");
                if let Requested::Queued(operation) = &requested {
                    self.events.queued(self.object, operation).await;
                }
                Ok(None)
            }
            Err(service::Error::NothingToChange { .. }) => Ok(None),
            Err(error) => Ok(Some(refusal_of(error)?)),
        }
    }

    async fn ensure_finalizer(&self) -> Result<(), ReconcileError> {
        if self.object.finalizers().iter().any(|finalizer| finalizer == FINALIZER) {
            return Ok(());
        }
        let mut finalizers = self.object.finalizers().to_vec();
        finalizers.push(FINALIZER.to_owned());
        self.patch_finalizers(finalizers).await
    }

    async fn remove_finalizer(&self) -> Result<Action, ReconcileError> {
        let finalizers = self.object.finalizers().iter().filter(|finalizer| *finalizer != FINALIZER).cloned().collect();
        self.patch_finalizers(finalizers).await?;
        tracing::info!("the Runtime's runtime is deprovisioned; the object goes");
        self.events.deprovisioned(self.object).await;
        Ok(Action::await_change())
    }

    /// A merge patch that names the version it was computed from: a concurrent change is a conflict, not lost.
    async fn patch_finalizers(&self, finalizers: Vec<String>) -> Result<(), ReconcileError> {
        let patch = json!({ "metadata": {
            "finalizers": finalizers, "resourceVersion": self.object.resource_version(),
        }});
        self.api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    async fn patch_status(&self, status: serde_json::Value) -> Result<(), ReconcileError> {
        let patch = json!({ "status": status });
        self.api.patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }
}

/// Writes `status` whole when it differs from the object's (an unchanged status writes nothing, so that the
/// object's watchers see no change).
async fn write_status(
    api: &Api<RuntimeResource>,
    object: &RuntimeResource,
    status: RuntimeResourceStatus,
) -> Result<(), ReconcileError> {
    if object.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": RuntimeResource::api_version(&()), "kind": RuntimeResource::kind(&()), "status": status,
    });
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(&object.name_any(), &apply, &Patch::Apply(&patch)).await?;
    Ok(())
}

/// What the service refused for a reason of the request (the object says why and waits for a change of it); an
/// error of a dependency is returned to be tried again.
fn refusal_of(error: service::Error) -> Result<Refusal, ReconcileError> {
    let message = error.to_string();
    let reason = match &error {
        service::Error::Invalid(_) => "InvalidSpec",
        service::Error::NotFound { .. } => "NotFound",
        service::Error::NothingToChange { .. } => "NothingToChange",
        service::Error::IdempotencyKeyReused => "AlreadyRequested",
        service::Error::Conflict { conflict, .. } => {
            return Ok(Refusal { reason: pascal_case(conflict.as_str()), message });
        }
        service::Error::OverBudget { .. }
        | service::Error::TooManyStreams { .. }
        | service::Error::Unavailable { .. }
        | service::Error::Store(_) => return Err(error.into()),
    };
    Ok(Refusal { reason: reason.to_owned(), message })
}

/// The kubeconfig Secret may not be written in the object's namespace: a namespace's admin grants it.
fn forbidden() -> Refusal {
    Refusal {
        reason: "KubeconfigForbidden".to_owned(),
        message: "the provisioner may not write the kubeconfig's Secret in this namespace: bind the ClusterRole \
                  cluster-provisioner-runtime-kubeconfigs to its ServiceAccount here (docs/concepts/declarative.md)"
            .to_owned(),
    }
}

/// `name_taken` as a condition's reason: `NameTaken`.
fn pascal_case(snake: &str) -> String {
    snake
        .split('_')
        .map(|word| {
            let mut letters = word.chars();
            letters.next().map(|first| first.to_ascii_uppercase().to_string() + letters.as_str()).unwrap_or_default()
        })
        .collect()
}
