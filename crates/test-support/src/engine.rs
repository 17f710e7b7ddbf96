//! The engine against the real test control plane: a namespace per test with the production RBAC from
//! `resources/cluster-provisioner.yaml`, the service running as the `cluster-provisioner` ServiceAccount, and
//! the test playing kubelet and terraform-runner.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use provisioner::domain::Operation;
use provisioner::service::parse_operation_id;
use provisioner::startup::App;
use runner_contract::inventory::RESOURCES_KEY;
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL, RUNTIME_LABEL};
use runner_contract::manifest::KUBECONFIG_KEY;
use runner_contract::report::{RunReport, kubeconfig_digest};
use serde_json::Value;
use test_control_plane::{ControlPlane, free_port};
use tokio::sync::watch;

use crate::audit::KeptAudit;
use crate::auth_service::FakeAuthService;
use crate::server_process::{ServerProcess, start_service, start_service_binary};
use crate::{Backend, TestApp, TestDatabase, settings_for, test_environment};

pub const MODULES_REPO_URL: &str = "https://git.example.invalid/tcr/terraform-modules.git";
/// The commit the engine's Jobs pin the modules to.
pub const MODULES_REPO_COMMIT: &str = "3f05a4c0000000000000000000000000000000aa";

/// The inventory of the stand-in runner's applies, as the real runner writes it from the state.
pub const RUNNER_RESOURCES: [&str; 2] = [
    "aws_vpc.main arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-0a1b2c3d",
    "aws_instance.worker arn:aws:ec2:eu-west-1:123456789012:instance/i-0a1b2c3d",
];
/// The plan summary a successful stand-in runner reports.
pub const RUNNER_PLAN_SUMMARY: &str = r#"{"add":3,"change":0,"destroy":1,"replaced":["aws_instance.worker"],"destroyed":[],"risk":"risky","risky":["aws_instance.worker"],"destructive":[],"swept":[],"orphans":[],"foreign":[]}"#;

/// One running provisioner "process": its app, and the background work (worker and Job cache). Dropping it
/// without [`Process::stop`] is a crash: all its tasks end at once and its leases stay until they expire.
pub struct Process {
    stop: watch::Sender<bool>,
    background: tokio::task::JoinHandle<Result<(), provisioner::startup::Error>>,
}

impl Process {
    /// A graceful stop: the worker releases its operations for the next process.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.background.await.expect("the background work ends").expect("the background work stops cleanly");
    }

    pub fn crash(self) {
        self.background.abort();
    }
}

pub struct Engine {
    pub app: TestApp,
    pub control_plane: &'static ControlPlane,
    pub namespace: String,
    pub admin: Client,
    extra: Vec<(String, String)>,
    /// Kubeconfigs and logs of service child processes.
    folder: tempfile::TempDir,
}

impl Engine {
    /// A fresh database and namespace; the first process is started with `extra` settings.
    pub async fn start(backend: Backend, extra: &[(&str, &str)]) -> (Engine, Process) {
        provisioner::install_crypto_provider();
        let control_plane = test_control_plane::shared().await;
        let namespace = control_plane.new_namespace("engine").await.expect("namespace");
        let admin = control_plane.admin_client().expect("admin client");
        apply_production_rbac(control_plane, &namespace).await;
        apply_production_pod_security(&admin, &namespace).await;

        let folder = tempfile::tempdir().expect("temporary folder");
        let auth = FakeAuthService::start(folder.path()).await;
        let database = TestDatabase::create(backend).await;
        let mut extra: Vec<(String, String)> =
            extra.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
        extra.extend([
            ("JOB_NAMESPACE".to_owned(), namespace.clone()),
            ("MODULES_REPO_URL".to_owned(), MODULES_REPO_URL.to_owned()),
            ("MODULES_REPO_COMMIT".to_owned(), MODULES_REPO_COMMIT.to_owned()),
        ]);
        let settings = settings_for(&database.url, &auth, &borrowed(&extra));
        let audit = KeptAudit::default();
        let app = App::build_with(&settings, None, audit.trail()).await.expect("app");
        let mut engine = Engine {
            app: TestApp { app, audit, database, settings, auth, _folder: folder },
            control_plane,
            namespace,
            admin,
            extra,
            folder: tempfile::tempdir().expect("temporary folder"),
        };
        let process = engine.start_process(&[]).await;
        (engine, process)
    }

