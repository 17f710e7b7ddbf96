//! What the steps' unit tests share: a cluster that records what a step asked of it and answers as scripted, and
//! a worker over a fresh SQLite database holding one claimed operation.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use runner_contract::failure::Leftovers;
use runner_contract::modules::ModulesSource;
use runner_contract::report::RunReport;
use secrecy::SecretString;
use uuid::Uuid;

use super::Run;
use crate::credentials::{AuthClient, AuthSettings, Credentials};
use crate::domain::run::{JobState, RunNames};
use crate::domain::{Operation, OperationType, ProvisionRequest, RunAction, Runtime, Topology};
use crate::executor::{self, FinalLogs, JobStop, ModulesSettings, RunRef};
use crate::render::Renderer;
use crate::store::{Claim, Store};
use crate::telemetry::{Metrics, WorkerHealth};
use crate::worker::cluster::RunCluster;
use crate::worker::{Worker, WorkerSettings};

/// What the fake cluster answers; every answer is one a real cluster can give.
pub(crate) struct Script {
    pub(crate) credentials_exist: bool,
    pub(crate) credential_values: Vec<String>,
    pub(crate) other_run: Option<String>,
    pub(crate) job_state: JobState,
    pub(crate) report: Option<RunReport>,
    pub(crate) leftovers: Option<Leftovers>,
    pub(crate) kubeconfig: Option<String>,
    pub(crate) stop: JobStop,
    pub(crate) final_logs: Option<Vec<(String, String)>>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            credentials_exist: false,
            credential_values: vec!["the-secret".to_owned()],
            other_run: None,
            job_state: JobState::Succeeded,
            report: None,
            leftovers: None,
            kubeconfig: None,
            stop: JobStop::NotRunning,
            final_logs: None,
        }
    }
}

/// A cluster that records each call (its name and what identifies its object) and answers from its [`Script`].
#[derive(Default)]
pub(crate) struct RecordingCluster {
    pub(crate) script: Mutex<Script>,
    calls: Mutex<Vec<String>>,
}

impl RecordingCluster {
    fn record(&self, call: String) {
        self.calls.lock().expect("calls lock").push(call);
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls lock").clone()
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().expect("script lock")
    }
}

type Result<T> = executor::Result<T>;

impl RunCluster for RecordingCluster {
    async fn credentials_exist(&self, names: &RunNames, _operation_id: Uuid) -> Result<bool> {
        self.record(format!("credentials_exist {}", names.credentials_secret));
        Ok(self.script().credentials_exist)
    }

    async fn credential_values(&self, names: &RunNames) -> Result<Vec<String>> {
        self.record(format!("credential_values {}", names.credentials_secret));
        Ok(self.script().credential_values.clone())
    }

    async fn ensure_credentials(&self, run: RunRef<'_>, files: &BTreeMap<String, SecretString>) -> Result<()> {
        let files: Vec<&String> = files.keys().collect();
        self.record(format!("ensure_credentials {} {files:?}", run.names.credentials_secret));
        Ok(())
    }

    async fn ensure_config(&self, run: RunRef<'_>, files: BTreeMap<String, String>) -> Result<()> {
        let files: Vec<&String> = files.keys().collect();
        self.record(format!("ensure_config {} {files:?}", run.names.config_map));
        Ok(())
    }

    async fn other_run_of_runtime(&self, _runtime_id: Uuid, _operation_id: Uuid) -> Result<Option<String>> {
        self.record("other_run_of_runtime".to_owned());
        Ok(self.script().other_run.clone())
    }

    async fn ensure_job(
        &self,
        _modules: &ModulesSettings,
        action: RunAction,
        run: RunRef<'_>,
        active_deadline: Duration,
    ) -> Result<()> {
        let minutes = active_deadline.as_secs().div_ceil(60);
        self.record(format!("ensure_job {} {} within {minutes} min", run.names.job, action.as_str()));
        Ok(())
    }

    async fn wait_for_job(
        &self,
        names: &RunNames,
        _operation_id: Uuid,
        _timeout: Duration,
        redact: &[String],
    ) -> Result<JobState> {
        self.record(format!("wait_for_job {} redacting {redact:?}", names.job));
        Ok(self.script().job_state.clone())
    }

    async fn run_report(&self, names: &RunNames) -> Result<Option<RunReport>> {
        self.record(format!("run_report {}", names.outputs_secret));
        Ok(self.script().report.clone())
    }

    async fn leftovers(&self, names: &RunNames) -> Result<Option<Leftovers>> {
        self.record(format!("leftovers {}", names.job));
        Ok(self.script().leftovers.clone())
    }

    async fn kubeconfig(&self, names: &RunNames) -> Result<Option<String>> {
        self.record(format!("kubeconfig {}", names.outputs_secret));
        Ok(self.script().kubeconfig.clone())
    }

    async fn delete_secret(&self, name: &str) -> Result<()> {
        self.record(format!("delete_secret {name}"));
        Ok(())
    }

    async fn delete_runner_identity(&self, names: &RunNames, _operation_id: Uuid) -> Result<()> {
        self.record(format!("delete_runner_identity {}", names.job));
        Ok(())
    }

