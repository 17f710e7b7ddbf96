//! Configuration: built-in defaults, then an optional file named by `APP_CONFIG_FILE`, then the environment,
//! read with the `config` crate and checked into typed settings. Every error names the variable; secrets are
//! wrapped so that they never print.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Url;
use runner_contract::modules::ModulesSource;
use secrecy::{ExposeSecret, SecretString};

use crate::api::HttpSettings;
use crate::api::graphql;
use crate::credentials::{AuthSettings, CredentialSource};
use crate::declarative::reconciler::RuntimeNamespaces;
use crate::domain::deletion::DeletionPolicy;
use crate::domain::policy::ValidationPolicy;
use crate::executor::{JobSettings, ModulesSettings, RunnerResources};
use crate::fleet::CertificateWatchSettings;
use crate::listener_tls::TlsFiles;
use crate::service::{ServiceSettings, StreamLimits};
use crate::store::Migrations;
use crate::telemetry::{LogFormat, TraceSettings};
use crate::worker::{RetentionPeriods, WorkerSettings};

mod from_variables;
mod help;
mod variables;

pub use help::{help, with_variables_table};
pub use variables::DEFAULT_SQLITE_PATH;
use variables::Variables;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{variable}: {message}")]
    Invalid { variable: String, message: String },
    #[error("APP_CONFIG_FILE: {0}")]
    Source(config::ConfigError),
}

impl From<config::ConfigError> for Error {
    /// A value that does not parse becomes an error naming its variable as the environment spells it.
    fn from(error: config::ConfigError) -> Self {
        match error {
            config::ConfigError::At { error, key: Some(key), .. } => {
                Error::Invalid { variable: key.to_uppercase(), message: error.to_string() }
            }
            config::ConfigError::Type { unexpected, expected, key: Some(key), .. } => Error::Invalid {
                variable: key.to_uppercase(),
                message: format!("invalid value {unexpected}: expected {expected}"),
            },
            other => Error::Source(other),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Each module's settings, built here and handed over as they are.
#[derive(Debug, Clone)]
pub struct Settings {
    pub database: DatabaseSettings,
    pub kubernetes: KubernetesSettings,
    pub auth: AuthSettings,
    pub credentials: CredentialSource,
    pub authn: AuthnSettings,
    pub server: ServerSettings,
    pub http: HttpSettings,
    pub service: ServiceSettings,
    pub worker: WorkerSettings,
    pub retention: RetentionPeriods,
    pub certificates: CertificateWatchSettings,
    pub log: LogSettings,
    pub validation: ValidationPolicy,
}

#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// A full connection URL (it may hold a password, hence secret).
    pub url: SecretString,
    pub max_connections: u32,
    /// How long a request or a worker step waits for a connection before the database counts as unavailable.
    pub acquire_timeout: Duration,
    /// Whether start-up applies this release's missing migrations, or only checks that `provisioner migrate` did.
    pub migrations: Migrations,
}

impl DatabaseSettings {
    /// The backend and location without credentials, for logs.
    pub fn describe(&self) -> String {
        let url = self.url.expose_secret();
        if let Some(path) = url.strip_prefix("sqlite://") {
            return format!("sqlite {}", path.split('?').next().unwrap_or_default());
        }
        match Url::parse(url) {
            Ok(url) => format!(
                "{} {}:{}{}",
                url.scheme(),
                url.host_str().unwrap_or("?"),
                url.port().unwrap_or(5432),
                url.path()
            ),
            Err(_) => "an unparsable database URL".to_owned(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct KubernetesSettings {
    /// What every run's Job is made of.
    pub jobs: JobSettings,
    /// The pinned modules repository; without `MODULES_REPO_URL` the worker does not start.
    pub modules: Option<ModulesSettings>,
    /// Whose `Runtime` resources this process reconciles; `None`: none.
    pub runtime_resources: Option<RuntimeNamespaces>,
}

/// Who may call the API: Kubernetes ServiceAccount tokens for `audience`, from one of `allowed_users`.
#[derive(Debug, Clone)]
pub struct AuthnSettings {
    /// Off only by explicit `APP_AUTH_ENABLED=false` (local development, tests of other concerns).
    pub enabled: bool,
    pub audience: String,
    pub allowed_users: Vec<String>,
    pub authorization: AuthzMode,
    /// Every request on runtimes must name a tenant.
    pub tenant_required: bool,
}

/// How an authenticated caller's actions are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthzMode {
    /// The users of `APP_AUTH_ALLOWED_USERS` may do everything, others nothing.
    AllowList,
    /// Kubernetes RBAC decides each action on `runtimes.provisioner.kubeopera.io` (SubjectAccessReview).
    Rbac,
}

impl AuthzMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthzMode::AllowList => "allow-list",
            AuthzMode::Rbac => "rbac",
        }
    }
}

impl std::fmt::Display for AuthzMode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl std::str::FromStr for AuthzMode {
    type Err = ();

    fn from_str(value: &str) -> std::result::Result<Self, Self::Err> {
        match value {
            value if value == AuthzMode::AllowList.as_str() => Ok(AuthzMode::AllowList),
            value if value == AuthzMode::Rbac.as_str() => Ok(AuthzMode::Rbac),
            _ => Err(()),
        }
    }
}

/// The listeners and what the process around the API serves.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub address: SocketAddr,
    /// The playground's installed browser assets (GraphiQL, React, graphql-ws, Swagger UI).
    pub playground_assets_dir: PathBuf,
    /// Where `make run` reports how far it got building and starting the local cluster and cloud, shown on
    /// `/readyz` and `/healthz` while the file exists.
    pub setup_progress_file: Option<PathBuf>,
    pub metrics_address: SocketAddr,
    /// TLS on the API listener (the metrics listener stays plain, for the cluster's own scraper).
    pub tls: Option<TlsFiles>,
    /// After a shutdown signal, how long `/readyz` answers 503 while everything else keeps serving, so that load
    /// balancers that do not watch endpoints stop sending requests before the listener closes.
    pub shutdown_delay: Duration,
}

#[derive(Debug, Clone)]
pub struct LogSettings {
    pub level: String,
    pub format: LogFormat,
    pub traces: TraceSettings,
}

impl Settings {
    /// Reads the process environment (and the file it names).
    pub fn load() -> Result<Self> {
        Self::from_environment(std::env::vars().collect())
    }