    /// [`Engine::start`] with a first process that serves the API and follows the Jobs but runs no worker (the
    /// tests then run workers in child processes or later in-process ones).
    pub async fn start_api_only(backend: Backend, extra: &[(&str, &str)]) -> (Engine, Process) {
        let (mut engine, process) = Engine::start(backend, extra).await;
        process.stop().await;
        let api = engine.start_process(&[("MODULES_REPO_URL", "")]).await;
        (engine, api)
    }

    /// Starts a new process over the same database and namespace, as the `cluster-provisioner` identity.
    pub async fn start_process(&mut self, extra: &[(&str, &str)]) -> Process {
        self.start_process_via(extra, None).await
    }

    /// [`Engine::start_process`] reaching the API server through `api_server_url` (a proxy) when given.
    pub async fn start_process_via(&mut self, extra: &[(&str, &str)], api_server_url: Option<&str>) -> Process {
        let mut variables = borrowed(&self.extra);
        variables.extend_from_slice(extra);
        let settings = settings_for(&self.app.database.url, &self.app.auth, &variables);
        let client = match api_server_url {
            Some(url) => {
                self.control_plane.client_for_service_account_via(&self.namespace, "cluster-provisioner", url).await
            }
            None => self.control_plane.client_for_service_account(&self.namespace, "cluster-provisioner").await,
        }
        .expect("cluster-provisioner client");
        let mut app = App::build_with(&settings, Some(client), self.app.audit.trail()).await.expect("app starts");
        let background = std::mem::take(&mut app.background);
        let (stop, stopped) = watch::channel(false);
        let background = tokio::spawn(background.run(stopped));
        self.app.app = app;
        self.app.settings = settings;
        Process { stop, background }
    }

    /// The provisioner binary as a child process (a real process, which a test can stop with SIGTERM or kill with
    /// SIGKILL) over the same database and namespace, as the `cluster-provisioner` identity, logging JSON.
    pub async fn start_service_process(&self, extra: &[(&str, &str)]) -> ServerProcess {
        self.start_service_process_via(extra, self.control_plane.server_url()).await
    }

    /// [`Engine::start_service_process`] reaching the API server through `api_server_url` (a proxy). `extra` may
    /// set `APP_METRICS_ADDRESS` (otherwise a free port) and `DATABASE_URL`.
    pub async fn start_service_process_via(&self, extra: &[(&str, &str)], api_server_url: &str) -> ServerProcess {
        start_service(self.service_environment(extra, api_server_url).await).await
    }

    /// Another release's provisioner `binary` as a child process, set up as [`Engine::start_service_process`] sets
    /// up this release's.
    pub async fn start_release_process(&self, binary: &Path, extra: &[(&str, &str)]) -> ServerProcess {
        let environment = self.service_environment(extra, self.control_plane.server_url()).await;
        start_service_binary(binary.to_owned(), environment).await
    }

    async fn service_environment(&self, extra: &[(&str, &str)], api_server_url: &str) -> HashMap<String, String> {
        let kubeconfig = self.folder.path().join(format!("cluster-provisioner-{}.kubeconfig", uuid::Uuid::new_v4()));
        self.control_plane
            .write_service_account_kubeconfig_via(&self.namespace, "cluster-provisioner", &kubeconfig, api_server_url)
            .await
            .expect("kubeconfig of cluster-provisioner");
        let metrics_address = format!("127.0.0.1:{}", free_port());
        let mut variables = borrowed(&self.extra);
        variables.push(("APP_METRICS_ADDRESS", &metrics_address));
        variables.extend_from_slice(extra);
        let mut environment = test_environment(&self.app.database.url, &self.app.auth, &variables);
        environment.insert("KUBECONFIG".into(), kubeconfig.display().to_string());
        environment.insert("APP_LOG_FORMAT".into(), "json".into());
        environment.insert("APP_LOG_LEVEL".into(), "info".into());
        environment
    }

