//! What the provisioner's tests and benchmark share: a fresh database per test (SQLite file or PostgreSQL
//! database), the app driven in-process or as a child process, the engine on the shared test control plane, the
//! fake auth-service and token endpoints, moto and fake-gcs-server, a fault-injecting proxy, and request builders.
#![deny(rust_2018_idioms)]

pub mod audit;
pub mod auth_service;
pub mod browser;
pub mod clusters;
pub mod documents;
pub mod engine;
pub mod fault_proxy;
pub mod fleet;
pub mod gcp;
pub mod git_server;
pub mod google_apis;
pub mod helm;
pub mod kubectl;
pub mod kubelet_stand_in;
pub mod moto;
pub mod oidc_issuer;
pub mod otlp_collector;
pub mod pki;
pub mod runtimes;
pub mod server_process;
pub mod subscriber;
pub mod terraform;
pub mod tls_postgres;

use std::collections::HashMap;

use audit::KeptAudit;
use auth_service::FakeAuthService;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use provisioner::domain::{OperationType, ProviderVersion, ProvisionRequest, Runtime, Topology};
use provisioner::render::{RenderedConfig, Renderer, RunAction, RunInputs};
use provisioner::settings::Settings;
use provisioner::startup::App;
use sea_orm::{ConnectionTrait, Database};
use serde_json::{Value, json};
use tower::ServiceExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Runs an async test body once per backend, as two test functions.
#[macro_export]
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    super::$name($crate::Backend::Sqlite).await
                }

                #[tokio::test]
                async fn postgres() {
                    super::$name($crate::Backend::Postgres).await
                }
            }
        )*
    };
}

/// A database that exists for one test only.
pub struct TestDatabase {
    pub url: String,
    admin_url: Option<String>,
    name: String,
    _folder: Option<tempfile::TempDir>,
}

/// The PostgreSQL server the tests use; `make test-really-local` starts one and sets this.
pub fn postgres_admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").expect(
        "TEST_DATABASE_URL is not set: run `make test-really-local`, which starts PostgreSQL and sets it \
         (for example postgres://postgres:postgres@127.0.0.1:5432/postgres)",
    )
}

/// The terraform-runner binary. It belongs to another package of the workspace (crates/terraform-runner), so
/// Cargo does not build it for these tests: `make test` builds it and names it here.
pub fn terraform_runner_bin() -> std::path::PathBuf {
    let bin = std::env::var_os("TEST_TERRAFORM_RUNNER_BIN").map(std::path::PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TEST_TERRAFORM_RUNNER_BIN is not set: run `cargo build -p terraform-runner` and set it to the binary \
             (<target dir>/debug/terraform-runner), or run `make test`, which does both"
        )
    });
    assert!(
        bin.is_file(),
        "TEST_TERRAFORM_RUNNER_BIN={} does not exist: run `cargo build -p terraform-runner`",
        bin.display()
    );
    bin
}

impl TestDatabase {
    pub async fn create(backend: Backend) -> Self {
        let name = format!("provisioner_test_{}", uuid::Uuid::new_v4().simple());
        match backend {
            Backend::Sqlite => {
                let folder = tempfile::tempdir().expect("temporary folder");
                let url = format!("sqlite://{}?mode=rwc", folder.path().join("provisioner.db").display());
                TestDatabase { url, admin_url: None, name, _folder: Some(folder) }
            }
            Backend::Postgres => {
                let admin_url = postgres_admin_url();
                let admin = Database::connect(&admin_url).await.expect("connect to TEST_DATABASE_URL");
                admin.execute_unprepared(&format!("CREATE DATABASE \"{name}\"")).await.expect("create test database");
                let (base, _) = admin_url.rsplit_once('/').expect("TEST_DATABASE_URL ends with a database name");
                TestDatabase { url: format!("{base}/{name}"), admin_url: Some(admin_url), name, _folder: None }
            }
        }
    }

    /// Changes columns of a stored operation directly in the database, behind the service's back.
    pub async fn set_operation_columns<const N: usize>(
        &self,
        operation_id: &str,
        columns: [(&str, sea_orm::Value); N],
    ) {
        self.set_columns("operation", operation_id, columns).await;
    }

