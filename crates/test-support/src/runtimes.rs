//! Runtime resources on the test control plane: the definition installed as the chart installs it, Runtimes of the
//! REST example's configuration, and waiting for what the reconciler writes into them.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use provisioner::declarative::crd::runtime_crd;
use provisioner::declarative::resource::{ResourceCondition, RuntimeResource};
use provisioner::domain::{ProvisionRequest, Topology};
use serde_json::{Value, json};
use test_control_plane::ControlPlane;

use crate::Backend;
use crate::auth_service::aws_credential;
use crate::engine::{Engine, KUBECONFIG_OUTPUT, Process};

/// How long [`wait_for`] waits.
pub const WAIT: Duration = Duration::from_secs(60);

/// Installs the chart's definition (server-side apply: every test may) and waits until it is served.
pub async fn install_definition(client: kube::Client) {
    let definitions: Api<CustomResourceDefinition> = Api::all(client);
    let definition = runtime_crd();
    let name = definition.metadata.name.clone().unwrap();
    let apply = PatchParams::apply("provisioner-tests").force();
    definitions.patch(&name, &apply, &Patch::Apply(&definition)).await.expect("the definition installs");
    let established = await_condition(definitions, &name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(30), established).await.expect("established in time").unwrap();
}

/// A Runtime of the REST example's configuration.
pub fn runtime(name: &str, topology: Topology) -> Value {
    let request = serde_json::to_value(ProvisionRequest::example_named(topology, name)).unwrap();
    let mut spec = request["clusterConfig"].clone();
    spec["description"] = request["runtimeInput"]["description"].clone();
    json!({
        "apiVersion": "provisioner.kubeopera.io/v1alpha1",
        "kind": "Runtime",
        "metadata": { "name": name },
        "spec": spec,
    })
}

/// Polls the Runtime until `check` accepts it (or it is gone, for `None`) within [`WAIT`], panicking with the last
/// seen object otherwise.
pub async fn wait_for(
    runtimes: &Api<RuntimeResource>,
    name: &str,
    what: &str,
    check: impl Fn(Option<&RuntimeResource>) -> bool,
) -> Option<RuntimeResource> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let object = runtimes.get_opt(name).await.expect("read the Runtime");
        if check(object.as_ref()) {
            return object;
        }
        assert!(tokio::time::Instant::now() < deadline, "the Runtime {name} did not get {what}: {object:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn condition<'a>(object: &'a RuntimeResource, condition_type: &str) -> Option<&'a ResourceCondition> {
    object.status.as_ref()?.conditions.iter().find(|condition| condition.condition_type == condition_type)
}

pub fn is_ready(object: Option<&RuntimeResource>) -> bool {
    object.and_then(|object| condition(object, "Ready")).is_some_and(|ready| ready.status == "True")
}

pub fn state_is(state: &'static str) -> impl Fn(Option<&RuntimeResource>) -> bool {
    move |object| object.and_then(|object| object.status.as_ref()?.state.clone()).as_deref() == Some(state)
}

/// The runtime id the reconciler recorded in the Runtime's status, once it has.
fn runtime_id(object: Option<&RuntimeResource>) -> Option<uuid::Uuid> {
    object?.status.as_ref()?.runtime_id
}

/// A tenant's namespace on the shared control plane with the Runtime definition installed: the control plane, its
/// admin client and the namespace.
pub async fn tenant_namespace(prefix: &str) -> (&'static ControlPlane, kube::Client, String) {
    let control_plane = test_control_plane::shared().await;
    let admin = control_plane.admin_client().expect("admin client");
    install_definition(admin.clone()).await;
    let tenant = control_plane.new_namespace(prefix).await.expect("the tenant's namespace");
    (control_plane, admin, tenant)
}

/// An engine whose process reconciles the Runtimes of `tenant`, which has its own `cred-aws-1`.
pub async fn reconciling_engine(backend: Backend, tenant: &str) -> (Engine, Process) {
    let (engine, process) = Engine::start(backend, &[("APP_RUNTIME_RESOURCES", tenant)]).await;
    engine.app.auth.add_tenant_credential(tenant, "cred-aws-1", aws_credential());
    (engine, process)
}

/// Waits until the reconciler recorded the Runtime `name`'s runtime, and returns its id.
pub async fn recorded_runtime(runtimes: &Api<RuntimeResource>, name: &str) -> uuid::Uuid {
    let object = wait_for(runtimes, name, "a runtime", |object| runtime_id(object).is_some()).await;
    runtime_id(object.as_ref()).expect("a runtime id")
}

/// The stand-in runner of the runtime's `kind` Job (`provision`, `upgrade`, ...) succeeds, publishing the
/// kubeconfig into the runtime's outputs Secret.
pub async fn run_succeeds(engine: &Engine, kind: &str, runtime_id: uuid::Uuid) {
    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&format!("{kind}-{runtime_id}"), Some((&outputs, KUBECONFIG_OUTPUT))).await;
}
