//! The runner's identity, one per run (issue #52 item 5; `src/executor/identity.rs`), on the real test control
//! plane with the production RBAC: a run's pod may update its own runtime's outputs Secret and no other Secret, and
//! its ServiceAccount, Role and RoleBinding are created idempotently by the worker (as `cluster-provisioner`, which
//! may grant no more than it holds) and go with the run: deleted by its Cleanup, and by the garbage collector of the
//! real kube-controller-manager with the Job.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams, PropagationPolicy};
use kube::{Api, Client, Resource};
use provisioner::domain::run::RunNames;
use provisioner::domain::{OperationType, RunAction};
use provisioner::executor::{Executor, ModulesSettings, RunRef};
use provisioner::settings::Settings;
use runner_contract::modules::ModulesSource;
use test_support::engine::{Engine, KUBECONFIG_OUTPUT, apply_production_rbac};
use test_support::{Backend, provision_body};
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(60);

fn forbidden<T: std::fmt::Debug>(result: kube::Result<T>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.code == 403)
}

fn secret(name: &str) -> Secret {
    Secret {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        data: Some(BTreeMap::from([("kubeconfig".to_owned(), ByteString(b"planted".to_vec()))])),
        ..Secret::default()
    }
}

/// The ServiceAccount the pods of the operation's Job run as.
async fn pod_identity(engine: &Engine, operation_id: &str) -> String {
    let jobs = engine.jobs_of_operation(operation_id).await;
    let pod = jobs[0].spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    pod.service_account_name.clone().expect("the Job names its ServiceAccount")
}

/// Two runtimes provisioning at once: the first run's pod identity may update its runtime's outputs Secret, and is
/// refused updating the other run's, creating any Secret, and reading, updating or deleting any other Secret (the
/// credentials Secrets); it may still look up pods and Jobs (a stale state lock's holder). Both runs then succeed
/// with their own identities, and each identity is gone once its run has ended.
#[tokio::test]
async fn a_runs_pod_may_update_its_own_outputs_secret_and_no_other_secret() {
    let (engine, process) = Engine::start(Backend::Postgres, &[]).await;
    let (runtime, operation) = engine.provision(&provision_body("identity-own")).await;
    let (other_runtime, other_operation) = engine.provision(&provision_body("identity-other")).await;
    engine.wait_for_stage(&operation, "WaitForJob", WAIT).await;
    engine.wait_for_stage(&other_operation, "WaitForJob", WAIT).await;
    let (job, other_job) = (format!("provision-{runtime}"), format!("provision-{other_runtime}"));
    let (outputs, other_outputs) = (format!("{job}-outputs"), format!("{other_job}-outputs"));

    let account = pod_identity(&engine, &operation).await;
    assert_eq!(account, job, "the run's own ServiceAccount, named after its Job");
    assert_ne!(account, pod_identity(&engine, &other_operation).await);
    // What the worker created before the Job: the outputs Secret, empty and of the runtime.
    let created = engine.secret(&outputs).await.expect("the worker creates the outputs Secret");
    assert!(created.data.unwrap_or_default().is_empty(), "created empty");
    assert_eq!(created.metadata.labels.unwrap()["kubeopera.io/runtime-id"], runtime);

    let runner = engine.control_plane.client_for_service_account(&engine.namespace, &account).await.unwrap();
    let secrets = Api::<Secret>::namespaced(runner.clone(), &engine.namespace);
    engine.publish_outputs_as(&account, &outputs, KUBECONFIG_OUTPUT).await.expect("it updates its own outputs");
    let refused = engine.publish_outputs_as(&account, &other_outputs, "planted").await;
    assert!(forbidden(refused), "another run's outputs Secret");
    let credentials = format!("{job}-credentials");
    for name in [&credentials, &format!("{other_job}-credentials")] {
        assert!(forbidden(secrets.replace(name, &PostParams::default(), &secret(name)).await), "update {name}");
        assert!(forbidden(secrets.get(name).await), "read {name}");
        assert!(forbidden(secrets.delete(name, &DeleteParams::default()).await), "delete {name}");
    }
    for name in ["planted", &format!("provision-{}-outputs", Uuid::new_v4()), &outputs] {
        assert!(forbidden(secrets.create(&PostParams::default(), &secret(name)).await), "create {name}");
    }
    assert!(forbidden(secrets.get(&outputs).await), "it never reads its outputs back");
    assert!(forbidden(secrets.delete(&outputs, &DeleteParams::default()).await));
    assert!(forbidden(secrets.list(&ListParams::default()).await));
    // What a stale state lock's takeover asks, and nothing more of pods and Jobs.
    let pods = Api::<Pod>::namespaced(runner.clone(), &engine.namespace);
    assert!(pods.get_opt("no-such-pod").await.is_ok());
    assert!(Api::<Job>::namespaced(runner.clone(), &engine.namespace).list(&ListParams::default()).await.is_ok());
    assert!(forbidden(
        Api::<Job>::namespaced(runner.clone(), &engine.namespace).delete(&job, &DeleteParams::default()).await
    ));
    assert!(forbidden(Api::<ConfigMap>::namespaced(runner, &engine.namespace).get(&format!("{job}-config")).await));
    assert_eq!(engine.secret(&other_outputs).await.unwrap().data.unwrap_or_default().len(), 0, "left as it was");

    engine.runner_succeeds(&job, Some((&outputs, KUBECONFIG_OUTPUT))).await;
    engine.runner_succeeds(&other_job, Some((&other_outputs, KUBECONFIG_OUTPUT))).await;
    for runtime_id in [&runtime, &other_runtime] {
        let done = engine.wait_for_status(runtime_id, &["succeeded", "failed"], WAIT).await;
        assert_eq!(done["status"], "succeeded", "{done}");
    }
    // The run's Cleanup deleted its identity (the Jobs stay a week, for their logs).
    for name in [&job, &other_job] {
        assert!(identity_objects(&engine.admin, &engine.namespace, name).await.is_empty(), "{name}");
        assert!(Api::<Job>::namespaced(engine.admin.clone(), &engine.namespace).get_opt(name).await.unwrap().is_some());
    }
    process.stop().await;
}