    /// Changes columns of the row `id` of `table` directly in the database, behind the service's back.
    pub async fn set_columns<const N: usize>(&self, table: &str, id: &str, columns: [(&str, sea_orm::Value); N]) {
        let db = Database::connect(&self.url).await.expect("connect to the test database");
        let backend = db.get_database_backend();
        let placeholder = |index: usize| match backend {
            sea_orm::DbBackend::Postgres => format!("${index}"),
            _ => "?".to_owned(),
        };
        let assignments: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(index, (column, _))| format!("{column} = {}", placeholder(index + 1)))
            .collect();
        let sql = format!("UPDATE {table} SET {} WHERE id = {}", assignments.join(", "), placeholder(N + 1));
        let mut values: Vec<sea_orm::Value> = columns.into_iter().map(|(_, value)| value).collect();
        values.push(uuid::Uuid::parse_str(id).expect("a row id").into());
        db.execute_raw(sea_orm::Statement::from_sql_and_values(backend, sql, values)).await.expect("update");
    }

    /// Drops a PostgreSQL test database, ending its connections (used to simulate an outage, and to clean up).
    pub async fn drop_database(&self) {
        if let Some(admin_url) = &self.admin_url {
            let admin = Database::connect(admin_url).await.expect("connect to TEST_DATABASE_URL");
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name))
                .await
                .expect("drop test database");
        }
    }
}

/// The tests' `APP_API_ALLOWED_CIDRS`: the runners and the clusters' APIs of the tests all live on this machine.
pub const TEST_API_ALLOWED_CIDRS: &str = "127.0.0.0/8";

/// Test settings: the database, the fake auth-service, and any extra variables (which win).
pub fn settings_for(database_url: &str, auth: &FakeAuthService, extra: &[(&str, &str)]) -> Settings {
    Settings::from_environment(test_environment(database_url, auth, extra)).expect("test settings")
}

/// The environment of [`settings_for`], for a service started as a child process.
pub fn test_environment(database_url: &str, auth: &FakeAuthService, extra: &[(&str, &str)]) -> HashMap<String, String> {
    let client_file = auth.client_file.display().to_string();
    let mut environment: HashMap<String, String> = [
        ("DATABASE_URL", database_url),
        ("APP_ADDRESS", "127.0.0.1:0"),
        ("APP_METRICS_ADDRESS", "127.0.0.1:0"),
        ("APP_DATABASE_MAX_CONNECTIONS", "4"),
        ("AUTH_SERVICE_BASE_URL", auth.base_url.as_str()),
        ("APP_AUTH_OAUTH_PATH", client_file.as_str()),
        ("APP_AUTH_TIMEOUT", "2s"),
        // These tests are about other concerns; tests/integration/authn.rs turns authentication on.
        ("APP_AUTH_ENABLED", "false"),
        // The operator's ranges for every cluster's API, which the example requests (as Kyma's) leave to it.
        ("APP_API_ALLOWED_CIDRS", TEST_API_ALLOWED_CIDRS),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    // The playground's pages work when its assets are installed; without them they answer 503 (see browser.rs).
    if let Some(dir) = std::env::var_os(browser::PLAYGROUND_ASSETS_VARIABLE) {
        environment.insert("APP_PLAYGROUND_ASSETS_DIR".to_owned(), dir.to_string_lossy().into_owned());
    }
    environment.extend(extra.iter().map(|(key, value)| (key.to_string(), value.to_string())));
    environment
}

/// The application over a fresh database, driven in-process through its router.
pub struct TestApp {
    pub app: App,
    /// What the app wrote to its audit trail.
    pub audit: KeptAudit,
    pub database: TestDatabase,
    pub settings: Settings,
    pub auth: FakeAuthService,
    _folder: tempfile::TempDir,
}

/// What an HTTP call answered.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.text))
    }
}

/// The app over a fresh database with a fake auth-service and no Kubernetes cluster (operations stay queued).
pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, &[], None).await
}