    async fn open_final_logs(&self, _operation_id: Uuid) -> Result<Option<FinalLogs>> {
        self.record("open_final_logs".to_owned());
        Ok(self.script().final_logs.clone().map(FinalLogs::already_read))
    }

    async fn stop_job(&self, names: &RunNames, _operation_id: Uuid, _wait: Duration) -> Result<JobStop> {
        self.record(format!("stop_job {}", names.job));
        Ok(self.script().stop.clone())
    }
}

/// A worker over a fresh SQLite database and a [`RecordingCluster`], holding one claimed operation.
pub(crate) struct Fixture {
    pub(crate) worker: Worker<RecordingCluster>,
    pub(crate) claim: Claim,
    _folder: tempfile::TempDir,
}

impl Fixture {
    /// A provisioning of the EKS example, claimed; auth-service is a closed port on this machine.
    pub(crate) async fn provisioning() -> Fixture {
        Fixture::with(OperationType::Provision, Script::default()).await
    }

    /// An operation of `operation_type` on a provisioned EKS runtime (a provisioning when it is one), claimed.
    pub(crate) async fn with(operation_type: OperationType, script: Script) -> Fixture {
        crate::install_crypto_provider();
        let folder = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}?mode=rwc", folder.path().join("provisioner.db").display());
        let store = Store::connect(&url, 2, Duration::from_secs(5)).await.expect("a store");
        let (mut runtime, provisioning) = Runtime::requested(ProvisionRequest::example(Topology::Eks), false, now());
        // As the service records it: with the ranges that may reach its API.
        runtime.cluster_config.api_allowed_cidrs = Some(vec!["203.0.113.0/24".to_owned()]);
        store.insert_runtime(&runtime, &provisioning, None).await.expect("a runtime");
        if operation_type != OperationType::Provision {
            let claim = claim(&store).await;
            let done = crate::store::Progress::Finished {
                state: crate::domain::OperationState::Succeeded,
                stage: crate::domain::run::Stage::Done,
                message: "provisioned".to_owned(),
            };
            store.record_progress(&claim.operation, claim.token, done).await.expect("a finished provisioning");
            let provider = provisioning.terraform_provider.clone().expect("a pinned provider");
            let operation = Operation::queued(runtime.id, operation_type, provider, now());
            store.insert_operation(&operation).await.expect("an operation");
        }
        let claim = claim(&store).await;
        let worker = Worker {
            store,
            executor: RecordingCluster { script: Mutex::new(script), ..RecordingCluster::default() },
            credentials: Credentials::AuthService(auth_client(folder.path())),
            renderer: Renderer::new().expect("the templates"),
            settings: settings(),
            modules: modules(),
            metrics: Metrics::new(),
            wake: Default::default(),
            health: WorkerHealth::disabled(),
        };
        Fixture { worker, claim, _folder: folder }
    }

    /// The run of the claimed operation as the worker starts it.
    pub(crate) fn run(&self) -> Run<'_> {
        let operation = &self.claim.operation;
        Run { claim: &self.claim, names: RunNames::of(operation), redact: Vec::new(), runtime: None }
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.worker.executor.calls()
    }

    /// The claimed operation as it is stored now.
    pub(crate) async fn stored(&self) -> Operation {
        let id = self.claim.operation.id;
        self.worker.store.find_operation(id).await.expect("a read").expect("the operation")
    }
}

fn now() -> chrono::DateTime<chrono::Utc> {
    crate::store::now()
}

async fn claim(store: &Store) -> Claim {
    let claims = store.claim_operations("unit-test", Duration::from_secs(60), false, &[], 1).await;
    claims.expect("a claim").pop().expect("a queued operation")
}

/// An auth-service that never answers: nothing listens on the discard port, so a call fails at once.
fn auth_client(folder: &std::path::Path) -> AuthClient {
    let oauth_client_file = folder.join("auth-oauth.yaml");
    let client =
        "data:\n  client_id: unit-test\n  client_secret: unit-test\n  tokens_endpoint: http://127.0.0.1:9/token\n";
    std::fs::write(&oauth_client_file, client).expect("the OAuth client file");
    let settings = AuthSettings {
        service_base_url: "http://127.0.0.1:9".parse().expect("a URL"),
        oauth_client_file,
        timeout: Duration::from_secs(2),
    };
    AuthClient::new(&settings, settings.timeout).expect("an auth client")
}

fn settings() -> WorkerSettings {
    WorkerSettings {
        owner: "unit-test".to_owned(),
        concurrency: 1,
        max_runs: 1,
        lease: Duration::from_secs(60),
        poll_interval: Duration::from_secs(1),
        enqueue_in_progress: false,
        provisioning_timeout: Duration::from_secs(3600),
        deprovisioning_timeout: Duration::from_secs(3600),
        upgrade_timeout: Duration::from_secs(3600),
        hibernation_timeout: Duration::from_secs(1800),
        run_log_max_bytes: 64 * 1024,
        plan_approval_ttl: Duration::from_secs(3600),
    }
}

fn modules() -> ModulesSettings {
    let source = ModulesSource::new("https://example.invalid/modules.git", "v1", &"a".repeat(40), false)
        .expect("a pinned source");
    ModulesSettings { source, credentials_secret: None, allow_local: false }
}
