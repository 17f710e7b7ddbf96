//! The Job that runs terraform for one run (how it fails, and how to read why: `job_failure.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapEnvSource, ConfigMapProjection, ConfigMapVolumeSource, Container, DownwardAPIProjection,
    DownwardAPIVolumeFile, EmptyDirVolumeSource, EnvFromSource, EnvVar, EnvVarSource, KeyToPath, LocalObjectReference,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, ProjectedVolumeSource, ResourceRequirements,
    SeccompProfile, SecretKeySelector, SecretVolumeSource, SecurityContext, ServiceAccountTokenProjection, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use runner_contract::environment::{RunnerEnvironment, downward_variables, mount, var};
pub use runner_contract::job::finished;
use runner_contract::job::{RUNNER_BINARY, RUNNER_GRACE_PERIOD};
use runner_contract::modules::{self, ModulesSource};

use super::identity::identity_name;
use super::job_failure::pod_failure_policy;
use crate::domain::RunAction;
use crate::domain::run::RunNames;
use crate::telemetry::TraceSettings;

pub const INIT_CONTAINER: &str = "init";
pub const RUNNER_CONTAINER: &str = "terraform-runner";
/// The modules repository's credentials, mounted into the init container only.
const MODULES_CREDENTIALS_VOLUME: &str = "modules-repo-credentials";
/// Finished Jobs (and their pods, with the logs) stay a week for inspection, then the TTL controller removes them.
const FINISHED_JOB_TTL_SECONDS: i32 = 7 * 24 * 3600;

/// What every run's Job needs from the configuration.
#[derive(Debug, Clone)]
pub struct JobSettings {
    pub namespace: String,
    pub runner_image: String,
    pub runner_resources: RunnerResources,
    /// `APP_RUNNER_HOST_NETWORK`: the pods share the node's network, for a cluster without a pod network (one
    /// local node); the Jobs' namespace must then allow it (Pod Security "privileged").
    pub host_network: bool,
    /// `APP_RUNNER_ENV_CONFIGMAP`: a ConfigMap in the Jobs' namespace whose entries both containers get as
    /// environment (proxies, a cloud's endpoint); optional, and never above the Job's own variables.
    pub env_config_map: Option<String>,
    /// Where the runners export their spans (the service's collector); off when the service's traces are.
    pub traces: TraceSettings,
    /// `APP_STATE_ENCRYPTION_SECRET`: a Secret in the Jobs' namespace whose `passphrase` encrypts every state and
    /// saved plan (the runner's `RUNNER_STATE_PASSPHRASE`); `None`: they are not encrypted.
    pub state_encryption_secret: Option<String>,
    /// `APP_RUNNER_IMAGE_PULL_SECRETS`: the Secrets of the Jobs' namespace their pods pull the image with.
    pub image_pull_secrets: Vec<String>,
    /// `APP_RUNNER_SERVICE_ACCOUNT_ANNOTATIONS`: on each run's ServiceAccount (a key-less cloud identity).
    pub service_account_annotations: BTreeMap<String, String>,
}

/// The key of the passphrase in the state encryption Secret.
pub const STATE_PASSPHRASE_KEY: &str = "passphrase";

/// Requests and limits of the runner container, as Kubernetes quantities (`APP_RUNNER_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerResources {
    pub cpu_request: String,
    pub memory_request: String,
    pub cpu_limit: String,
    pub memory_limit: String,
}

impl RunnerResources {
    fn requirements(&self) -> ResourceRequirements {
        requirements([&self.cpu_request, &self.memory_request], [&self.cpu_limit, &self.memory_limit])
    }
}

/// The init container only clones the modules.
const INIT_RESOURCES: ([&str; 2], [&str; 2]) = (["50m", "64Mi"], ["500m", "256Mi"]);

fn requirements(requests: [&str; 2], limits: [&str; 2]) -> ResourceRequirements {
    let quantities = |[cpu, memory]: [&str; 2]| {
        BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])
    };
    ResourceRequirements {
        requests: Some(quantities(requests)),
        limits: Some(quantities(limits)),
        ..ResourceRequirements::default()
    }
}

/// The modules every Job's init container fetches, and what it may use to do so.
#[derive(Debug, Clone)]
pub struct ModulesSettings {
    pub source: ModulesSource,
    /// A Secret in the Jobs' namespace with `username` and `password`, mounted into the init container only.
    pub credentials_secret: Option<String>,
    /// `MODULES_REPO_ALLOW_LOCAL`: `file://` URLs, for tests only.
    pub allow_local: bool,
}

