//! Configuration: built-in defaults, then an optional file named by `APP_CONFIG_FILE`, then the environment,
//! read with the `config` crate and checked into typed settings. Every error names the variable; secrets are
//! wrapped so that they never print.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::credentials::AuthSettings;
use crate::domain::policy::{KubernetesVersion, ValidationPolicy};
use crate::telemetry::LogFormat;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{variable}: {message}")]
    Invalid { variable: &'static str, message: String },
    #[error("APP_CONFIG_FILE: {0}")]
    Source(#[from] config::ConfigError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the SQLite database lives when no PostgreSQL is configured.
pub const DEFAULT_SQLITE_PATH: &str = "./data/provisioner.db";

/// Every variable the service reads, as the `config` crate delivers it (lower-cased names, string values).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawSettings {
    database_url: Option<String>,
    app_database_host: Option<String>,
    app_database_port: Option<String>,
    app_database_name: Option<String>,
    app_database_user: Option<String>,
    app_database_password: Option<String>,
    app_database_ssl_mode: Option<String>,
    app_database_ssl_root_cert: Option<String>,
    app_database_max_connections: Option<String>,
    app_database_acquire_timeout: Option<String>,
    app_sqlite_path: Option<String>,
    job_namespace: Option<String>,
    terraform_runner_image: Option<String>,
    modules_repo_url: Option<String>,
    modules_repo_ref: Option<String>,
    app_runner_service_account: Option<String>,
    app_worker_concurrency: Option<String>,
    app_worker_max_runs: Option<String>,
    app_worker_lease: Option<String>,
    app_worker_poll_interval: Option<String>,
    app_auth_timeout: Option<String>,
    auth_service_base_url: Option<String>,
    app_auth_oauth_path: Option<String>,
    app_address: Option<String>,
    app_api_endpoint: Option<String>,
    app_playground_api_endpoint: Option<String>,
    app_metrics_address: Option<String>,
    app_log_level: Option<String>,
    app_log_format: Option<String>,
    app_provisioning_timeout: Option<String>,
    app_deprovisioning_timeout: Option<String>,
    app_enqueue_in_progress_operations: Option<String>,
    app_kubernetes_version_min: Option<String>,
    app_kubernetes_version_max: Option<String>,
    app_max_request_body_bytes: Option<String>,
    app_request_timeout: Option<String>,
    app_max_concurrent_requests: Option<String>,
    app_graphql_max_depth: Option<String>,
    app_graphql_max_complexity: Option<String>,
    app_graphql_introspection: Option<String>,
    app_auth_enabled: Option<String>,
    app_auth_audience: Option<String>,
    app_auth_allowed_users: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub database: DatabaseSettings,
    pub kubernetes: KubernetesSettings,
    pub auth: AuthSettings,
    pub authn: AuthnSettings,
    pub server: ServerSettings,
    pub log: LogSettings,
    pub operations: OperationSettings,
    pub validation: ValidationPolicy,
}

#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// A full connection URL (it may hold a password, hence secret).
    pub url: SecretString,
    pub max_connections: u32,
    /// How long a request or a worker step waits for a connection before the database counts as unavailable.
    pub acquire_timeout: Duration,
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
    pub job_namespace: String,
    pub terraform_runner_image: String,
    pub runner_service_account: String,
    pub modules_repo_url: Option<String>,
    pub modules_repo_ref: String,
}

/// Who may call the API: Kubernetes ServiceAccount tokens for `audience`, from one of `allowed_users`.
#[derive(Debug, Clone)]
pub struct AuthnSettings {
    /// Off only by explicit `APP_AUTH_ENABLED=false` (local development, tests of other concerns).
    pub enabled: bool,
    pub audience: String,
    pub allowed_users: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub address: SocketAddr,
    pub api_endpoint: String,
    pub playground_endpoint: String,
    pub metrics_address: SocketAddr,
    pub max_request_body_bytes: usize,
    pub request_timeout: Duration,
    pub max_concurrent_requests: usize,
    pub graphql_max_depth: usize,
    pub graphql_max_complexity: usize,
    pub graphql_introspection: bool,
}

#[derive(Debug, Clone)]
pub struct LogSettings {
    pub level: String,
    pub format: LogFormat,
}

