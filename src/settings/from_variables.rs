//! Each module's settings built from the variables, in one place, with the checks that name the variable at fault.

use std::collections::BTreeMap;

use ipnet::Ipv4Net;

use super::*;
use crate::declarative::reconciler::RuntimeNamespaces;
use crate::domain::api_access::{ListProblem, parse_api_allowed_cidrs};
use crate::domain::kubeconfig_lifetime::{MAX_LIFETIME, MIN_LIFETIME};
use crate::domain::tenant::Tenant;

fn invalid(variable: &str, message: impl Into<String>) -> Error {
    Error::Invalid { variable: variable.to_owned(), message: message.into() }
}

fn at_least<T: PartialOrd + std::fmt::Display>(variable: &str, value: T, minimum: T) -> Result<T> {
    if value < minimum {
        return Err(invalid(variable, format!("must be at least {minimum}")));
    }
    Ok(value)
}

/// Rejects a number outside `range`, naming the variable.
fn within<T: PartialOrd + std::fmt::Display>(
    variable: &str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T> {
    if range.contains(&value) {
        return Ok(value);
    }
    Err(invalid(variable, format!("must be between {} and {}", range.start(), range.end())))
}

/// A Kubernetes object name (a DNS-1123 subdomain), checked here so that a typo fails at start-up, not every Job.
fn is_object_name(name: &str) -> bool {
    let allowed = |character: char| character.is_ascii_lowercase() || character.is_ascii_digit();
    name.len() <= 253
        && name.starts_with(allowed)
        && name.ends_with(allowed)
        && name.chars().all(|character| allowed(character) || character == '-' || character == '.')
}

/// A namespace's name (a DNS-1123 label): an object name of at most 63 characters without dots.
fn is_namespace_name(name: &str) -> bool {
    name.len() <= 63 && is_object_name(name) && !name.contains('.')
}

/// `namespace` as the namespace `variable` names, or why it cannot be one.
fn namespace(variable: &str, namespace: &str) -> Result<()> {
    if is_namespace_name(namespace) {
        return Ok(());
    }
    Err(invalid(variable, format!("invalid namespace {namespace:?}: expected a DNS-1123 label")))
}

fn endpoint(variable: &str, value: String) -> Result<String> {
    if !value.starts_with('/') || value.contains(char::is_whitespace) || value.contains(['{', '}', '*']) {
        return Err(invalid(variable, format!("invalid path {value:?}: expected an absolute path such as /graphql")));
    }
    Ok(value)
}

impl Variables {
    /// The modules repository, pinned to a commit, when one is configured.
    fn modules(&self) -> Result<Option<ModulesSettings>> {
        let Some(url) = self.modules_repo_url.as_deref().filter(|url| !url.is_empty()) else {
            return Ok(None);
        };
        let commit = self.modules_repo_commit.as_deref().unwrap_or_default();
        let allow_local = self.modules_repo_allow_local;
        let source = ModulesSource::new(url, &self.modules_repo_ref, commit, allow_local)
            .map_err(|error| invalid(error.variable, error.message))?;
        let credentials_secret = self.modules_repo_credentials_secret.clone().filter(|name| !name.is_empty());
        Ok(Some(ModulesSettings { source, credentials_secret, allow_local }))
    }

    /// The Secret whose passphrase encrypts the states; unset or blank: none.
    fn state_encryption_secret(&self) -> Result<Option<String>> {
        let secret = self.app_state_encryption_secret.clone().filter(|name| !name.is_empty());
        match secret {
            Some(name) if !is_object_name(&name) => Err(invalid(
                "APP_STATE_ENCRYPTION_SECRET",
                format!("invalid Secret name {name:?}: expected lowercase letters, digits, '-' and '.'"),
            )),
            secret => Ok(secret),
        }
    }

    /// Where credentials come from, and for `secrets` the platform's own namespace.
    fn credential_source(&self) -> Result<CredentialSource> {
        let namespace = self.app_credentials_namespace.clone().filter(|name| !name.is_empty());
        if let Some(name) = &namespace {
            self::namespace("APP_CREDENTIALS_NAMESPACE", name)?;
        }
        match self.app_credentials_source.as_str() {
            "auth-service" if namespace.is_some() => {
                Err(invalid("APP_CREDENTIALS_NAMESPACE", "only applies with APP_CREDENTIALS_SOURCE=secrets"))
            }
            "auth-service" => Ok(CredentialSource::AuthService),
            "secrets" => Ok(CredentialSource::Secrets { platform_namespace: namespace }),
            other => Err(invalid(
                "APP_CREDENTIALS_SOURCE",
                format!("unknown source {other:?}: expected auth-service or secrets"),
            )),
        }
    }

    /// The Secrets the Jobs' pods pull with; unset or blank: none.
    fn runner_image_pull_secrets(&self) -> Result<Vec<String>> {
        let names = self.app_runner_image_pull_secrets.as_deref().unwrap_or_default();
        let names: Vec<String> =
            names.split(',').map(str::trim).filter(|name| !name.is_empty()).map(String::from).collect();
        match names.iter().find(|name| !is_object_name(name)) {
            Some(name) => Err(invalid(
                "APP_RUNNER_IMAGE_PULL_SECRETS",
                format!("invalid Secret name {name:?}: expected lowercase letters, digits, '-' and '.'"),
            )),
            None => Ok(names),
        }
    }

    /// The annotations of each run's ServiceAccount; unset or blank: none.
    fn runner_service_account_annotations(&self) -> Result<BTreeMap<String, String>> {
        let variable = "APP_RUNNER_SERVICE_ACCOUNT_ANNOTATIONS";
        let text = self.app_runner_service_account_annotations.as_deref().unwrap_or_default().trim();
        if text.is_empty() {
            return Ok(BTreeMap::new());
        }
        let annotations: BTreeMap<String, String> = serde_json::from_str(text)
            .map_err(|error| invalid(variable, format!("expected a JSON object of strings: {error}")))?;
        match annotations.keys().find(|key| key.is_empty() || key.contains(char::is_whitespace)) {
            Some(key) => Err(invalid(variable, format!("invalid annotation key {key:?}"))),
            None => Ok(annotations),
        }
    }

    /// What every run's Job is made of.
    fn jobs(&self, traces: &TraceSettings) -> Result<JobSettings> {
        let env_config_map = self.app_runner_env_configmap.clone().filter(|name| !name.is_empty());
        if let Some(name) = &env_config_map
            && !is_object_name(name)
        {
            let message = format!("invalid ConfigMap name {name:?}: expected lowercase letters, digits, '-' and '.'");
            return Err(invalid("APP_RUNNER_ENV_CONFIGMAP", message));
        }
        Ok(JobSettings {
            namespace: self.job_namespace.clone(),
            runner_image: self.terraform_runner_image.clone(),
            runner_resources: RunnerResources {
                cpu_request: self.app_runner_cpu_request.clone(),
                memory_request: self.app_runner_memory_request.clone(),
                cpu_limit: self.app_runner_cpu_limit.clone(),
                memory_limit: self.app_runner_memory_limit.clone(),
            },
            host_network: self.app_runner_host_network,
            env_config_map,
            traces: traces.clone(),
            state_encryption_secret: self.state_encryption_secret()?,
            image_pull_secrets: self.runner_image_pull_secrets()?,
            service_account_annotations: self.runner_service_account_annotations()?,
        })
    }

    fn traces(&self) -> Result<TraceSettings> {
        TraceSettings::from_values(
            self.otel_exporter_otlp_endpoint.as_deref(),
            self.otel_service_name.as_deref(),
            "provisioner",
            self.otel_traces_sampler.as_deref(),
            self.otel_traces_sampler_arg.as_deref(),
        )
        .map_err(|error| invalid(error.variable, error.message))
    }

    /// The checks one variable's type cannot make, then the settings each part of the service takes.
    pub(super) fn validate(self) -> Result<Settings> {
        let database = self.database()?;
        let modules = self.modules()?;
        let traces = self.traces()?;
        let jobs = self.jobs(&traces)?;
        if tracing_subscriber::EnvFilter::try_new(&self.app_log_level).is_err() {
            let message = format!("invalid filter {:?}: expected for example info or debug", self.app_log_level);
            return Err(invalid("APP_LOG_LEVEL", message));
        }
        let (min_version, max_version) = (self.app_kubernetes_version_min, self.app_kubernetes_version_max);
        if min_version > max_version {
            let message = format!("{min_version} is above APP_KUBERNETES_VERSION_MAX {max_version}");
            return Err(invalid("APP_KUBERNETES_VERSION_MIN", message));
        }
        namespace("JOB_NAMESPACE", &self.job_namespace)?;
        if !matches!(self.auth_service_base_url.scheme(), "http" | "https") {
            let message = format!("invalid URL {:?}: expected http or https", self.auth_service_base_url.as_str());
            return Err(invalid("AUTH_SERVICE_BASE_URL", message));
        }
        let api_allowed_cidrs = self.api_allowed_cidrs()?;
        let allowed_users: Vec<String> = (self.app_auth_allowed_users.split(','))
            .map(str::trim)
            .filter(|user| !user.is_empty())
            .map(str::to_owned)
            .collect();
        if allowed_users.is_empty() {
            return Err(invalid("APP_AUTH_ALLOWED_USERS", "must name at least one user"));
        }
        Ok(Settings {
            database,
            kubernetes: KubernetesSettings { jobs, modules, runtime_resources: self.runtime_resources()? },
            auth: AuthSettings {
                service_base_url: self.auth_service_base_url.clone(),
                oauth_client_file: self.app_auth_oauth_path.clone(),
                timeout: self.app_auth_timeout,
            },
            credentials: self.credential_source()?,
            authn: AuthnSettings {
                enabled: self.app_auth_enabled,
                audience: self.app_auth_audience.clone(),
                allowed_users,
                authorization: self.app_authz_mode,
                tenant_required: self.app_tenant_required,
            },
            server: self.server()?,
            http: self.http()?,
            service: self.service()?,
            worker: self.worker()?,
            retention: RetentionPeriods {
                run_logs: self.app_run_log_retention,
                idempotency_records: self.app_idempotency_key_ttl,
                plan_approvals: self.app_plan_approval_ttl,
            },
            certificates: CertificateWatchSettings {
                reads_per_minute: within(
                    "APP_CERTIFICATE_READS_PER_MINUTE",
                    self.app_certificate_reads_per_minute,
                    1..=600,
                )?,
                reread_after: match self.app_certificate_reread_after {
                    reread if reread >= Duration::from_secs(1) => reread,
                    _ => return Err(invalid("APP_CERTIFICATE_REREAD_AFTER", "must be at least 1s")),
                },
            },
            log: LogSettings { level: self.app_log_level, format: self.app_log_format, traces },
            validation: ValidationPolicy {
                min_kubernetes_version: min_version,
                max_kubernetes_version: max_version,
                api_allowed_cidrs,
            },
        })
    }

    /// The operator's ranges for a cluster's API, each entry checked (and named by its position) as a request's
    /// are; unset: none, and a request must name its own.
    fn api_allowed_cidrs(&self) -> Result<Option<Vec<Ipv4Net>>> {
        let variable = "APP_API_ALLOWED_CIDRS";
        let Some(value) = self.app_api_allowed_cidrs.as_deref() else {
            return Ok(None);
        };
        let entries = value.split(',').map(str::trim).filter(|entry| !entry.is_empty());
        let cidrs = parse_api_allowed_cidrs(entries).map_err(|problem| match problem {
            ListProblem::Invalid { index, message } | ListProblem::Repeated { index, message } => {
                invalid(variable, format!("entry {}: {message}", index + 1))
            }
            ListProblem::Count { message } => invalid(variable, message),
        })?;
        Ok(Some(cidrs))
    }

    /// `off`: none; `all`; or the listed namespaces, each a DNS label as a namespace's name is.
    fn runtime_resources(&self) -> Result<Option<RuntimeNamespaces>> {
        let variable = "APP_RUNTIME_RESOURCES";
        match self.app_runtime_resources.trim() {
            "off" | "" => Ok(None),
            "all" => Ok(Some(RuntimeNamespaces::All)),
            list => {
                let names: Vec<String> =
                    list.split(',').map(str::trim).filter(|name| !name.is_empty()).map(str::to_owned).collect();
                match names.iter().find(|name| Tenant::parse(name).is_err()) {
                    Some(name) => {
                        Err(invalid(variable, format!("{name:?} is not a namespace's name (off, all or names)")))
                    }
                    None => Ok(Some(RuntimeNamespaces::Only(names))),
                }
            }
        }
    }

    fn server(&self) -> Result<ServerSettings> {
        let tls = match (&self.app_tls_cert_file, &self.app_tls_key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                if self.app_tls_max_handshakes == 0 {
                    return Err(invalid("APP_TLS_MAX_HANDSHAKES", "must be at least 1"));
                }
                Some(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    reload_interval: self.app_tls_reload_interval,
                    max_handshakes: self.app_tls_max_handshakes,
                })
            }
            (Some(_), None) => return Err(invalid("APP_TLS_KEY_FILE", "is required with APP_TLS_CERT_FILE")),
            (None, Some(_)) => return Err(invalid("APP_TLS_CERT_FILE", "is required with APP_TLS_KEY_FILE")),
        };
        Ok(ServerSettings {
            address: self.app_address,
            playground_assets_dir: self.app_playground_assets_dir.clone(),
            setup_progress_file: self.app_setup_progress_file.clone(),
            metrics_address: self.app_metrics_address,
            tls,
            shutdown_delay: self.app_shutdown_delay,
        })
    }

    fn http(&self) -> Result<HttpSettings> {
        Ok(HttpSettings {
            api_endpoint: endpoint("APP_API_ENDPOINT", self.app_api_endpoint.clone())?,
            playground_endpoint: endpoint("APP_PLAYGROUND_API_ENDPOINT", self.app_playground_api_endpoint.clone())?,
            max_body_bytes: at_least("APP_MAX_REQUEST_BODY_BYTES", self.app_max_request_body_bytes, 1024)?,
            request_timeout: self.app_request_timeout,
            websocket_init_timeout: self.app_websocket_init_timeout,
            websocket_reauthentication_interval: self.app_websocket_reauthentication_interval,
            max_concurrent_requests: at_least("APP_MAX_CONCURRENT_REQUESTS", self.app_max_concurrent_requests, 1)?,
            graphql: graphql::Limits {
                max_depth: at_least("APP_GRAPHQL_MAX_DEPTH", self.app_graphql_max_depth, 1)?,
                max_complexity: at_least("APP_GRAPHQL_MAX_COMPLEXITY", self.app_graphql_max_complexity, 1)?,
                introspection: self.app_graphql_introspection,
                operation_timeout: self.app_request_timeout,
            },
        })
    }

    fn service(&self) -> Result<ServiceSettings> {
        let max_log_bytes = self.app_max_log_bytes_per_request;
        Ok(ServiceSettings {
            idempotency_key_ttl: self.app_idempotency_key_ttl,
            log_bytes_per_request: at_least("APP_MAX_LOG_BYTES_PER_REQUEST", max_log_bytes, 4096)?,
            stream_limits: StreamLimits {
                per_caller: within("APP_MAX_STREAMS_PER_CALLER", self.app_max_streams_per_caller, 1..=10_000)?,
                total: within("APP_MAX_STREAMS", self.app_max_streams, 1..=100_000)?,
            },
            kubeconfig_lifetime: self.kubeconfig_lifetime()?,
            deletion: DeletionPolicy {
                protected_environments: (self.app_protected_environments.split(','))
                    .map(str::trim)
                    .filter(|environment| !environment.is_empty())
                    .map(str::to_owned)
                    .collect(),
                require_confirmation: self.app_require_delete_confirmation,
            },
        })
    }

    fn kubeconfig_lifetime(&self) -> Result<Duration> {
        let (lifetime, range) = (self.app_kubeconfig_lifetime, MIN_LIFETIME..=MAX_LIFETIME);
        if range.contains(&lifetime) {
            return Ok(lifetime);
        }
        let (minimum, maximum) = (humantime::format_duration(MIN_LIFETIME), humantime::format_duration(MAX_LIFETIME));
        Err(invalid("APP_KUBECONFIG_LIFETIME", format!("must be between {minimum} and {maximum}")))
    }

    fn worker(&self) -> Result<WorkerSettings> {
        Ok(WorkerSettings {
            // Unique per process, so that two processes on one host never share a lease.
            owner: format!("{}-{}", self.hostname, uuid::Uuid::now_v7().simple()),
            concurrency: within("APP_WORKER_CONCURRENCY", self.app_worker_concurrency, 1..=256)?,
            max_runs: within("APP_WORKER_MAX_RUNS", self.app_worker_max_runs, 1..=100_000)?,
            lease: self.app_worker_lease,
            poll_interval: self.app_worker_poll_interval,
            enqueue_in_progress: self.app_enqueue_in_progress_operations,
            provisioning_timeout: self.app_provisioning_timeout,
            deprovisioning_timeout: self.app_deprovisioning_timeout,
            upgrade_timeout: self.app_upgrade_timeout,
            hibernation_timeout: self.app_hibernation_timeout,
            run_log_max_bytes: at_least("APP_RUN_LOG_MAX_BYTES", self.app_run_log_max_bytes, 4096)?,
            plan_approval_ttl: self.app_plan_approval_ttl,
        })
    }

    /// `DATABASE_URL` wins; otherwise `APP_DATABASE_HOST` and friends build a PostgreSQL URL; otherwise the
    /// embedded SQLite file.
    fn database(&self) -> Result<DatabaseSettings> {
        let url = match (&self.database_url, &self.app_database_host) {
            (Some(database_url), _) => {
                let scheme = database_url.split_once("://").map(|(scheme, _)| scheme);
                if !matches!(scheme, Some("postgres" | "postgresql" | "sqlite")) {
                    // Never echo the value: it may hold a password.
                    return Err(invalid("DATABASE_URL", "expected a postgres://, postgresql:// or sqlite:// URL"));
                }
                database_url.clone()
            }
            (None, Some(host)) => self.postgres_url(host)?,
            (None, None) => format!("sqlite://{}?mode=rwc", self.app_sqlite_path),
        };
        Ok(DatabaseSettings {
            url: SecretString::from(url),
            max_connections: at_least("APP_DATABASE_MAX_CONNECTIONS", self.app_database_max_connections, 1)?,
            acquire_timeout: self.app_database_acquire_timeout,
            migrations: if self.app_database_migrate { Migrations::Apply } else { Migrations::Check },
        })
    }

    fn postgres_url(&self, host: &str) -> Result<String> {
        let address = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = host == "localhost" || address.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !loopback && self.app_database_password.expose_secret() == DEVELOPMENT_DATABASE_PASSWORD {
            return Err(invalid(
                "APP_DATABASE_PASSWORD",
                format!("is the built-in development default; set the password of the database at {host}"),
            ));
        }
        let mut url =
            Url::parse("postgres://localhost").map_err(|error| invalid("APP_DATABASE_HOST", error.to_string()))?;
        url.set_host(Some(host))
            .map_err(|error| invalid("APP_DATABASE_HOST", format!("invalid host {host:?}: {error}")))?;
        url.set_port(Some(self.app_database_port))
            .map_err(|()| invalid("APP_DATABASE_PORT", "cannot be set for this host"))?;
        url.set_username(&self.app_database_user)
            .map_err(|()| invalid("APP_DATABASE_USER", "cannot be set for this host"))?;
        url.set_password(Some(self.app_database_password.expose_secret()))
            .map_err(|()| invalid("APP_DATABASE_PASSWORD", "cannot be set for this host"))?;
        url.set_path(&self.app_database_name);
        let ssl_mode = self.app_database_ssl_mode.as_str();
        if !["disable", "allow", "prefer", "require", "verify-ca", "verify-full"].contains(&ssl_mode) {
            let message = format!(
                "invalid value {ssl_mode:?}: expected disable, allow, prefer, require, verify-ca or verify-full"
            );
            return Err(invalid("APP_DATABASE_SSL_MODE", message));
        }
        url.query_pairs_mut().append_pair("sslmode", ssl_mode);
        if let Some(root_cert) = &self.app_database_ssl_root_cert {
            url.query_pairs_mut().append_pair("sslrootcert", root_cert);
        }
        Ok(url.to_string())
    }
}