/// The Job of one run: `init` clones the modules at the pinned ref and checks their commit (with the modules
/// repository's credentials, when there are any, mounted into it alone), `terraform-runner` applies or destroys
/// with the rendered configuration and the credentials mounted as files (never in the spec or the environment).
/// With traces on, the runner continues `traceparent` (the span that created the Job).
pub fn build(
    settings: &JobSettings,
    repo: &ModulesSettings,
    action: RunAction,
    names: &RunNames,
    labels: &BTreeMap<String, String>,
    active_deadline: Duration,
    traceparent: Option<String>,
) -> Job {
    Job {
        metadata: ObjectMeta { name: Some(names.job.clone()), labels: Some(labels.clone()), ..ObjectMeta::default() },
        spec: Some(JobSpec {
            // terraform must never run twice at once for one state: no retries by the Job controller.
            backoff_limit: Some(0),
            pod_failure_policy: Some(pod_failure_policy(RUNNER_CONTAINER)),
            active_deadline_seconds: Some(active_deadline.as_secs().max(1) as i64),
            ttl_seconds_after_finished: Some(FINISHED_JOB_TTL_SECONDS),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels.clone()), ..ObjectMeta::default() }),
                spec: Some(pod_spec(settings, repo, action, names, traceparent)),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

fn pod_spec(
    settings: &JobSettings,
    repo: &ModulesSettings,
    action: RunAction,
    names: &RunNames,
    traceparent: Option<String>,
) -> PodSpec {
    PodSpec {
        restart_policy: Some("Never".to_owned()),
        host_network: settings.host_network.then_some(true),
        // With the node's network, cluster DNS stays the resolver.
        dns_policy: settings.host_network.then(|| "ClusterFirstWithHostNet".to_owned()),
        // A stopped runner interrupts Terraform, which finishes the calls in flight, writes its state and releases
        // the lock; that takes longer than the default 30 s.
        termination_grace_period_seconds: Some(RUNNER_GRACE_PERIOD.as_secs() as i64),
        // The run's own ServiceAccount (`identity.rs`), which may update this runtime's outputs Secret and no other
        // Secret; never the chart's shared `terraform-runner`, which only the previous release's Jobs still use.
        service_account_name: Some(identity_name(names).to_owned()),
        // The token goes to the runner alone (a projected volume), not to the init container.
        automount_service_account_token: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65532),
            fs_group: Some(65532),
            // With the containers' `restricted()` settings, this meets the "restricted" Pod Security level that
            // the chart enforces for the Jobs' namespace (charts/cluster-provisioner).
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".to_owned(), ..SeccompProfile::default() }),
            ..PodSecurityContext::default()
        }),
        init_containers: Some(vec![init_container(settings, repo)]),
        containers: vec![runner_container(settings, action, names, traceparent)],
        volumes: Some(volumes(repo, names)),
        image_pull_secrets: (!settings.image_pull_secrets.is_empty()).then(|| {
            let secret = |name: &String| LocalObjectReference { name: name.clone() };
            settings.image_pull_secrets.iter().map(secret).collect()
        }),
        ..PodSpec::default()
    }
}

fn volume_mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: Some(read_only),
        ..VolumeMount::default()
    }
}

/// What both containers run with: no privileges, no writes outside their volumes.
fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_owned()]), ..Capabilities::default() }),
        ..SecurityContext::default()
    }
}