#[derive(Debug, Clone)]
pub struct OperationSettings {
    pub provisioning_timeout: Duration,
    pub deprovisioning_timeout: Duration,
    pub enqueue_in_progress: bool,
    pub worker_concurrency: usize,
    pub worker_max_runs: usize,
    pub worker_lease: Duration,
    pub worker_poll_interval: Duration,
}

impl Settings {
    /// Reads the process environment (and the file it names).
    pub fn load() -> Result<Self> {
        Self::from_environment(std::env::vars().collect())
    }

    /// Reads the given variables (and the file they name) instead of the process environment.
    pub fn from_environment(environment: HashMap<String, String>) -> Result<Self> {
        let mut builder = config::Config::builder();
        if let Some(path) = environment.get("APP_CONFIG_FILE").filter(|path| !path.is_empty()) {
            builder = builder.add_source(config::File::with_name(path).required(true));
        }
        let raw: RawSettings =
            builder.add_source(config::Environment::default().source(Some(environment))).build()?.try_deserialize()?;
        raw.into_settings()
    }
}

fn invalid(variable: &'static str, message: impl Into<String>) -> Error {
    Error::Invalid { variable, message: message.into() }
}

fn parse<T: std::str::FromStr>(variable: &'static str, value: Option<String>, default: T, expected: &str) -> Result<T> {
    match value.filter(|value| !value.trim().is_empty()) {
        None => Ok(default),
        Some(value) => {
            value.trim().parse().map_err(|_| invalid(variable, format!("invalid value {value:?}: expected {expected}")))
        }
    }
}

fn duration(variable: &'static str, value: Option<String>, default: &str) -> Result<Duration> {
    let value = value.filter(|value| !value.trim().is_empty()).unwrap_or_else(|| default.to_owned());
    process_support::parse_positive_duration(&value).map_err(|message| invalid(variable, message))
}

fn flag(variable: &'static str, value: Option<String>, default: bool) -> Result<bool> {
    parse(variable, value, default, "true or false")
}

/// A number of at least 1, for sizes and limits.
fn positive(variable: &'static str, value: Option<String>, default: usize, expected: &str) -> Result<usize> {
    let number = parse(variable, value, default, expected)?;
    if number == 0 {
        return Err(invalid(variable, "must be at least 1"));
    }
    Ok(number)
}

fn endpoint(variable: &'static str, value: Option<String>) -> Result<String> {
    let value = value.unwrap_or_else(|| "/graphql".to_owned());
    if !value.starts_with('/') || value.contains(char::is_whitespace) || value.contains(['{', '}', '*']) {
        return Err(invalid(variable, format!("invalid path {value:?}: expected an absolute path such as /graphql")));
    }
    Ok(value)
}