    /// What a tenant namespace's admin does to get the kubeconfig Secrets of its Runtimes: a RoleBinding of the
    /// production ClusterRole (as this engine's RBAC named it) to the service's ServiceAccount.
    pub async fn grant_runtime_kubeconfigs(&self, tenant: &str) {
        self.bind_cluster_role(tenant, "cluster-provisioner-runtime-kubeconfigs").await;
    }

    /// A RoleBinding in `tenant` of the production ClusterRole `role` (as this engine's RBAC named it) to the
    /// service's ServiceAccount.
    async fn bind_cluster_role(&self, tenant: &str, role: &str) {
        let binding: RoleBinding = serde_json::from_value(serde_json::json!({
            "metadata": { "name": role, "namespace": tenant },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": format!("{role}-{}", self.namespace),
            },
            "subjects": [{ "kind": "ServiceAccount", "name": "cluster-provisioner", "namespace": self.namespace }],
        }))
        .unwrap();
        Api::<RoleBinding>::namespaced(self.admin.clone(), tenant)
            .create(&PostParams::default(), &binding)
            .await
            .expect("the tenant's RoleBinding");
    }

    /// What a platform admin does for `APP_CREDENTIALS_SOURCE=secrets`: a RoleBinding in the tenant's namespace of
    /// the production ClusterRole that reads credential Secrets, to the service's ServiceAccount.
    pub async fn grant_credentials(&self, tenant: &str) {
        self.bind_cluster_role(tenant, "cluster-provisioner-credentials").await;
    }

    pub async fn operation(&self, operation_id: &str) -> Operation {
        self.app
            .app
            .service
            .operation_status(parse_operation_id("id", operation_id).unwrap())
            .await
            .expect("operation")
            .operation
    }

    pub async fn pods_of_operation(&self, operation_id: &str) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let selector = ListParams::default().labels(&format!("kubeopera.io/operation-id={operation_id}"));
        pods.list(&selector).await.expect("list pods").items
    }

    /// Names of the runs' credentials Secrets still in the namespace.
    pub async fn credentials_secrets(&self) -> Vec<String> {
        let secrets: Api<Secret> = Api::namespaced(self.admin.clone(), &self.namespace);
        let names = secrets.list(&ListParams::default()).await.expect("list secrets").items.into_iter();
        names.filter_map(|secret| secret.metadata.name).filter(|name| name.ends_with("-credentials")).collect()
    }

    /// Plays kubelet and a successful terraform-runner for every pod of a Job that has not finished yet: the
    /// kubeconfig is published for provisioning Jobs (unless it already is). Returns how many pods it finished.
    pub async fn finish_running_pods(&self) -> usize {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let mut finished = 0;
        for pod in pods.list(&ListParams::default()).await.expect("list pods").items {
            let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            let Some(job) = labels.get("batch.kubernetes.io/job-name") else { continue };
            let mut report = String::new();
            if let Some(runtime_id) = job.strip_prefix("provision-") {
                let secret = format!("provision-{runtime_id}-outputs");
                self.publish_outputs_as(&pod_service_account(&pod), &secret, KUBECONFIG_OUTPUT)
                    .await
                    .expect("terraform-runner publishes its outputs");
                report = runner_report(Some(KUBECONFIG_OUTPUT));
            }
            let name = pod.metadata.name.clone().unwrap();
            if self.control_plane.terminate_pod(&self.namespace, &name, "terraform-runner", 0, &report).await.is_ok() {
                finished += 1;
            }
        }
        finished
    }

    /// Writes an outputs Secret as terraform-runner does, with the identity of the pod that publishes it: that of
    /// the unfinished Job whose runner is told this Secret (its own ServiceAccount, which may update this Secret and
    /// no other). Its inventory is [`RUNNER_RESOURCES`].
    pub async fn publish_outputs(&self, secret_name: &str, kubeconfig: &str) {
        let jobs = Api::<Job>::namespaced(self.admin.clone(), &self.namespace);
        let jobs = jobs.list(&ListParams::default()).await.expect("list jobs").items;
        let publishing = jobs.iter().filter(|job| runner_contract::job::finished(job).is_none()).find_map(|job| {
            let pod = job.spec.as_ref()?.template.spec.as_ref()?;
            let runner = pod.containers.iter().find(|container| container.name == "terraform-runner")?;
            let told = runner.env.iter().flatten().any(|variable| {
                variable.name == "RUNNER_OUTPUTS_SECRET" && variable.value.as_deref() == Some(secret_name)
            });
            told.then(|| pod.service_account_name.clone().expect("the Job names its ServiceAccount"))
        });
        let account = publishing.unwrap_or_else(|| panic!("no unfinished Job publishes {secret_name}"));
        self.publish_outputs_as(&account, secret_name, kubeconfig)
            .await
            .expect("terraform-runner publishes its outputs");
    }

    /// Writes an outputs Secret as terraform-runner does (one unconditional update of the Secret the worker
    /// created, with the runner's labels), as the ServiceAccount `service_account`; the API server's answer.
    pub async fn publish_outputs_as(
        &self,
        service_account: &str,
        secret_name: &str,
        kubeconfig: &str,
    ) -> kube::Result<Secret> {
        let runner = self
            .control_plane
            .client_for_service_account(&self.namespace, service_account)
            .await
            .expect("terraform-runner client");
        let runtime_id = secret_name.strip_prefix("provision-").and_then(|rest| rest.strip_suffix("-outputs"));
        let labels = BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
            (RUNTIME_LABEL.to_owned(), runtime_id.expect("an outputs Secret's name").to_owned()),
        ]);
        let secret = Secret {
            metadata: ObjectMeta { name: Some(secret_name.to_owned()), labels: Some(labels), ..ObjectMeta::default() },
            type_: Some("Opaque".to_owned()),
            data: Some(BTreeMap::from([
                (KUBECONFIG_KEY.to_owned(), ByteString(kubeconfig.as_bytes().to_vec())),
                (RESOURCES_KEY.to_owned(), ByteString(serde_json::to_vec(&RUNNER_RESOURCES).unwrap())),
            ])),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(runner, &self.namespace).replace(secret_name, &PostParams::default(), &secret).await
    }

    /// Provisions a runtime over REST and returns (runtime id, operation id).
    pub async fn provision(&self, body: &Value) -> (String, String) {
        let answer = self.app.post_provision(body).await;
        assert_eq!(answer.status, axum::http::StatusCode::ACCEPTED, "{}", answer.text);
        let accepted = answer.json();
        (accepted["id"].as_str().unwrap().to_owned(), accepted["operationId"].as_str().unwrap().to_owned())
    }

    /// A provisioned runtime: its provisioning queued, its stand-in run succeeded publishing `kubeconfig`, and its
    /// status `succeeded`; returns its id.
    pub async fn provisioned(&self, body: &Value, kubeconfig: &str) -> String {
        let (runtime_id, _) = self.provision(body).await;
        let outputs = format!("provision-{runtime_id}-outputs");
        self.runner_succeeds(&format!("provision-{runtime_id}"), Some((&outputs, kubeconfig))).await;
        self.wait_for_status(&runtime_id, &["succeeded"], Duration::from_secs(60)).await;
        runtime_id
    }

    pub async fn status(&self, runtime_id: &str) -> Value {
        self.app.get(&format!("/api/v1/provisions/{runtime_id}")).await.json()
    }

    /// Polls the REST status until `status` is one of `wanted`.
    pub async fn wait_for_status(&self, runtime_id: &str, wanted: &[&str], timeout: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let status = self.status(runtime_id).await;
            if wanted.iter().any(|wanted| status["status"] == *wanted) {
                return status;
            }
            if tokio::time::Instant::now() > deadline {
                self.control_plane.dump_logs();
                panic!("runtime {runtime_id} did not reach {wanted:?} within {timeout:?}: {status}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls the stored operation until it is at `stage`.
    pub async fn wait_for_stage(&self, operation_id: &str, stage: &str, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let operation = self
                .app
                .app
                .service
                .operation_status(parse_operation_id("id", operation_id).unwrap())
                .await
                .expect("operation")
                .operation;
            if operation.stage.as_str() == stage {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "operation {operation_id} never reached {stage}: {operation:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn jobs_of_operation(&self, operation_id: &str) -> Vec<Job> {
        let jobs: Api<Job> = Api::namespaced(self.admin.clone(), &self.namespace);
        let selector = ListParams::default().labels(&format!("kubeopera.io/operation-id={operation_id}"));
        jobs.list(&selector).await.expect("list jobs").items
    }

    /// A file of a run's ConfigMap, as the service rendered it.
    pub async fn config_map_file(&self, name: &str, file: &str) -> String {
        let config_map =
            Api::<ConfigMap>::namespaced(self.admin.clone(), &self.namespace).get(name).await.expect("get config map");
        config_map.data.and_then(|mut data| data.remove(file)).unwrap_or_else(|| panic!("{name} has no {file}"))
    }

    pub async fn secret(&self, name: &str) -> Option<Secret> {
        Api::<Secret>::namespaced(self.admin.clone(), &self.namespace).get_opt(name).await.expect("get secret")
    }

    /// Plays terraform-runner and kubelet for a successful run: publishes the kubeconfig as the runner's own
    /// identity (an apply), then marks the pod Succeeded with the report the real runner writes: its plan,
    /// [`RUNNER_PLAN_SUMMARY`], and the digest of the kubeconfig it published.
    pub async fn runner_succeeds(&self, job: &str, outputs: Option<(&str, &str)>) {
        let pod = self.control_plane.wait_for_job_pod(&self.namespace, job).await.expect("job pod");
        if let Some((secret_name, kubeconfig)) = outputs {
            self.publish_outputs_as(&pod_service_account(&pod), secret_name, kubeconfig)
                .await
                .expect("terraform-runner publishes its outputs");
        }
        let name = pod.metadata.name.unwrap();
        let report = runner_report(outputs.map(|(_, kubeconfig)| kubeconfig));
        self.control_plane
            .terminate_pod(&self.namespace, &name, "terraform-runner", 0, &report)
            .await
            .expect("pod succeeds");
    }

    pub async fn runner_fails(&self, job: &str, message: &str) {
        self.runner_exits(job, 1, message).await;
    }

    /// Plays kubelet for a pod of `job` whose containers print `logs` (container, text), then ends it with
    /// `exit_code` and the termination `message`. The pod is bound to the test node, so the API server serves its
    /// logs as from a real kubelet.
    /// The Job's pod, scheduled onto the test node with its init container done, as the runner starts: the name
    /// of the pod, whose runner log the test then writes.
    pub async fn runner_starts(&self, job: &str) -> String {
        let pod = self.control_plane.wait_for_job_pod(&self.namespace, job).await.expect("job pod");
        let name = pod.metadata.name.unwrap();
        self.control_plane.bind_pod(&self.namespace, &name).await.expect("bind the pod to the test node");
        self.control_plane.end_log(&self.namespace, &name, "init");
        name
    }

    pub async fn runner_prints_and_exits(&self, job: &str, logs: &[(&str, &str)], exit_code: i32, message: &str) {
        let pod = self.control_plane.wait_for_job_pod(&self.namespace, job).await.expect("job pod");
        let name = pod.metadata.name.unwrap();
        self.control_plane.bind_pod(&self.namespace, &name).await.expect("bind the pod to the test node");
        for (container, text) in logs {
            self.control_plane.write_log(&self.namespace, &name, container, text);
            self.control_plane.end_log(&self.namespace, &name, container);
        }
        self.control_plane
            .terminate_pod(&self.namespace, &name, "terraform-runner", exit_code, message)
            .await
            .expect("pod ends");
    }

    /// The runner's pod ends with `exit_code` and the termination `message`.
    pub async fn runner_exits(&self, job: &str, exit_code: i32, message: &str) {
        let pod = self.control_plane.wait_for_job_pod(&self.namespace, job).await.expect("job pod");
        let name = pod.metadata.name.unwrap();
        self.control_plane
            .terminate_pod(&self.namespace, &name, "terraform-runner", exit_code, message)
            .await
            .expect("pod fails");
    }
}

/// The termination message of a successful stand-in run: [`RUNNER_PLAN_SUMMARY`], with the digest of the
/// kubeconfig an apply published.
pub fn runner_report(published: Option<&str>) -> String {
    let plan = serde_json::from_str(RUNNER_PLAN_SUMMARY).expect("the stand-in's plan summary");
    let report = match published {
        Some(kubeconfig) => RunReport::applied(plan, kubeconfig_digest(kubeconfig.as_bytes())),
        None => RunReport::of_plan(plan),
    };
    serde_json::to_string(&report).expect("a report serialises")
}

/// The kubeconfig [`Engine::finish_running_pods`] publishes.
pub const KUBECONFIG_OUTPUT: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";

/// Runs seen in a worker's log (JSON, one event per line) by its `run started` and `run ended` lines.
#[derive(Debug, Default)]
pub struct RunLog {
    pub started: usize,
    /// The first operation whose run started again before its earlier run ended, with the log lines of its runs.
    pub overlap: Option<String>,
}

impl RunLog {
    pub fn read(log: &str) -> RunLog {
        let mut running: std::collections::HashMap<String, (usize, Vec<String>)> = Default::default();
        let mut runs = RunLog::default();
        for line in log.lines() {
            let Ok(event) = serde_json::from_str::<Value>(line) else { continue };
            let Some(operation_id) = event["operation_id"].as_str() else { continue };
            let (count, lines) = running.entry(operation_id.to_owned()).or_default();
            match event["message"].as_str() {
                Some("run started") => {
                    runs.started += 1;
                    *count += 1;
                }
                Some("run ended") => *count = count.saturating_sub(1),
                _ => continue,
            }
            lines.push(line.to_owned());
            if *count > 1 && runs.overlap.is_none() {
                // Everything the log says about that operation, and any panic, to tell why.
                let related: Vec<&str> =
                    log.lines().filter(|line| line.contains(operation_id) || line.contains("panicked")).collect();
                runs.overlap = Some(format!("operation {operation_id} ran twice at once:\n{}", related.join("\n")));
            }
        }
        runs
    }

    /// Panics when an operation ran twice at once.
    pub fn assert_no_overlap(&self) {
        if let Some(overlap) = &self.overlap {
            panic!("{overlap}");
        }
    }
}

/// The identity a pod runs as: its ServiceAccount.
fn pod_service_account(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|spec| spec.service_account_name.clone()).expect("the pod names its ServiceAccount")
}

fn borrowed(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect()
}

/// Labels `namespace` with the Pod Security labels of the production Jobs' namespace (the chart's, rendered into
/// resources/cluster-provisioner.yaml), so that the real admission plugin judges every Job pod the tests start.
pub async fn apply_production_pod_security(admin: &Client, namespace: &str) {
    let manifest = std::fs::read_to_string("resources/cluster-provisioner.yaml").expect("read the manifest");
    let documents = yaml_rust2::YamlLoader::load_from_str(&manifest).expect("cluster-provisioner.yaml is YAML");
    let jobs_namespace = documents
        .iter()
        .find(|document| {
            document["kind"].as_str() == Some("Namespace")
                && document["metadata"]["name"].as_str() == Some("kubeopera-provisioning")
        })
        .expect("cluster-provisioner.yaml has the namespace kubeopera-provisioning");
    let labels: BTreeMap<String, String> = jobs_namespace["metadata"]["labels"]
        .as_hash()
        .expect("the namespace has labels")
        .iter()
        .filter_map(|(key, value)| Some((key.as_str()?.to_owned(), value.as_str()?.to_owned())))
        .filter(|(key, _)| key.starts_with("pod-security.kubernetes.io/"))
        .collect();
    assert!(labels.contains_key("pod-security.kubernetes.io/enforce"), "the Jobs' namespace enforces a level");
    let patch = serde_json::json!({"metadata": {"labels": labels}});
    Api::<Namespace>::all(admin.clone())
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label the namespace");
}

/// Applies the RBAC of the production manifest to `namespace`, so the tests run with exactly the permissions
/// production has.
pub async fn apply_production_rbac(control_plane: &ControlPlane, namespace: &str) {
    let manifest = std::fs::read_to_string("resources/cluster-provisioner.yaml").expect("read the manifest");
    control_plane.apply_rbac_manifest(&manifest, namespace).await.expect("apply the production RBAC");
}
