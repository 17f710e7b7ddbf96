//! The engine against the real test control plane: a namespace per test with the production RBAC from
//! `resources/cluster-provisioner.yaml`, the service running as the `cluster-provisioner` ServiceAccount, and
//! the test playing kubelet and terraform-runner.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use provisioner::startup::App;
use serde_json::Value;
use test_control_plane::ControlPlane;
use tokio::sync::watch;

use super::auth_service::FakeAuthService;
use super::{Backend, TestApp, TestDatabase, settings_for};

pub const MODULES_REPO_URL: &str = "https://git.example.invalid/tcr/terraform-modules.git";

/// One running provisioner "process": its app, and the background work (worker and Job cache). Dropping it
/// without [`Process::stop`] is a crash: all its tasks end at once and its leases stay until they expire.
pub struct Process {
    stop: watch::Sender<bool>,
    background: tokio::task::JoinHandle<()>,
}

impl Process {
    /// A graceful stop: the worker releases its operations for the next process.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.background.await;
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
        ]);
        let settings = settings_for(&database.url, &auth, &borrowed(&extra));
        let app = App::build_with(&settings, None).await.expect("app");
        let mut engine = Engine {
            app: TestApp { app, database, settings, auth, _folder: folder },
            control_plane,
            namespace,
            admin,
            extra,
        };
        let process = engine.start_process(&[]).await;
        (engine, process)
    }

    /// Starts a new process over the same database and namespace, as the `cluster-provisioner` identity.
    pub async fn start_process(&mut self, extra: &[(&str, &str)]) -> Process {
        let mut variables = borrowed(&self.extra);
        variables.extend_from_slice(extra);
        let settings = settings_for(&self.app.database.url, &self.app.auth, &variables);
        let client = self
            .control_plane
            .client_for_service_account(&self.namespace, "cluster-provisioner")
            .await
            .expect("cluster-provisioner client");
        let mut app = App::build_with(&settings, Some(client)).await.expect("app starts");
        let background = std::mem::take(&mut app.background);
        let (stop, stopped) = watch::channel(false);
        let background = tokio::spawn(background.run(stopped));
        self.app.app = app;
        self.app.settings = settings;
        Process { stop, background }
    }

    /// Provisions a runtime over REST and returns (runtime id, operation id).
    pub async fn provision(&self, body: &Value) -> (String, String) {
        let answer = self.app.post_provision(body).await;
        assert_eq!(answer.status, axum::http::StatusCode::ACCEPTED, "{}", answer.text);
        let accepted = answer.json();
        (accepted["id"].as_str().unwrap().to_owned(), accepted["operationId"].as_str().unwrap().to_owned())
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
            let operation = self.app.app.service.operation_status(operation_id).await.expect("operation");
            if operation.stage == stage {
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

    pub async fn secret(&self, name: &str) -> Option<Secret> {
        Api::<Secret>::namespaced(self.admin.clone(), &self.namespace).get_opt(name).await.expect("get secret")
    }

    /// Plays terraform-runner and kubelet for a successful run: publishes the kubeconfig as the runner's own
    /// identity (provisioning only), then marks the pod Succeeded.
    pub async fn runner_succeeds(&self, job: &str, outputs: Option<(&str, &str)>) {
        let pod = self.control_plane.wait_for_job_pod(&self.namespace, job).await.expect("job pod");
        if let Some((secret_name, kubeconfig)) = outputs {
            let runner = self
                .control_plane
                .client_for_service_account(&self.namespace, "terraform-runner")
                .await
                .expect("terraform-runner client");
            let secret = Secret {
                metadata: ObjectMeta { name: Some(secret_name.to_owned()), ..ObjectMeta::default() },
                data: Some(BTreeMap::from([("kubeconfig".to_owned(), ByteString(kubeconfig.as_bytes().to_vec()))])),
                ..Secret::default()
            };
            Api::<Secret>::namespaced(runner, &self.namespace)
                .create(&PostParams::default(), &secret)
                .await
                .expect("terraform-runner publishes its outputs");
        }
        let name = pod.metadata.name.unwrap();
        self.control_plane
            .terminate_pod(&self.namespace, &name, "terraform-runner", 0, "")
            .await
            .expect("pod succeeds");
    }

    pub async fn runner_fails(&self, job: &str, message: &str) {
        let pod = self.control_plane.wait_for_job_pod(&self.namespace, job).await.expect("job pod");
        let name = pod.metadata.name.unwrap();
        self.control_plane
            .terminate_pod(&self.namespace, &name, "terraform-runner", 1, message)
            .await
            .expect("pod fails");
    }
}

fn borrowed(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect()
}

/// Labels `namespace` with the Pod Security labels of the production Jobs' namespace (resources/namespaces.yaml),
/// so that the real admission plugin judges every Job pod the tests start.
pub async fn apply_production_pod_security(admin: &Client, namespace: &str) {
    let manifest = std::fs::read_to_string("resources/namespaces.yaml").expect("read the namespaces");
    let documents = yaml_rust2::YamlLoader::load_from_str(&manifest).expect("namespaces.yaml is YAML");
    let jobs_namespace = documents
        .iter()
        .find(|document| document["metadata"]["name"].as_str() == Some("kubeopera-provisioning"))
        .expect("namespaces.yaml has kubeopera-provisioning");
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