/// Which of the ServiceAccount, Role and RoleBinding named `name` exist.
async fn identity_objects(admin: &Client, namespace: &str, name: &str) -> Vec<&'static str> {
    let mut present = Vec::new();
    if Api::<ServiceAccount>::namespaced(admin.clone(), namespace).get_opt(name).await.unwrap().is_some() {
        present.push("ServiceAccount");
    }
    if Api::<Role>::namespaced(admin.clone(), namespace).get_opt(name).await.unwrap().is_some() {
        present.push("Role");
    }
    if Api::<RoleBinding>::namespaced(admin.clone(), namespace).get_opt(name).await.unwrap().is_some() {
        present.push("RoleBinding");
    }
    present
}

async fn owner_uids<K>(api: &Api<K>, name: &str) -> Vec<String>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object = api.get(name).await.unwrap_or_else(|error| panic!("{name}: {error}"));
    object.meta().owner_references.iter().flatten().map(|owner| owner.uid.clone()).collect()
}

/// The executor as the service runs it: the `cluster-provisioner` ServiceAccount with the production Role.
async fn executor(namespace: &str) -> Executor {
    let control_plane = test_control_plane::shared().await;
    let worker = control_plane.client_for_service_account(namespace, "cluster-provisioner").await.unwrap();
    let mut settings = Settings::from_environment(HashMap::new()).unwrap().kubernetes.jobs;
    settings.namespace = namespace.to_owned();
    Executor::new(worker, settings).0
}

fn modules() -> ModulesSettings {
    let source = ModulesSource::new(
        "https://git.example.invalid/modules.git",
        "v1.0.0",
        "0123456789abcdef0123456789abcdef01234567",
        false,
    )
    .unwrap();
    ModulesSettings { source, credentials_secret: None, allow_local: false }
}

