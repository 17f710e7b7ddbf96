//! Every variable the service reads: its name, type, default and meaning, and how its value is parsed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use reqwest::Url;
use secrecy::SecretString;
use serde::{Deserialize, Deserializer, Serialize};

use super::{AuthzMode, DEVELOPMENT_DATABASE_PASSWORD, help};
use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::telemetry::LogFormat;

/// Where the SQLite database lives when no PostgreSQL is configured.
pub const DEFAULT_SQLITE_PATH: &str = "./data/provisioner.db";

/// Every variable the service reads, with its type, default and meaning: the one place that spells the
/// environment's names (lower-cased, as the `config` crate delivers them). A blank value counts as unset. Serialized
/// only for `provisioner --help` and the operator's table of variables ([`help`](mod@help)), secrets masked; each
/// field's doc comment is its row's meaning there.
#[derive(Deserialize, Serialize)]
#[serde(default)]
pub(super) struct Variables {
    /// PostgreSQL (`postgres://…`) or SQLite (`sqlite://path?mode=rwc`) connection URL; wins over the parts below.
    pub(super) database_url: Option<String>,
    /// PostgreSQL host; when set (and `DATABASE_URL` is not), the URL is built from the `APP_DATABASE_*` parts.
    pub(super) app_database_host: Option<String>,
    /// PostgreSQL port.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_database_port: u16,
    /// PostgreSQL database.
    pub(super) app_database_name: String,
    /// PostgreSQL user.
    pub(super) app_database_user: String,
    /// PostgreSQL password (secret). The default is refused for a host other than this machine (`localhost`,
    /// 127.0.0.0/8, `[::1]`).
    #[serde(serialize_with = "help::secret")]
    pub(super) app_database_password: SecretString,
    /// `disable`, `allow`, `prefer`, `require`, `verify-ca` or `verify-full`.
    pub(super) app_database_ssl_mode: String,
    /// CA certificate file for `verify-ca` / `verify-full`.
    pub(super) app_database_ssl_root_cert: Option<String>,
    /// Connection pool size.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_database_max_connections: u32,
    /// How long a request or a worker step waits for a database connection; past it, requests answer 503
    /// `unavailable` (component `database`) instead of hanging.
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_database_acquire_timeout: Duration,
    /// The embedded SQLite file used when no other database is configured; created on first run.
    pub(super) app_sqlite_path: String,
    /// Apply this release's missing migrations at start-up; `false` only checks for them and refuses to start
    /// without them (`provisioner migrate` applies them once per upgrade).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_database_migrate: bool,
    /// Where provisioning Jobs run.
    pub(super) job_namespace: String,
    /// The image of the Jobs: the service's own (it holds `terraform-runner`, OpenTofu and git; see the
    /// Dockerfile).
    pub(super) terraform_runner_image: String,
    /// CPU request of each Job's terraform-runner container (the init container asks for 50m CPU and 64Mi memory,
    /// at most 500m and 256Mi).
    #[serde(deserialize_with = "quantity")]
    pub(super) app_runner_cpu_request: String,
    /// Memory request of each Job's terraform-runner container.
    #[serde(deserialize_with = "quantity")]
    pub(super) app_runner_memory_request: String,
    /// CPU limit of the terraform-runner container; within the maximum of the provisioning namespace's LimitRange
    /// (`charts/cluster-provisioner/templates/provisioning-namespace.yaml`).
    #[serde(deserialize_with = "quantity")]
    pub(super) app_runner_cpu_limit: String,
    /// Memory limit of the terraform-runner container; within that LimitRange's maximum too.
    #[serde(deserialize_with = "quantity")]
    pub(super) app_runner_memory_limit: String,
    /// Repository with the Terraform modules, cloned by each Job's init container; without it the worker does not
    /// start.
    pub(super) modules_repo_url: Option<String>,
    /// The tag or branch of the modules repository to clone.
    pub(super) modules_repo_ref: String,
    /// The full commit id `MODULES_REPO_REF` must point at; checked after every clone, so a moved tag fails the run
    /// before Terraform starts.
    pub(super) modules_repo_commit: Option<String>,
    /// Secret in `JOB_NAMESPACE` with `username` and `password` (or token) for a private HTTPS repository, and/or
    /// `ca.crt` (PEM) for a git server whose certificate a private CA signed (then only that CA is trusted for it),
    /// mounted into the init container only. The URL must carry no credentials (`https://` or `ssh://` only).
    /// Tested against `git http-backend` over HTTPS on loopback
    /// (`runner::fetch_modules::fetch_modules_trusts_the_repositorys_private_ca_and_sends_its_credentials`).
    pub(super) modules_repo_credentials_secret: Option<String>,
    /// Tests only: lets `file://` URLs through.
    #[serde(deserialize_with = "parsed")]
    pub(super) modules_repo_allow_local: bool,
    /// Jobs share their node's network (`hostNetwork`), for a cluster without a pod network such as one local node;
    /// their namespace must allow it (the chart's `hostNetwork: true` makes it Pod Security "privileged").
    #[serde(deserialize_with = "parsed")]
    pub(super) app_runner_host_network: bool,
    /// A ConfigMap in `JOB_NAMESPACE` whose entries both Job containers get as environment (`envFrom`, optional):
    /// proxies, a cloud's endpoint. Never credentials; the Job's own variables win. The chart fills it from
    /// `runnerEnv`.
    pub(super) app_runner_env_configmap: Option<String>,
    /// A Secret in `JOB_NAMESPACE` whose key `passphrase` (at least 16 characters) encrypts every Terraform state
    /// and saved plan client-side (OpenTofu's state encryption: PBKDF2 and AES-GCM); the runners read it by
    /// reference. Unset: states are not encrypted. A state written before is read and written back encrypted; keep
    /// the passphrase: without it no state can be read again.
    pub(super) app_state_encryption_secret: Option<String>,
    /// Secrets in `JOB_NAMESPACE` (comma-separated names) every Job's pod pulls its image with: a private
    /// registry. The chart fills it from `runnerImagePullSecrets`.
    pub(super) app_runner_image_pull_secrets: Option<String>,
    /// Annotations (a JSON object of strings) of the ServiceAccount each run gets: a cloud identity for the runner
    /// without keys, such as `eks.amazonaws.com/role-arn` (IRSA) or `iam.gke.io/gcp-service-account` (GKE Workload
    /// Identity). The chart fills it from `runnerServiceAccount.annotations`.
    pub(super) app_runner_service_account_annotations: Option<String>,
    /// Steps (calls to Kubernetes and auth-service) one process executes at a time.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_worker_concurrency: usize,
    /// Operations one process follows at a time; those waiting for their Job take no step slot.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_worker_max_runs: usize,
    /// Lease of a claimed operation; the process's lease keeper renews it every 2 s (every third, when shorter).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_worker_lease: Duration,
    /// How often an idle worker looks for queued operations.
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_worker_poll_interval: Duration,
    /// Where cloud credentials come from: `auth-service` (the platform's, by `AUTH_SERVICE_BASE_URL`) or `secrets`
    /// (a credential id names a Secret labelled `provisioner.kubeopera.io/credential=true` in the tenant's namespace:
    /// docs/operator/credentials.md).
    pub(super) app_credentials_source: String,
    /// With `APP_CREDENTIALS_SOURCE=secrets`: the namespace of the credentials of requests that name no tenant.
    /// Unset: such requests name no credential.
    pub(super) app_credentials_namespace: Option<String>,
    /// Time limit of one call to auth-service or its token endpoint (or of one read of a credential Secret).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_auth_timeout: Duration,
    /// auth-service, for resolving cloud credentials.
    #[serde(deserialize_with = "parsed", serialize_with = "help::display")]
    pub(super) auth_service_base_url: Url,
    /// OAuth2 client file for auth-service (`data: {client_id, client_secret, tokens_endpoint}`, see
    /// `dev/auth-oauth.yaml`).
    pub(super) app_auth_oauth_path: PathBuf,
    /// API address.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_address: SocketAddr,
    /// GraphQL endpoint (POST).
    pub(super) app_api_endpoint: String,
    /// Playground (GET).
    pub(super) app_playground_api_endpoint: String,
    /// The playground's installed browser assets (`tools/build-playground.sh`); `make run` points it at that
    /// script's folder.
    pub(super) app_playground_assets_dir: PathBuf,
    /// Set by `make run` while it builds and starts the local cluster: the JSON file of its progress, shown on
    /// `/readyz` and `/healthz` as `setup`.
    pub(super) app_setup_progress_file: Option<PathBuf>,
    /// Prometheus metrics address (`/metrics`), separate from the API.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_metrics_address: SocketAddr,
    /// PEM certificate (chain): with `APP_TLS_KEY_FILE` the API listener serves TLS only (the metrics listener
    /// stays plain). Both or neither.
    pub(super) app_tls_cert_file: Option<PathBuf>,
    /// PEM key of `APP_TLS_CERT_FILE`. Both or neither.
    pub(super) app_tls_key_file: Option<PathBuf>,
    /// How often the TLS files are looked at; a changed pair (a renewed certificate) is served without a restart,
    /// one that does not load keeps the pair before.
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_tls_reload_interval: Duration,
    /// The most TLS handshakes in progress at once; further connections wait in the listen queue until one ends
    /// (each is bounded to 10 s), so a flood of connections that never finish theirs holds bounded memory.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_tls_max_handshakes: usize,
    /// Log filter, for example `debug` or `provisioner=debug,info`.
    pub(super) app_log_level: String,
    /// `json` or `text` (`make run` uses `text`).
    #[serde(deserialize_with = "log_format", serialize_with = "help::display")]
    pub(super) app_log_format: LogFormat,
    /// The OpenTelemetry collector's OTLP/HTTP base URL (spans go to `<url>/v1/traces`, as protobuf); the Jobs'
    /// runners export there too. Unset: no span is recorded or exported.
    pub(super) otel_exporter_otlp_endpoint: Option<String>,
    /// The service's name in its traces (the runners are `terraform-runner`); unset: `provisioner`.
    pub(super) otel_service_name: Option<String>,
    /// `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off` or
    /// `parentbased_traceidratio`; unset: `always_on` (a caller's `traceparent` joins its trace, but its sampled flag
    /// decides nothing; a `parentbased_*` sampler honours it).
    pub(super) otel_traces_sampler: Option<String>,
    /// The ratio of the `traceidratio` samplers, from 0 to 1; unset: 1.
    pub(super) otel_traces_sampler_arg: Option<String>,
    /// Time limit of a provisioning operation (`90m`, `1h30m`, …).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_provisioning_timeout: Duration,
    /// Time limit of a deprovisioning operation.
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_deprovisioning_timeout: Duration,
    /// Time limit of an upgrade (or its dry run).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_upgrade_timeout: Duration,
    /// Time limit of a hibernation or a wake-up (a vanilla wake-up includes the wait for its API server).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_hibernation_timeout: Duration,
    /// What is kept of a run's logs (both containers together, at least 4096): a longer log keeps its head and tail
    /// with a marker between.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_run_log_max_bytes: usize,
    /// How long kept run logs stay; a clean-up where the worker runs deletes older ones (a quarter of this apart,
    /// at most hourly).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_run_log_retention: Duration,
    /// How long a kubeconfig the service hands out for a cluster that signs in with client certificates (vanilla)
    /// is valid: a certificate the cluster issues, replaced for its readers once 60 % of this has passed (10m to
    /// 30d; the cluster's signer may cap it).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_kubeconfig_lifetime: Duration,
    /// How many runtimes' certificates each replica that runs the worker reads per minute (1 to 600): the serving
    /// certificate in a TLS handshake, the CA and the admin certificate, the runtime read longest ago first.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_certificate_reads_per_minute: u32,
    /// How long a runtime's certificates stay unread after a read (at least 1s).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_certificate_reread_after: Duration,
    /// How long a plan held back by a runtime's approval policy may wait for approval; then its operation fails
    /// as `approval_expired`.
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_plan_approval_ttl: Duration,
    /// How long an `Idempotency-Key` replays the first answer to its caller (keys are per caller); a clean-up where
    /// the worker runs deletes older records.
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_idempotency_key_ttl: Duration,
    /// How many bytes of logs (decompressed) one request may read, all its fields together (at least 4096); more
    /// answers 413 `over_budget`.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_max_log_bytes_per_request: usize,
    /// How many followed logs and GraphQL subscriptions one caller may hold open (and, counted apart, WebSockets);
    /// one more answers 429 `too_many_streams` with `Retry-After` (a socket is refused at its `connection_init`).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_max_streams_per_caller: usize,
    /// How many followed logs and subscriptions (and, apart, WebSockets) may be open in total.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_max_streams: usize,
    /// Comma-separated `clusterConfig.environment` values whose runtimes are created with deletion protection on
    /// (a request's `runtimeInput.deletionProtection` wins); a protected runtime refuses deprovisionings (409
    /// `deletion_protected`) until the protection is turned off.
    #[serde(deserialize_with = "text")]
    pub(super) app_protected_environments: String,
    /// Every deprovisioning names the runtime: `DELETE ...?confirm=<name>`, `deprovisionRuntime(id, confirm:)`.
    /// Off by default so that Kyma's `deprovisionRuntime(id)` and the seed's `DELETE` keep working; a `confirm`
    /// that is sent must name the runtime either way.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_require_delete_confirmation: bool,
    /// Comma-separated IPv4 ranges (CIDRs, 1 to 20) that may reach the Kubernetes API of a cluster whose request
    /// names no `clusterConfig.apiAllowedCidrs`; the runtime records the list it was built with. No default:
    /// unset, such a request is refused (400 naming `clusterConfig.apiAllowedCidrs`). List the egress addresses of
    /// terraform-runner (the Jobs' NAT) and of host-cluster-controller, which must reach every cluster's API.
    /// Runtimes provisioned before runtimes recorded their list render this one on their next run.
    pub(super) app_api_allowed_cidrs: Option<String>,
    /// Which namespaces' `Runtime` resources this process reconciles: `off`, `all`, or a comma-separated list of
    /// namespaces. A Runtime's namespace is its runtime's tenant. The chart sets `all` while it installs the
    /// resource's definition (`crds.install`).
    pub(super) app_runtime_resources: String,
    /// Resume operations left `InProgress` by a stopped process once their lease expired.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_enqueue_in_progress_operations: bool,
    /// Oldest `kubernetesVersion` accepted.
    #[serde(deserialize_with = "parsed", serialize_with = "help::display")]
    pub(super) app_kubernetes_version_min: KubernetesVersion,
    /// Newest `kubernetesVersion` accepted.
    #[serde(deserialize_with = "parsed", serialize_with = "help::display")]
    pub(super) app_kubernetes_version_max: KubernetesVersion,
    /// Largest request body (413 above it).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_max_request_body_bytes: usize,
    /// Time limit of one request (503 `timeout` above it).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_request_timeout: Duration,
    /// How long a WebSocket may stay open before its `connection_init` (closed with 4408 after it).
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_websocket_init_timeout: Duration,
    /// How often an open WebSocket's token is reviewed again; once it is no longer accepted (expired, revoked, its
    /// user no longer allowed) the socket is closed with 4403, within this interval plus the 30 s a review is
    /// cached.
    #[serde(deserialize_with = "duration", serialize_with = "help::duration")]
    pub(super) app_websocket_reauthentication_interval: Duration,
    /// Requests served at once; more answer 429 `overloaded` at once (with `Retry-After`).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_max_concurrent_requests: usize,
    /// After SIGTERM, how long `/readyz` answers 503 `draining` while everything else still serves; then requests
    /// drain and the worker releases its operations (at most 30 s). The Deployment sets `5s` after a 10 s preStop
    /// sleep, within a 60 s grace period.
    #[serde(deserialize_with = "delay", serialize_with = "help::duration")]
    pub(super) app_shutdown_delay: Duration,
    /// Deepest GraphQL selection (400 deeper).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_graphql_max_depth: usize,
    /// Most cost of one GraphQL document (400 above it): a field costs 1, `logs` 100, `kubeconfig` 20, and a page
    /// (`runtimes`, `operations`, `runtimeOperations`) its items' cost times `first` (20 when left out).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_graphql_max_complexity: usize,
    /// GraphQL introspection (`make run` turns it on).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_graphql_introspection: bool,
    /// Authentication of API callers; `false` only for local development (`make run`) and tests of other concerns
    /// (logs a warning).
    #[serde(deserialize_with = "parsed")]
    pub(super) app_auth_enabled: bool,
    /// The audience callers' ServiceAccount tokens must be minted for.
    #[serde(deserialize_with = "text")]
    pub(super) app_auth_audience: String,
    /// Comma-separated usernames let in (403 for others).
    pub(super) app_auth_allowed_users: String,
    /// `allow-list`: the users of `APP_AUTH_ALLOWED_USERS` may do everything. `rbac`: Kubernetes RBAC decides each
    /// action with a SubjectAccessReview on `runtimes.provisioner.kubeopera.io` (verbs get, list, create, update,
    /// delete; subresources `kubeconfig` and `logs`), so ordinary ClusterRoles grant read-only or full access (see
    /// docs/security.md).
    #[serde(deserialize_with = "parsed", serialize_with = "help::display")]
    pub(super) app_authz_mode: AuthzMode,
    /// Every request that reads or changes runtimes must name a tenant (the `Tenant` header, or for a WebSocket
    /// the upgrade request's header or its `connection_init` payload); one without is refused with 400 naming
    /// `Tenant`. The chart turns it on with `APP_AUTHZ_MODE=rbac`.
    #[serde(deserialize_with = "parsed")]
    pub(super) app_tenant_required: bool,
    /// The pod's name (Kubernetes sets it): the worker's lease owner begins with it, so that a lease in the
    /// database names the pod that holds it.
    pub(super) hostname: String,
}