    /// Reads the given variables (and the file they name) instead of the process environment: defaults, then
    /// the file, then the variables.
    pub fn from_environment(mut environment: HashMap<String, String>) -> Result<Self> {
        environment.retain(|_, value| !value.trim().is_empty());
        let mut builder = config::Config::builder();
        if let Some(path) = environment.get("APP_CONFIG_FILE") {
            builder = builder.add_source(config::File::with_name(path).required(true));
        }
        let variables: Variables =
            builder.add_source(config::Environment::default().source(Some(environment))).build()?.try_deserialize()?;
        variables.validate()
    }
}

/// The default password, for a PostgreSQL on this machine only.
pub(super) const DEVELOPMENT_DATABASE_PASSWORD: &str = "password";

#[cfg(test)]
mod tests {
    use super::*;

    fn load(variables: &[(&str, &str)]) -> Result<Settings> {
        Settings::from_environment(variables.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect())
    }

    #[test]
    fn tls_needs_both_the_certificate_and_the_key() {
        assert!(load(&[]).unwrap().server.tls.is_none());
        let error = load(&[("APP_TLS_CERT_FILE", "/tls/tls.crt")]).unwrap_err().to_string();
        assert!(error.starts_with("APP_TLS_KEY_FILE:"), "{error}");
        let error = load(&[("APP_TLS_KEY_FILE", "/tls/tls.key")]).unwrap_err().to_string();
        assert!(error.starts_with("APP_TLS_CERT_FILE:"), "{error}");
        let both = load(&[("APP_TLS_CERT_FILE", "/tls/tls.crt"), ("APP_TLS_KEY_FILE", "/tls/tls.key")]).unwrap();
        assert_eq!(both.server.tls.unwrap().reload_interval, Duration::from_secs(60));
    }