/// The worker creates a run's identity and its Job as `cluster-provisioner` (no `escalate` or `bind`: the real API
/// server lets it grant what it holds, and refuses a Role with more), twice without harm, and a retry keeps what
/// an apply published; the Job owns the identity, so deleting the Job removes it (the real garbage collector) and
/// leaves the runtime's outputs Secret. A destroy's identity may update no Secret. The Cleanup's deletion takes
/// only its own operation's identity, and finds nothing the second time.
#[tokio::test]
async fn a_runs_identity_is_created_idempotently_and_goes_with_its_job() {
    provisioner::install_crypto_provider();
    let control_plane = test_control_plane::shared().await;
    let namespace = control_plane.new_namespace("identity").await.unwrap();
    apply_production_rbac(control_plane, &namespace).await;
    let admin = control_plane.admin_client().unwrap();
    let executor = executor(&namespace).await;
    let runtime_id = Uuid::now_v7();
    let names = RunNames::new(OperationType::Provision, runtime_id);
    let run = RunRef { names: &names, runtime_id, operation_id: Uuid::now_v7() };
    executor.ensure_config(run, BTreeMap::from([("main.tf".to_owned(), String::new())])).await.unwrap();

    let deadline = Duration::from_secs(600);
    executor.ensure_job(&modules(), RunAction::Apply, run, deadline).await.expect("the first attempt");
    let publisher = control_plane.client_for_service_account(&namespace, &names.job).await.unwrap();
    // As terraform-runner publishes: its labels, and the content.
    let labels = BTreeMap::from([
        ("app.kubernetes.io/managed-by".to_owned(), "cluster-provisioner".to_owned()),
        ("kubeopera.io/runtime-id".to_owned(), runtime_id.to_string()),
    ]);
    let published = Secret {
        metadata: ObjectMeta {
            name: Some(names.outputs_secret.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("kubeconfig".to_owned(), ByteString(b"published".to_vec()))])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(publisher, &namespace)
        .replace(&names.outputs_secret, &PostParams::default(), &published)
        .await
        .expect("the run's identity updates its outputs");
    // A retry (a restarted worker): everything exists already and is reused as it is.
    executor.ensure_runner_identity(RunAction::Apply, run).await.expect("again: AlreadyExists is fine");
    executor.ensure_job(&modules(), RunAction::Apply, run, deadline).await.expect("the second attempt");
    let jobs = Api::<Job>::namespaced(admin.clone(), &namespace);
    let job = jobs.get(&names.job).await.unwrap();
    let job_uid = job.metadata.uid.clone().unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some(names.job.as_str()));
    let secrets = Api::<Secret>::namespaced(admin.clone(), &namespace);
    let outputs = secrets.get(&names.outputs_secret).await.unwrap();
    assert_eq!(outputs.data.unwrap()["kubeconfig"].0, b"published", "a retry never empties the outputs");
    assert!(outputs.metadata.owner_references.is_none(), "the runtime's, not the run's: no Job owns it");
    let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), &namespace);
    let roles = Api::<Role>::namespaced(admin.clone(), &namespace);
    let bindings = Api::<RoleBinding>::namespaced(admin.clone(), &namespace);
    for owners in [
        owner_uids(&accounts, &names.job).await,
        owner_uids(&roles, &names.job).await,
        owner_uids(&bindings, &names.job).await,
        owner_uids(&Api::<ConfigMap>::namespaced(admin.clone(), &namespace), &names.config_map).await,
    ] {
        assert_eq!(owners, std::slice::from_ref(&job_uid), "owned by the Job, once");
    }

    // The worker may grant only what it holds: the API server refuses it a Role with more (RBAC's escalation check).
    let worker = control_plane.client_for_service_account(&namespace, "cluster-provisioner").await.unwrap();
    let broader = Role {
        metadata: ObjectMeta { name: Some("broader".to_owned()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods/exec".to_owned()]),
            verbs: vec!["create".to_owned()],
            ..PolicyRule::default()
        }]),
    };
    let refused = Api::<Role>::namespaced(worker, &namespace).create(&PostParams::default(), &broader).await;
    assert!(forbidden(refused), "a Role with a permission the worker does not hold");

    // A destroy's identity (another Job, another ServiceAccount) may update no Secret at all.
    let destroy_names = RunNames::new(OperationType::Deprovision, runtime_id);
    let destroy = RunRef { names: &destroy_names, runtime_id, operation_id: Uuid::now_v7() };
    executor.ensure_runner_identity(RunAction::Destroy, destroy).await.unwrap();
    let destroyer = control_plane.client_for_service_account(&namespace, &destroy_names.job).await.unwrap();
    let refused = Api::<Secret>::namespaced(destroyer, &namespace)
        .replace(&names.outputs_secret, &PostParams::default(), &published)
        .await;
    assert!(forbidden(refused), "a destroy publishes nothing");
    // The Cleanup takes only its own operation's identity, and a second time finds nothing to do.
    executor.delete_runner_identity(&destroy_names, Uuid::now_v7()).await.unwrap();
    assert_eq!(identity_objects(&admin, &namespace, &destroy_names.job).await.len(), 3, "another operation's");
    executor.delete_runner_identity(&destroy_names, destroy.operation_id).await.unwrap();
    executor.delete_runner_identity(&destroy_names, destroy.operation_id).await.unwrap();
    assert!(identity_objects(&admin, &namespace, &destroy_names.job).await.is_empty());

    // The Job goes (its TTL, or a stop): the garbage collector takes the identity with it.
    let background =
        DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() };
    jobs.delete(&names.job, &background).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = identity_objects(&admin, &namespace, &names.job).await;
        if left.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not collected with the Job: {left:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(secrets.get_opt(&names.outputs_secret).await.unwrap().is_some(), "the outputs stay with the runtime");
}