impl Default for Variables {
    fn default() -> Self {
        Variables {
            database_url: None,
            app_database_host: None,
            app_database_port: 5432,
            app_database_name: "provisioner".to_owned(),
            app_database_user: "postgres".to_owned(),
            app_database_password: SecretString::from(DEVELOPMENT_DATABASE_PASSWORD),
            app_database_ssl_mode: "disable".to_owned(),
            app_database_ssl_root_cert: None,
            app_database_max_connections: 10,
            app_database_acquire_timeout: Duration::from_secs(3),
            app_sqlite_path: DEFAULT_SQLITE_PATH.to_owned(),
            app_database_migrate: true,
            job_namespace: "kubeopera-provisioning".to_owned(),
            terraform_runner_image: "kubeopera/cluster-provisioner:0.1.0".to_owned(),
            // OpenTofu with the AWS provider peaks at about 1 GiB while planning a vanilla cluster.
            app_runner_cpu_request: "250m".to_owned(),
            app_runner_memory_request: "512Mi".to_owned(),
            app_runner_cpu_limit: "2".to_owned(),
            app_runner_memory_limit: "2Gi".to_owned(),
            modules_repo_url: None,
            modules_repo_ref: "v1.0.0".to_owned(),
            modules_repo_commit: None,
            modules_repo_credentials_secret: None,
            modules_repo_allow_local: false,
            app_runner_host_network: false,
            app_runner_env_configmap: None,
            app_state_encryption_secret: None,
            app_runner_image_pull_secrets: None,
            app_runner_service_account_annotations: None,
            app_worker_concurrency: 16,
            app_worker_max_runs: 1000,
            app_worker_lease: Duration::from_secs(30),
            app_worker_poll_interval: Duration::from_secs(2),
            app_credentials_source: "auth-service".to_owned(),
            app_credentials_namespace: None,
            app_auth_timeout: Duration::from_secs(10),
            auth_service_base_url: Url::parse("http://authapi:8081").expect("a valid default URL"),
            app_auth_oauth_path: PathBuf::from("./dev/auth-oauth.yaml"),
            app_address: SocketAddr::from(([127, 0, 0, 1], 3000)),
            app_api_endpoint: "/graphql".to_owned(),
            app_playground_api_endpoint: "/graphql".to_owned(),
            // Where the image has them (Dockerfile); `make run` and the tests point at tools/build-playground.sh's.
            app_playground_assets_dir: PathBuf::from("/usr/local/share/kubeopera/playground"),
            app_setup_progress_file: None,
            app_metrics_address: SocketAddr::from(([127, 0, 0, 1], 9000)),
            app_tls_cert_file: None,
            app_tls_key_file: None,
            app_tls_reload_interval: Duration::from_secs(60),
            app_tls_max_handshakes: 256,
            app_log_level: "info".to_owned(),
            app_log_format: LogFormat::Json,
            otel_exporter_otlp_endpoint: None,
            otel_service_name: None,
            otel_traces_sampler: None,
            otel_traces_sampler_arg: None,
            app_provisioning_timeout: Duration::from_secs(90 * 60),
            app_deprovisioning_timeout: Duration::from_secs(60 * 60),
            // A version upgrade rolls every node: as long as building the cluster may take.
            app_upgrade_timeout: Duration::from_secs(90 * 60),
            app_hibernation_timeout: Duration::from_secs(30 * 60),
            app_run_log_max_bytes: 4 * 1024 * 1024,
            app_run_log_retention: Duration::from_secs(90 * 24 * 60 * 60),
            app_plan_approval_ttl: Duration::from_secs(60 * 60),
            app_kubeconfig_lifetime: Duration::from_secs(24 * 60 * 60),
            // A fleet of 5,000 runtimes is read about every day; one of 10 every 12 hours.
            app_certificate_reads_per_minute: 4,
            app_certificate_reread_after: Duration::from_secs(12 * 60 * 60),
            app_idempotency_key_ttl: Duration::from_secs(24 * 60 * 60),
            app_max_log_bytes_per_request: 64 * 1024 * 1024,
            app_max_streams_per_caller: 16,
            app_max_streams: 512,
            app_protected_environments: String::new(),
            app_require_delete_confirmation: false,
            app_api_allowed_cidrs: None,
            app_runtime_resources: "off".to_owned(),
            app_enqueue_in_progress_operations: true,
            app_kubernetes_version_min: ValidationPolicy::DEFAULT.min_kubernetes_version,
            app_kubernetes_version_max: ValidationPolicy::DEFAULT.max_kubernetes_version,
            app_max_request_body_bytes: 64 * 1024,
            app_request_timeout: Duration::from_secs(30),
            app_websocket_init_timeout: Duration::from_secs(10),
            app_websocket_reauthentication_interval: Duration::from_secs(60),
            app_max_concurrent_requests: 256,
            // The Deployment's preStop sleep already waits for the endpoints to drain; `make run` stops at once.
            app_shutdown_delay: Duration::ZERO,
            app_graphql_max_depth: 10,
            // Pages weigh their size (api::graphql::page_weight): a full page of 100 runtimes with their status
            // fits, 35 aliases of such pages with every operation's logs do not.
            app_graphql_max_complexity: 5000,
            app_graphql_introspection: false,
            app_auth_enabled: true,
            app_tenant_required: false,
            app_auth_audience: "cluster-provisioner".to_owned(),
            app_auth_allowed_users: "system:serviceaccount:kubeopera-core:host-cluster-controller".to_owned(),
            app_authz_mode: AuthzMode::AllowList,
            hostname: "provisioner".to_owned(),
        }
    }
}