    #[test]
    fn defaults_need_no_configuration() {
        let settings = load(&[]).unwrap();
        assert_eq!(settings.server.address.to_string(), "127.0.0.1:3000");
        assert_eq!(settings.server.metrics_address.to_string(), "127.0.0.1:9000");
        assert_eq!(settings.http.api_endpoint, "/graphql");
        assert_eq!(settings.kubernetes.jobs.namespace, "kubeopera-provisioning");
        assert_eq!(settings.auth.service_base_url.as_str(), "http://authapi:8081/");
        assert_eq!(settings.database.url.expose_secret(), "sqlite://./data/provisioner.db?mode=rwc");
        assert_eq!(settings.log.format, LogFormat::Json);
        assert!(settings.worker.enqueue_in_progress);
        assert_eq!(settings.worker.provisioning_timeout, Duration::from_secs(90 * 60));
        assert_eq!(settings.validation.min_kubernetes_version.to_string(), "1.32");
        assert!(settings.authn.enabled);
        assert_eq!(settings.authn.audience, "cluster-provisioner");
        assert_eq!(settings.authn.allowed_users, ["system:serviceaccount:kubeopera-core:host-cluster-controller"]);
        assert_eq!(settings.http.request_timeout, Duration::from_secs(30));
        assert_eq!(settings.http.max_concurrent_requests, 256);
        assert_eq!(settings.http.graphql.max_depth, 10);
        assert_eq!(settings.http.graphql.max_complexity, 5000);
        assert!(!settings.http.graphql.introspection);
    }

    /// Jobs share the node's network only when asked, and their extra environment comes from a ConfigMap whose
    /// name is checked at start-up.
    #[test]
    fn the_runners_network_and_environment_are_opt_in() {
        let defaults = load(&[]).unwrap().kubernetes.jobs;
        assert_eq!((defaults.host_network, defaults.env_config_map), (false, None));
        let set = [("APP_RUNNER_HOST_NETWORK", "true"), ("APP_RUNNER_ENV_CONFIGMAP", "runner-env")];
        let jobs = load(&set).unwrap().kubernetes.jobs;
        assert_eq!((jobs.host_network, jobs.env_config_map.as_deref()), (true, Some("runner-env")));
        for bad in ["Runner-Env", "runner_env", "-runner", "runner-"] {
            let error = load(&[("APP_RUNNER_ENV_CONFIGMAP", bad)]).unwrap_err().to_string();
            assert!(error.starts_with("APP_RUNNER_ENV_CONFIGMAP:"), "{bad}: {error}");
        }
    }