/// `init`: fetches the modules into the workspace.
fn init_container(settings: &JobSettings, repo: &ModulesSettings) -> Container {
    let mut mounts = vec![volume_mount("workspace", mount::WORKSPACE, false)];
    if repo.credentials_secret.is_some() {
        mounts.push(volume_mount(MODULES_CREDENTIALS_VOLUME, modules::mount::CREDENTIALS_DIR, true));
    }
    Container {
        name: INIT_CONTAINER.to_owned(),
        image: Some(settings.runner_image.clone()),
        command: Some(vec![RUNNER_BINARY.to_owned(), "fetch-modules".to_owned()]),
        env: Some(modules_variables(repo)),
        env_from: operator_environment(settings),
        volume_mounts: Some(mounts),
        resources: Some(requirements(INIT_RESOURCES.0, INIT_RESOURCES.1)),
        security_context: Some(restricted()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    }
}

/// `terraform-runner`: runs `action` with the rendered configuration and the credentials.
fn runner_container(
    settings: &JobSettings,
    action: RunAction,
    names: &RunNames,
    traceparent: Option<String>,
) -> Container {
    Container {
        name: RUNNER_CONTAINER.to_owned(),
        image: Some(settings.runner_image.clone()),
        // The binary is named here rather than by the image's entrypoint (the service), so that any image holding
        // both works.
        command: Some(vec![RUNNER_BINARY.to_owned()]),
        args: Some(vec!["--action".to_owned(), action.as_str().to_owned()]),
        env: Some(runner_variables(settings, names, traceparent)),
        env_from: operator_environment(settings),
        resources: Some(settings.runner_resources.requirements()),
        volume_mounts: Some(vec![
            volume_mount(API_ACCESS_VOLUME, API_ACCESS_PATH, true),
            volume_mount("workspace", mount::WORKSPACE, false),
            volume_mount("aws", mount::AWS_CONFIG_DIR, false),
            volume_mount("config", mount::CONFIG_DIR, true),
            volume_mount("credentials", mount::CREDENTIALS_DIR, true),
        ]),
        security_context: Some(restricted()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    }
}

/// The runner's variables: the contract's, the pod's own namespace and name from the downward API, and with traces
/// on where to export and the trace to continue.
fn runner_variables(settings: &JobSettings, names: &RunNames, traceparent: Option<String>) -> Vec<EnvVar> {
    let traces = settings.traces.child_environment(RUNNER_CONTAINER, traceparent);
    RunnerEnvironment::for_job(names.outputs_secret.clone())
        .variables()
        .into_iter()
        .chain(traces)
        .map(|(name, value)| EnvVar { name: name.to_owned(), value: Some(value), ..EnvVar::default() })
        // The Secret goes into the pod's own namespace, whatever it is; the lock holder is the pod and its operation.
        .chain(downward_variables().into_iter().map(|(name, field_path)| EnvVar {
            name: name.to_owned(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path, ..ObjectFieldSelector::default() }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }))
        .chain(settings.state_encryption_secret.as_deref().map(state_passphrase))
        .collect()
}

/// The passphrase by reference: the kubelet reads it from the Secret, so it is never in the Job's spec.
fn state_passphrase(secret: &str) -> EnvVar {
    EnvVar {
        name: var::STATE_PASSPHRASE.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: STATE_PASSPHRASE_KEY.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn volumes(repo: &ModulesSettings, names: &RunNames) -> Vec<Volume> {
    let secret = |name: &str, secret_name: &str| Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret_name.to_owned()),
            default_mode: Some(0o400),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mut volumes = vec![
        api_access_volume(),
        Volume { name: "workspace".to_owned(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Volume::default() },
        // Memory-backed: the AWS profile of an assume-role credential may hold its source keys.
        Volume {
            name: "aws".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_owned()),
                size_limit: Some(Quantity("1Mi".to_owned())),
            }),
            ..Volume::default()
        },
        Volume {
            name: "config".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: names.config_map.clone(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        secret("credentials", &names.credentials_secret),
    ];
    if let Some(secret_name) = &repo.credentials_secret {
        volumes.push(secret(MODULES_CREDENTIALS_VOLUME, secret_name));
    }
    volumes
}

/// The operator's ConfigMap of extra variables, if any; a missing one does not stop the Job.
fn operator_environment(settings: &JobSettings) -> Option<Vec<EnvFromSource>> {
    let name = settings.env_config_map.clone()?;
    Some(vec![EnvFromSource {
        config_map_ref: Some(ConfigMapEnvSource { name, optional: Some(true) }),
        ..EnvFromSource::default()
    }])
}

/// Where clients look for the in-cluster token, CA and namespace.
const API_ACCESS_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const API_ACCESS_VOLUME: &str = "kube-api-access";
/// A bound token lives an hour; the kubelet renews it well before.
const TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// What the kubelet would mount into every container with automounting on, as one projected volume the runner
/// alone mounts.
fn api_access_volume() -> Volume {
    Volume {
        name: API_ACCESS_VOLUME.to_owned(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o444),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        path: "token".to_owned(),
                        expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                        ..ServiceAccountTokenProjection::default()
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: "kube-root-ca.crt".to_owned(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".to_owned(),
                            path: "ca.crt".to_owned(),
                            mode: None,
                        }]),
                        ..ConfigMapProjection::default()
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![DownwardAPIVolumeFile {
                            path: "namespace".to_owned(),
                            field_ref: Some(ObjectFieldSelector {
                                field_path: "metadata.namespace".to_owned(),
                                ..ObjectFieldSelector::default()
                            }),
                            ..DownwardAPIVolumeFile::default()
                        }]),
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    }
}

/// The init container's settings: the pinned source (no secret: credentials come from the mounted Secret).
fn modules_variables(repo: &ModulesSettings) -> Vec<EnvVar> {
    let source = &repo.source;
    let mut variables = vec![
        (modules::var::URL, source.url.clone()),
        (modules::var::REF, source.git_ref.clone()),
        (modules::var::COMMIT, source.commit.clone()),
    ];
    if repo.allow_local {
        variables.push((modules::var::ALLOW_LOCAL, "true".to_owned()));
    }
    variables
        .into_iter()
        .map(|(name, value)| EnvVar { name: name.to_owned(), value: Some(value), ..EnvVar::default() })
        .collect()
}

#[cfg(test)]
mod tests;