fn url(variable: &'static str, value: &str) -> Result<Url> {
    let parsed = Url::parse(value).map_err(|error| invalid(variable, format!("invalid URL {value:?}: {error}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(variable, format!("invalid URL {value:?}: expected http or https")));
    }
    Ok(parsed)
}

impl RawSettings {
    fn into_settings(self) -> Result<Settings> {
        let database = self.database()?;
        let format = match self.app_log_format.as_deref().map(str::trim) {
            None | Some("") | Some("json") => LogFormat::Json,
            Some("text") => LogFormat::Text,
            Some(other) => {
                return Err(invalid("APP_LOG_FORMAT", format!("invalid value {other:?}: expected json or text")));
            }
        };
        let level = self.app_log_level.unwrap_or_else(|| "info".to_owned());
        if tracing_subscriber::EnvFilter::try_new(&level).is_err() {
            return Err(invalid(
                "APP_LOG_LEVEL",
                format!("invalid filter {level:?}: expected for example info or debug"),
            ));
        }
        let enqueue_in_progress =
            flag("APP_ENQUEUE_IN_PROGRESS_OPERATIONS", self.app_enqueue_in_progress_operations, true)?;
        let min_version = parse(
            "APP_KUBERNETES_VERSION_MIN",
            self.app_kubernetes_version_min,
            KubernetesVersion { major: 1, minor: 32 },
            "MAJOR.MINOR such as 1.32",
        )?;
        let max_version = parse(
            "APP_KUBERNETES_VERSION_MAX",
            self.app_kubernetes_version_max,
            KubernetesVersion { major: 1, minor: 37 },
            "MAJOR.MINOR such as 1.37",
        )?;
        if min_version > max_version {
            return Err(invalid(
                "APP_KUBERNETES_VERSION_MIN",
                format!("{min_version} is above APP_KUBERNETES_VERSION_MAX {max_version}"),
            ));
        }
        let job_namespace = self.job_namespace.unwrap_or_else(|| "kubeopera-provisioning".to_owned());
        if job_namespace.is_empty()
            || job_namespace.len() > 63
            || !job_namespace.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        {
            return Err(invalid(
                "JOB_NAMESPACE",
                format!("invalid namespace {job_namespace:?}: expected a DNS-1123 label"),
            ));
        }
        let worker_concurrency: usize =
            parse("APP_WORKER_CONCURRENCY", self.app_worker_concurrency.clone(), 16, "a number of parallel steps")?;
        if !(1..=256).contains(&worker_concurrency) {
            return Err(invalid("APP_WORKER_CONCURRENCY", "must be between 1 and 256"));
        }
        let worker_max_runs: usize =
            parse("APP_WORKER_MAX_RUNS", self.app_worker_max_runs.clone(), 1000, "a number of operations")?;
        if !(1..=100_000).contains(&worker_max_runs) {
            return Err(invalid("APP_WORKER_MAX_RUNS", "must be between 1 and 100000"));
        }
        let max_request_body_bytes =
            parse("APP_MAX_REQUEST_BODY_BYTES", self.app_max_request_body_bytes, 64 * 1024, "a number of bytes")?;
        if max_request_body_bytes < 1024 {
            return Err(invalid("APP_MAX_REQUEST_BODY_BYTES", "must be at least 1024"));
        }
        let authn = AuthnSettings {
            enabled: flag("APP_AUTH_ENABLED", self.app_auth_enabled, true)?,
            audience: self
                .app_auth_audience
                .map(|audience| audience.trim().to_owned())
                .filter(|audience| !audience.is_empty())
                .unwrap_or_else(|| "cluster-provisioner".to_owned()),
            allowed_users: self
                .app_auth_allowed_users
                .filter(|users| !users.trim().is_empty())
                .unwrap_or_else(|| "system:serviceaccount:kubeopera-core:host-cluster-controller".to_owned())
                .split(',')
                .map(str::trim)
                .filter(|user| !user.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        if authn.allowed_users.is_empty() {
            return Err(invalid("APP_AUTH_ALLOWED_USERS", "must name at least one user"));
        }
        Ok(Settings {
            database,
            kubernetes: KubernetesSettings {
                job_namespace,
                terraform_runner_image: self
                    .terraform_runner_image
                    .unwrap_or_else(|| "kubeopera/cluster-provisioner:0.1.0".to_owned()),
                runner_service_account: self
                    .app_runner_service_account
                    .filter(|value| !value.is_empty())
                    .unwrap_or_else(|| "terraform-runner".to_owned()),
                modules_repo_url: self.modules_repo_url.filter(|value| !value.is_empty()),
                modules_repo_ref: self
                    .modules_repo_ref
                    .filter(|value| !value.is_empty())
                    .unwrap_or_else(|| "v1.0.0".to_owned()),
            },
            auth: AuthSettings {
                service_base_url: url(
                    "AUTH_SERVICE_BASE_URL",
                    self.auth_service_base_url.as_deref().unwrap_or("http://authapi:8081"),
                )?,
                oauth_client_file: PathBuf::from(
                    self.app_auth_oauth_path.unwrap_or_else(|| "./dev/auth-oauth.yaml".to_owned()),
                ),
                timeout: duration("APP_AUTH_TIMEOUT", self.app_auth_timeout, "10s")?,
            },
            authn,
            server: ServerSettings {
                address: parse(
                    "APP_ADDRESS",
                    self.app_address,
                    SocketAddr::from(([127, 0, 0, 1], 3000)),
                    "HOST:PORT such as 127.0.0.1:3000",
                )?,
                api_endpoint: endpoint("APP_API_ENDPOINT", self.app_api_endpoint)?,
                playground_endpoint: endpoint("APP_PLAYGROUND_API_ENDPOINT", self.app_playground_api_endpoint)?,
                metrics_address: parse(
                    "APP_METRICS_ADDRESS",
                    self.app_metrics_address,
                    SocketAddr::from(([127, 0, 0, 1], 9000)),
                    "HOST:PORT such as 127.0.0.1:9000",
                )?,
                max_request_body_bytes,
                request_timeout: duration("APP_REQUEST_TIMEOUT", self.app_request_timeout, "30s")?,
                max_concurrent_requests: positive(
                    "APP_MAX_CONCURRENT_REQUESTS",
                    self.app_max_concurrent_requests,
                    256,
                    "a number of requests",
                )?,
                graphql_max_depth: positive("APP_GRAPHQL_MAX_DEPTH", self.app_graphql_max_depth, 10, "a depth")?,
                graphql_max_complexity: positive(
                    "APP_GRAPHQL_MAX_COMPLEXITY",
                    self.app_graphql_max_complexity,
                    500,
                    "a number of fields",
                )?,
                graphql_introspection: flag("APP_GRAPHQL_INTROSPECTION", self.app_graphql_introspection, false)?,
            },
            log: LogSettings { level, format },
            operations: OperationSettings {
                provisioning_timeout: duration("APP_PROVISIONING_TIMEOUT", self.app_provisioning_timeout, "90m")?,
                deprovisioning_timeout: duration("APP_DEPROVISIONING_TIMEOUT", self.app_deprovisioning_timeout, "60m")?,
                enqueue_in_progress,
                worker_concurrency,
                worker_max_runs,
                worker_lease: duration("APP_WORKER_LEASE", self.app_worker_lease, "30s")?,
                worker_poll_interval: duration("APP_WORKER_POLL_INTERVAL", self.app_worker_poll_interval, "2s")?,
            },
            validation: ValidationPolicy { min_kubernetes_version: min_version, max_kubernetes_version: max_version },
        })
    }

    /// `DATABASE_URL` wins; otherwise `APP_DATABASE_HOST` and friends build a PostgreSQL URL; otherwise the
    /// embedded SQLite file.
    fn database(&self) -> Result<DatabaseSettings> {
        let max_connections: u32 = parse(
            "APP_DATABASE_MAX_CONNECTIONS",
            self.app_database_max_connections.clone(),
            10,
            "a number of connections",
        )?;
        if max_connections == 0 {
            return Err(invalid("APP_DATABASE_MAX_CONNECTIONS", "must be at least 1"));
        }
        let acquire_timeout =
            duration("APP_DATABASE_ACQUIRE_TIMEOUT", self.app_database_acquire_timeout.clone(), "3s")?;

        if let Some(database_url) = self.database_url.as_ref().filter(|value| !value.is_empty()) {
            let scheme = database_url.split_once("://").map(|(scheme, _)| scheme);
            if !matches!(scheme, Some("postgres" | "postgresql" | "sqlite")) {
                // Never echo the value: it may hold a password.
                return Err(invalid("DATABASE_URL", "expected a postgres://, postgresql:// or sqlite:// URL"));
            }
            return Ok(DatabaseSettings {
                url: SecretString::from(database_url.clone()),
                max_connections,
                acquire_timeout,
            });
        }
        if let Some(host) = self.app_database_host.as_ref().filter(|value| !value.is_empty()) {
            return Ok(DatabaseSettings {
                url: SecretString::from(self.postgres_url(host)?),
                max_connections,
                acquire_timeout,
            });
        }
        let path = self
            .app_sqlite_path
            .clone()
            .filter(|value| !value.is_empty())
            .unwrap_or_else(|| DEFAULT_SQLITE_PATH.to_owned());
        Ok(DatabaseSettings {
            url: SecretString::from(format!("sqlite://{path}?mode=rwc")),
            max_connections,
            acquire_timeout,
        })
    }

    fn postgres_url(&self, host: &str) -> Result<String> {
        let port: u16 = parse("APP_DATABASE_PORT", self.app_database_port.clone(), 5432, "a port number")?;
        let mut url =
            Url::parse("postgres://localhost").map_err(|error| invalid("APP_DATABASE_HOST", error.to_string()))?;
        url.set_host(Some(host))
            .map_err(|error| invalid("APP_DATABASE_HOST", format!("invalid host {host:?}: {error}")))?;
        url.set_port(Some(port)).map_err(|()| invalid("APP_DATABASE_PORT", "cannot be set for this host"))?;
        let user = self.app_database_user.as_deref().unwrap_or("postgres");
        url.set_username(user).map_err(|()| invalid("APP_DATABASE_USER", "cannot be set for this host"))?;
        let password = self.app_database_password.as_deref().unwrap_or("password");
        url.set_password(Some(password))
            .map_err(|()| invalid("APP_DATABASE_PASSWORD", "cannot be set for this host"))?;
        url.set_path(self.app_database_name.as_deref().unwrap_or("provisioner"));
        let ssl_mode = self.app_database_ssl_mode.as_deref().unwrap_or("disable");
        if !["disable", "allow", "prefer", "require", "verify-ca", "verify-full"].contains(&ssl_mode) {
            return Err(invalid(
                "APP_DATABASE_SSL_MODE",
                format!(
                    "invalid value {ssl_mode:?}: expected disable, allow, prefer, require, verify-ca or verify-full"
                ),
            ));
        }
        url.query_pairs_mut().append_pair("sslmode", ssl_mode);
        if let Some(root_cert) = self.app_database_ssl_root_cert.as_deref().filter(|value| !value.is_empty()) {
            url.query_pairs_mut().append_pair("sslrootcert", root_cert);
        }
        Ok(url.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(variables: &[(&str, &str)]) -> Result<Settings> {
        Settings::from_environment(variables.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect())
    }

    #[test]
    fn defaults_need_no_configuration() {
        let settings = load(&[]).unwrap();
        assert_eq!(settings.server.address.to_string(), "127.0.0.1:3000");
        assert_eq!(settings.server.metrics_address.to_string(), "127.0.0.1:9000");
        assert_eq!(settings.server.api_endpoint, "/graphql");
        assert_eq!(settings.kubernetes.job_namespace, "kubeopera-provisioning");
        assert_eq!(settings.auth.service_base_url.as_str(), "http://authapi:8081/");
        assert_eq!(settings.database.url.expose_secret(), "sqlite://./data/provisioner.db?mode=rwc");
        assert_eq!(settings.log.format, LogFormat::Json);
        assert!(settings.operations.enqueue_in_progress);
        assert_eq!(settings.operations.provisioning_timeout, Duration::from_secs(90 * 60));
        assert_eq!(settings.validation.min_kubernetes_version.to_string(), "1.32");
        assert!(settings.authn.enabled);
        assert_eq!(settings.authn.audience, "cluster-provisioner");
        assert_eq!(settings.authn.allowed_users, ["system:serviceaccount:kubeopera-core:host-cluster-controller"]);
        assert_eq!(settings.server.request_timeout, Duration::from_secs(30));
        assert_eq!(settings.server.max_concurrent_requests, 256);
        assert_eq!(settings.server.graphql_max_depth, 10);
        assert_eq!(settings.server.graphql_max_complexity, 500);
        assert!(!settings.server.graphql_introspection);
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
        ])
        .unwrap();
        assert_eq!(settings.server.address.to_string(), "0.0.0.0:8080");
        assert_eq!(settings.log.format, LogFormat::Text);
        assert_eq!(settings.operations.provisioning_timeout, Duration::from_secs(7200));
        assert!(!settings.operations.enqueue_in_progress);
        assert_eq!(settings.kubernetes.job_namespace, "jobs");
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
        ];
        for (variable, value) in cases {
            let error = load(&[(variable, value)]).expect_err(variable);
            assert!(error.to_string().starts_with(&format!("{variable}:")), "{variable}: {error}");
        }
        let error = load(&[("APP_DATABASE_HOST", "db"), ("APP_DATABASE_PORT", "99999")]).unwrap_err();
        assert!(error.to_string().starts_with("APP_DATABASE_PORT:"), "{error}");
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
        std::fs::write(&path, "app_address: 127.0.0.1:4000\njob_namespace: from-file\napp_log_format: text\n").unwrap();
        let settings = load(&[("APP_CONFIG_FILE", path.to_str().unwrap()), ("JOB_NAMESPACE", "from-env")]).unwrap();
        assert_eq!(settings.server.address.to_string(), "127.0.0.1:4000");
        assert_eq!(settings.log.format, LogFormat::Text);
        assert_eq!(settings.kubernetes.job_namespace, "from-env");

        let error = load(&[("APP_CONFIG_FILE", "/nonexistent/provisioner.yaml")]).unwrap_err();
        assert!(error.to_string().starts_with("APP_CONFIG_FILE:"), "{error}");
    }
}