    /// The Jobs' pull Secrets and their ServiceAccounts' annotations are read at start-up, a bad one naming its
    /// variable.
    #[test]
    fn the_runners_pull_secrets_and_identity_annotations_are_checked() {
        let defaults = load(&[]).unwrap().kubernetes.jobs;
        assert!(defaults.image_pull_secrets.is_empty() && defaults.service_account_annotations.is_empty());
        let set = [
            ("APP_RUNNER_IMAGE_PULL_SECRETS", "registry-a, registry-b"),
            ("APP_RUNNER_SERVICE_ACCOUNT_ANNOTATIONS", r#"{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}"#),
        ];
        let jobs = load(&set).unwrap().kubernetes.jobs;
        assert_eq!(jobs.image_pull_secrets, ["registry-a", "registry-b"]);
        assert_eq!(jobs.service_account_annotations["eks.amazonaws.com/role-arn"], "arn:aws:iam::1:role/r");
        let error = load(&[("APP_RUNNER_IMAGE_PULL_SECRETS", "ok,Not_OK")]).unwrap_err().to_string();
        assert!(error.starts_with("APP_RUNNER_IMAGE_PULL_SECRETS:") && error.contains("Not_OK"), "{error}");
        for bad in ["role-arn=x", r#"{"a": 1}"#, r#"{" ": "x"}"#] {
            let error = load(&[("APP_RUNNER_SERVICE_ACCOUNT_ANNOTATIONS", bad)]).unwrap_err().to_string();
            assert!(error.starts_with("APP_RUNNER_SERVICE_ACCOUNT_ANNOTATIONS:"), "{bad}: {error}");
        }
    }

    /// A modules repository is only used pinned to a commit, from https or ssh, with no credentials in its URL.
    #[test]
    fn the_modules_repository_must_be_pinned_to_a_commit() {
        let url = ("MODULES_REPO_URL", "https://git.example.com/modules.git");
        let error = load(&[url]).unwrap_err().to_string();
        assert!(error.contains("MODULES_REPO_COMMIT"), "{error}");
        let commit = ("MODULES_REPO_COMMIT", "0123456789ABCDEF0123456789abcdef01234567");
        let modules = load(&[url, commit]).unwrap().kubernetes.modules.expect("configured");
        assert_eq!(modules.source.commit, "0123456789abcdef0123456789abcdef01234567");
        assert_eq!((modules.source.git_ref.as_str(), modules.credentials_secret), ("v1.0.0", None));
        let local = ("MODULES_REPO_URL", "file:///srv/modules.git");
        assert!(load(&[local, commit]).unwrap_err().to_string().contains("MODULES_REPO_URL"));
        assert!(load(&[local, commit, ("MODULES_REPO_ALLOW_LOCAL", "true")]).is_ok());
        assert!(load(&[]).unwrap().kubernetes.modules.is_none(), "no repository, no worker");
    }

    /// The development password works for a database on this machine only.
    #[test]
    fn the_default_database_password_is_refused_for_another_host() {
        let error = load(&[("APP_DATABASE_HOST", "db.example.com")]).unwrap_err().to_string();
        assert!(error.contains("APP_DATABASE_PASSWORD") && error.contains("development default"), "{error}");
        assert!(!error.contains("password@"), "{error}");
        for host in ["127.0.0.1", "localhost", "[::1]"] {
            assert!(load(&[("APP_DATABASE_HOST", host)]).is_ok(), "{host}");
        }
        let settings = load(&[("APP_DATABASE_HOST", "db.example.com"), ("APP_DATABASE_PASSWORD", "s3cret")]);
        assert!(settings.is_ok());
    }

    #[test]
    fn authentication_settings() {
        let settings = load(&[
            ("APP_AUTH_ENABLED", "false"),
            ("APP_AUTH_AUDIENCE", "provisioner-api"),
            ("APP_AUTH_ALLOWED_USERS", " system:serviceaccount:a:b , system:serviceaccount:c:d,"),
        ])
        .unwrap();
        assert!(!settings.authn.enabled);
        assert_eq!(settings.authn.audience, "provisioner-api");
        assert_eq!(settings.authn.allowed_users, ["system:serviceaccount:a:b", "system:serviceaccount:c:d"]);

        let error = load(&[("APP_AUTH_ALLOWED_USERS", " , ")]).unwrap_err();
        assert_eq!(error.to_string(), "APP_AUTH_ALLOWED_USERS: must name at least one user");
        let error = load(&[("APP_AUTH_ENABLED", "no")]).unwrap_err();
        assert_eq!(error.to_string(), r#"APP_AUTH_ENABLED: invalid value "no": expected true or false"#);
    }

    #[test]
    fn the_environment_overrides_defaults() {
        let settings = load(&[
            ("APP_ADDRESS", "0.0.0.0:8080"),
            ("APP_LOG_FORMAT", "text"),
            ("APP_PROVISIONING_TIMEOUT", "2h"),
            ("APP_ENQUEUE_IN_PROGRESS_OPERATIONS", "false"),
            ("JOB_NAMESPACE", "jobs"),
            ("APP_KUBERNETES_VERSION_MAX", "1.36"),
            ("HOSTNAME", "provisioner-7d9f"),
        ])
        .unwrap();
        assert_eq!(settings.server.address.to_string(), "0.0.0.0:8080");
        assert!(settings.worker.owner.starts_with("provisioner-7d9f-"), "the pod names its leases");
        assert_eq!(settings.log.format, LogFormat::Text);
        assert_eq!(settings.worker.provisioning_timeout, Duration::from_secs(7200));
        assert!(!settings.worker.enqueue_in_progress);
        assert_eq!(settings.kubernetes.jobs.namespace, "jobs");
        assert_eq!(settings.validation.max_kubernetes_version.to_string(), "1.36");
    }

    #[test]
    fn database_parts_build_a_postgres_url_with_escaped_credentials() {
        let settings = load(&[
            ("APP_DATABASE_HOST", "db.internal"),
            ("APP_DATABASE_PORT", "5433"),
            ("APP_DATABASE_USER", "prov"),
            ("APP_DATABASE_PASSWORD", "p@ss/word"),
            ("APP_DATABASE_SSL_MODE", "require"),
        ])
        .unwrap();
        assert_eq!(
            settings.database.url.expose_secret(),
            "postgres://prov:p%40ss%2Fword@db.internal:5433/provisioner?sslmode=require"
        );
        assert_eq!(settings.database.describe(), "postgres db.internal:5433/provisioner");
    }

    #[test]
    fn database_url_wins_over_parts() {
        let settings = load(&[("DATABASE_URL", "postgres://a:b@h/db"), ("APP_DATABASE_HOST", "other")]).unwrap();
        assert_eq!(settings.database.url.expose_secret(), "postgres://a:b@h/db");
    }

    #[test]
    fn bad_values_name_their_variable() {
        let cases = [
            ("APP_ADDRESS", "nowhere"),
            ("APP_METRICS_ADDRESS", "127.0.0.1"),
            ("APP_LOG_FORMAT", "xml"),
            ("APP_PROVISIONING_TIMEOUT", "soon"),
            ("APP_DEPROVISIONING_TIMEOUT", "0s"),
            ("APP_ENQUEUE_IN_PROGRESS_OPERATIONS", "yes please"),
            ("APP_API_ENDPOINT", "graphql"),
            ("AUTH_SERVICE_BASE_URL", "ftp://auth"),
            ("JOB_NAMESPACE", "Jobs_Here"),
            ("APP_KUBERNETES_VERSION_MIN", "1.40"),
            ("APP_MAX_REQUEST_BODY_BYTES", "lots"),
            ("APP_WORKER_CONCURRENCY", "0"),
            ("APP_WORKER_MAX_RUNS", "none"),
            ("APP_WORKER_LEASE", "forever"),
            ("APP_AUTH_ENABLED", "maybe"),
            ("APP_AUTH_ALLOWED_USERS", ","),
            ("APP_REQUEST_TIMEOUT", "0s"),
            ("APP_REQUEST_TIMEOUT", "a while"),
            ("APP_MAX_CONCURRENT_REQUESTS", "0"),
            ("APP_MAX_CONCURRENT_REQUESTS", "many"),
            ("APP_GRAPHQL_MAX_DEPTH", "0"),
            ("APP_GRAPHQL_MAX_COMPLEXITY", "-1"),
            ("APP_GRAPHQL_INTROSPECTION", "on"),
            ("APP_SHUTDOWN_DELAY", "later"),
            ("APP_API_ALLOWED_CIDRS", "everywhere"),
            ("APP_KUBECONFIG_LIFETIME", "9m"),
            ("APP_KUBECONFIG_LIFETIME", "31d"),
        ];
        for (variable, value) in cases {
            let error = load(&[(variable, value)]).expect_err(variable);
            assert!(error.to_string().starts_with(&format!("{variable}:")), "{variable}: {error}");
        }
        let error = load(&[("APP_DATABASE_HOST", "db"), ("APP_DATABASE_PORT", "99999")]).unwrap_err();
        assert!(error.to_string().starts_with("APP_DATABASE_PORT:"), "{error}");
        let error = load(&[("APP_KUBECONFIG_LIFETIME", "5m")]).unwrap_err();
        assert!(error.to_string().contains("must be between 10m and 30days"), "{error}");
        assert_eq!(load(&[]).unwrap().service.kubeconfig_lifetime, Duration::from_secs(24 * 60 * 60));
    }

    /// Runtime resources are reconciled only when asked: everywhere, or in the listed namespaces.
    #[test]
    fn runtime_resources_are_off_unless_asked_and_namespaces_are_checked() {
        assert_eq!(load(&[]).unwrap().kubernetes.runtime_resources, None);
        let all = load(&[("APP_RUNTIME_RESOURCES", "all")]).unwrap();
        assert_eq!(all.kubernetes.runtime_resources, Some(RuntimeNamespaces::All));
        let some = load(&[("APP_RUNTIME_RESOURCES", "team-a, team-b")]).unwrap();
        let names = vec!["team-a".to_owned(), "team-b".to_owned()];
        assert_eq!(some.kubernetes.runtime_resources, Some(RuntimeNamespaces::Only(names)));
        let error = load(&[("APP_RUNTIME_RESOURCES", "team a")]).unwrap_err().to_string();
        assert!(error.starts_with("APP_RUNTIME_RESOURCES: \"team a\""), "{error}");
    }

    /// The operator's ranges for every cluster's API: none unless configured, each entry checked, a bad one named
    /// with the variable.
    #[test]
    fn the_api_ranges_have_no_default_and_every_entry_is_checked() {
        assert_eq!(load(&[]).unwrap().validation.api_allowed_cidrs, None);
        let settings = load(&[("APP_API_ALLOWED_CIDRS", " 203.0.113.0/24, 198.51.100.7/32 ,")]).unwrap();
        let cidrs: Vec<String> =
            settings.validation.api_allowed_cidrs.unwrap().iter().map(ToString::to_string).collect();
        assert_eq!(cidrs, ["203.0.113.0/24", "198.51.100.7/32"]);
        assert_eq!(
            load(&[("APP_API_ALLOWED_CIDRS", "  ")]).unwrap().validation.api_allowed_cidrs,
            None,
            "blank: unset"
        );
        for (value, says) in [
            ("203.0.113.0/24,203.0.113.7/24", "entry 2: \"203.0.113.7/24\" has host bits set"),
            ("203.0.113.0", "entry 1: \"203.0.113.0\" is not an IPv4 CIDR"),
            ("10.0.0.0/8,10.0.0.0/8", "entry 2: \"10.0.0.0/8\" is listed twice"),
            (",", "must list 1 to 20"),
        ] {
            let error = load(&[("APP_API_ALLOWED_CIDRS", value)]).unwrap_err().to_string();
            assert!(error.starts_with("APP_API_ALLOWED_CIDRS: ") && error.contains(says), "{value}: {error}");
        }
    }

    #[test]
    fn secrets_never_print() {
        let settings = load(&[("DATABASE_URL", "postgres://user:hunter2-secret@h/db")]).unwrap();
        let debug = format!("{settings:?}");
        assert!(!debug.contains("hunter2-secret"), "{debug}");
        let error = load(&[("DATABASE_URL", "mysql://user:hunter2-secret@h/db")]).unwrap_err();
        assert!(!error.to_string().contains("hunter2-secret"));
        assert!(error.to_string().starts_with("DATABASE_URL:"));
    }

    #[test]
    fn a_config_file_sits_between_defaults_and_the_environment() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("provisioner.yaml");
        let file =
            "app_address: 127.0.0.1:4000\njob_namespace: from-file\napp_log_format: text\napp_worker_concurrency: 4\n";
        std::fs::write(&path, file).unwrap();
        let settings = load(&[("APP_CONFIG_FILE", path.to_str().unwrap()), ("JOB_NAMESPACE", "from-env")]).unwrap();
        assert_eq!(settings.server.address.to_string(), "127.0.0.1:4000");
        assert_eq!(settings.log.format, LogFormat::Text);
        assert_eq!(settings.kubernetes.jobs.namespace, "from-env");
        assert_eq!(settings.worker.concurrency, 4, "a number in the file");

        let error = load(&[("APP_CONFIG_FILE", "/nonexistent/provisioner.yaml")]).unwrap_err();
        assert!(error.to_string().starts_with("APP_CONFIG_FILE:"), "{error}");
    }
}