/// [`spawn_app`] with extra settings (which win) and a Kubernetes client of the test's choice.
pub async fn spawn_app_with(backend: Backend, extra: &[(&str, &str)], client: Option<kube::Client>) -> TestApp {
    provisioner::install_crypto_provider();
    let folder = tempfile::tempdir().expect("temporary folder");
    let auth = FakeAuthService::start(folder.path()).await;
    let database = TestDatabase::create(backend).await;
    let settings = settings_for(&database.url, &auth, extra);
    let audit = KeptAudit::default();
    let app = App::build_with(&settings, client, audit.trail()).await.expect("app starts");
    TestApp { app, audit, database, settings, auth, _folder: folder }
}

pub async fn call(router: &Router, request: Request<Body>) -> Answer {
    let response = router.clone().oneshot(request).await.expect("router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    Answer { status, headers, text: String::from_utf8_lossy(&bytes).into_owned() }
}

impl TestApp {
    /// A new process over the same database: everything in memory is gone, the store is reopened.
    pub async fn restart(self) -> TestApp {
        let TestApp { app, audit, database, settings, auth, _folder } = self;
        drop(app);
        let app = App::build_with(&settings, None, audit.trail()).await.expect("app restarts");
        TestApp { app, audit, database, settings, auth, _folder }
    }

    pub async fn request(&self, method: &str, path: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> Answer {
        let mut builder = Request::builder().method(method).uri(path);
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let body = body.map(|body| Body::from(body.to_string())).unwrap_or_else(Body::empty);
        call(&self.app.router, builder.body(body).unwrap()).await
    }

    /// A GET whose answer is returned as it starts, for reading a streamed body as it comes.
    pub async fn stream(&self, path: &str) -> axum::http::Response<Body> {
        let request = Request::builder().method("GET").uri(path).body(Body::empty()).unwrap();
        self.app.router.clone().oneshot(request).await.expect("the router answers")
    }

    pub async fn post_provision(&self, body: &Value) -> Answer {
        self.request("POST", "/api/v1/provisions", Some(body), &[]).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.request("GET", path, None, &[]).await
    }

    pub async fn delete(&self, path: &str) -> Answer {
        self.request("DELETE", path, None, &[]).await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Answer {
        self.request("PATCH", path, Some(body), &[]).await
    }

    /// A runtime whose provisioning of `body` succeeded (marked so in the database: no cluster is built); its id.
    pub async fn provisioned(&self, body: &Value) -> String {
        let accepted = self.post_provision(body).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
        let accepted = accepted.json();
        let operation_id = accepted["operationId"].as_str().expect("an operation id");
        self.database
            .set_operation_columns(operation_id, [("state", "Succeeded".into()), ("stage", "Done".into())])
            .await;
        accepted["id"].as_str().expect("a runtime id").to_owned()
    }

    /// Ends an operation `Failed` with `reason` in the database, as a worker records a failure.
    pub async fn fail_operation(&self, operation_id: &str, reason: &str) {
        let columns = [
            ("state", "Failed".into()),
            ("stage", "Done".into()),
            ("last_error_message", format!("failed with {reason} by the test").into()),
            ("last_error_reason", reason.into()),
            ("last_error_component", "terraform-runner".into()),
        ];
        self.database.set_operation_columns(operation_id, columns).await;
    }

    /// Claims the oldest queued operation as a worker would.
    async fn claim_queued_operation(&self) -> (provisioner::store::Store, provisioner::store::Claim) {
        use provisioner::store::Store;
        let store = Store::connect(&self.database.url, 2, std::time::Duration::from_secs(5)).await.expect("store");
        let claim = store
            .claim_operations("test", std::time::Duration::from_secs(60), false, &[], 1)
            .await
            .expect("claim")
            .pop()
            .expect("a queued operation");
        (store, claim)
    }

    /// Runs the oldest queued operation as a worker would, without a cluster: claimed, moved through `stages`,
    /// then finished with `state`. Returns its id.
    pub async fn run_queued_operation(
        &self,
        stages: &[provisioner::domain::run::Stage],
        state: provisioner::domain::OperationState,
    ) -> String {
        use provisioner::store::Progress;
        let (store, claim) = self.claim_queued_operation().await;
        for stage in stages {
            let progress = Progress::Stage { stage: *stage, message: format!("at {stage} in the test") };
            assert!(store.record_progress(&claim.operation, claim.token, progress).await.expect("progress"));
        }
        let done = provisioner::domain::run::Stage::Done;
        let progress = Progress::Finished { state, stage: done, message: format!("{state} by the test") };
        assert!(store.record_progress(&claim.operation, claim.token, progress).await.expect("progress"));
        claim.operation.id.to_string()
    }

    /// Runs the oldest queued operation as a worker would whose runner saved its plan for approval: its plan
    /// summary and `plan_sha256` recorded, then waiting for approval until `expires_in` from now. Returns its id.
    pub async fn hold_queued_operation_for_approval(
        &self,
        plan_sha256: &str,
        expires_in: std::time::Duration,
    ) -> String {
        use provisioner::store::Progress;
        let (store, claim) = self.claim_queued_operation().await;
        let plan = serde_json::from_str(engine::RUNNER_PLAN_SUMMARY).expect("the stand-in's plan summary");
        let recorded = store.record_plan_summary(claim.operation.id, claim.token, &plan, Some(plan_sha256));
        assert!(recorded.await.expect("plan summary"));
        let expires_at = provisioner::store::now() + expires_in;
        let progress = Progress::AwaitingApproval { message: "waiting in the test".to_owned(), expires_at };
        assert!(store.record_progress(&claim.operation, claim.token, progress).await.expect("progress"));
        claim.operation.id.to_string()
    }

    /// Runs a GraphQL document and returns the whole response (`data` and `errors`).
    pub async fn graphql(&self, query: &str, variables: Value) -> Value {
        let body = json!({ "query": query, "variables": variables });
        let answer = self.request("POST", "/graphql", Some(&body), &[]).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        answer.json()
    }

    pub async fn metrics(&self) -> String {
        let request = Request::builder().uri("/metrics").body(Body::empty()).unwrap();
        call(&self.app.metrics_router, request).await.text
    }
}

/// A valid provisioning request in the REST spelling (the vanilla kubeadm example, named `name`); tests change
/// single fields of it.
pub fn provision_body(name: &str) -> Value {
    serde_json::to_value(ProvisionRequest::example_named(Topology::VanillaKubeadm, name)).expect("serialisable")
}

/// The EKS example in the REST spelling, named `name`.
pub fn eks_body(name: &str) -> Value {
    serde_json::to_value(ProvisionRequest::example_named(Topology::Eks, name)).expect("serialisable")
}

/// The GKE example in the REST spelling, named `name` (project `my-project-1`, credential `cred-gcp-1`).
pub fn gke_body(name: &str) -> Value {
    serde_json::to_value(ProvisionRequest::example_named(Topology::Gke, name)).expect("serialisable")
}

/// The configuration of `action` on `runtime` with this release's provider pin, as the worker renders it for a
/// new cluster (an apply or a dry run provisions, a destroy deprovisions).
pub fn render(runtime: &Runtime, action: RunAction) -> RenderedConfig {
    let operation_type =
        if action == RunAction::Destroy { OperationType::Deprovision } else { OperationType::Provision };
    render_for(runtime, operation_type, action)
}

/// The configuration an operation of `operation_type` renders on `runtime` (with its target applied).
pub fn render_for(runtime: &Runtime, operation_type: OperationType, action: RunAction) -> RenderedConfig {
    let provider = ProviderVersion::pinned(runtime.cluster_config.topology.cloud());
    Renderer::new()
        .expect("templates compile")
        .render(runtime, operation_type, action, &provider, RunInputs::default())
        .expect("renders")
}

/// The same request as GraphQL input: enum values are spelled the GraphQL way.
pub fn provision_input(name: &str) -> Value {
    let mut input = provision_body(name);
    input["clusterConfig"]["topology"] = json!("VANILLA_KUBEADM");
    input
}

pub const OPERATION_STATUS_FIELDS: &str =
    "id operation state message runtimeID stage lastError { errMessage reason component }";

/// A small deterministic generator (xorshift), so that "random" crash points are the same in every run.
pub struct Seeded(pub u64);

impl Seeded {
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// Log output captured in memory, for tests that check what was (or was not) logged.
#[derive(Clone, Default)]
pub struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}