/// What a variable of this type holds, for the error that rejects a value.
trait Expected {
    const EXPECTED: &'static str;
}

impl Expected for bool {
    const EXPECTED: &'static str = "true or false";
}
impl Expected for u16 {
    const EXPECTED: &'static str = "a port number";
}
impl Expected for u32 {
    const EXPECTED: &'static str = "a whole number";
}
impl Expected for usize {
    const EXPECTED: &'static str = "a whole number";
}
impl Expected for SocketAddr {
    const EXPECTED: &'static str = "HOST:PORT such as 127.0.0.1:3000";
}
impl Expected for Url {
    const EXPECTED: &'static str = "an http or https URL";
}
impl Expected for KubernetesVersion {
    const EXPECTED: &'static str = "MAJOR.MINOR such as 1.32";
}
impl Expected for AuthzMode {
    const EXPECTED: &'static str = "allow-list or rbac";
}

/// A scalar as text: the environment delivers strings, a configuration file may hold numbers and booleans.
fn text<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<String, D::Error> {
    Ok(String::deserialize(deserializer)?.trim().to_owned())
}

fn parsed<'de, D: Deserializer<'de>, T: FromStr + Expected>(deserializer: D) -> std::result::Result<T, D::Error> {
    let value = text(deserializer)?;
    value.parse().map_err(|_| serde::de::Error::custom(format!("invalid value {value:?}: expected {}", T::EXPECTED)))
}

fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Duration, D::Error> {
    process_support::parse_positive_duration(&text(deserializer)?).map_err(serde::de::Error::custom)
}

/// A wait that may be zero, such as `0s` or `5s`.
fn delay<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Duration, D::Error> {
    let value = text(deserializer)?;
    humantime::parse_duration(&value)
        .map_err(|_| serde::de::Error::custom(format!("invalid value {value:?}: expected a duration such as 5s")))
}

/// A Kubernetes quantity such as `250m`, `2`, `512Mi` or `1.5Gi`.
fn quantity<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<String, D::Error> {
    let value = text(deserializer)?;
    let number_end = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    let (number, suffix) = value.split_at(number_end);
    let number_ok = !number.is_empty() && number.parse::<f64>().is_ok_and(|number| number > 0.0);
    if number_ok && ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"].contains(&suffix) {
        Ok(value)
    } else {
        Err(serde::de::Error::custom(format!("invalid value {value:?}: expected a quantity such as 250m or 512Mi")))
    }
}

fn log_format<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<LogFormat, D::Error> {
    match text(deserializer)?.as_str() {
        "json" => Ok(LogFormat::Json),
        "text" => Ok(LogFormat::Text),
        other => Err(serde::de::Error::custom(format!("invalid value {other:?}: expected json or text"))),
    }
}
