//! The deployment manifests (`resources/kustomization.yaml` and the files it lists) applied as they are to the
//! real test control plane, in their real namespaces `kubeopera-core` and `kubeopera-provisioning` (no other
//! test uses them; the other tests make namespaces of their own on the shared control plane). Server-side apply with strict field
//! validation, so the API server checks every schema and rejects unknown fields; applying again is a no-op, so
//! the tests are idempotent. Then the RBAC is checked for real: SubjectAccessReviews with the groups a
//! ServiceAccount token carries, and requests made as the two ServiceAccounts themselves.
//! Needs TEST_CONTROL_PLANE_BIN_DIR (see `make control-plane`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, Pod, PodSpec, PodTemplateSpec, Secret, Service, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{Scope, pinned_kind};
use kube::{Api, Client};
use provisioner::settings::Settings;
use serde_json::{Value, json};
use yaml_rust2::{Yaml, YamlLoader};

const RESOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/resources");
const FIELD_MANAGER: &str = "cluster-provisioner-manifests-test";
const CORE: &str = "kubeopera-core";
const PROVISIONING: &str = "kubeopera-provisioning";
const PROVISIONER_USER: &str = "system:serviceaccount:kubeopera-core:cluster-provisioner";
const RUNNER_USER: &str = "system:serviceaccount:kubeopera-provisioning:terraform-runner";
/// Variables the ConfigMap must set for the service to work in a cluster (the defaults are for `make run`).
const REQUIRED_VARIABLES: &[&str] = &[
    "APP_ADDRESS",
    "APP_METRICS_ADDRESS",
    "JOB_NAMESPACE",
    "TERRAFORM_RUNNER_IMAGE",
    "MODULES_REPO_URL",
    "MODULES_REPO_REF",
    "MODULES_REPO_COMMIT",
    "AUTH_SERVICE_BASE_URL",
    "APP_AUTH_OAUTH_PATH",
    "APP_AUTH_ALLOWED_USERS",
];

/// Every document of the rendered kustomization, in order: the files of its `resources:` list. Any other
/// kustomize feature would change what `kubectl apply -k` sends, so the kustomization may use none.
fn rendered() -> Vec<Value> {
    let kustomization = read_yaml(&Path::new(RESOURCES).join("kustomization.yaml"));
    assert_eq!(kustomization.len(), 1, "kustomization.yaml is one document");
    let kustomization = &kustomization[0];
    assert_eq!(kustomization["kind"], "Kustomization");
    let keys: Vec<&str> = kustomization.as_object().unwrap().keys().map(String::as_str).collect();
    for key in &keys {
        assert!(
            ["apiVersion", "kind", "resources"].contains(key),
            "kustomization.yaml uses `{key}`, which this test does not render: apply its equivalent here"
        );
    }
    let files: Vec<&str> =
        kustomization["resources"].as_array().unwrap().iter().map(|file| file.as_str().unwrap()).collect();
    // Every manifest next to the kustomization is listed (sub-folders such as terraform/ are not manifests).
    let mut present: Vec<String> = std::fs::read_dir(RESOURCES)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| (name.ends_with(".yaml") || name.ends_with(".yml")) && name != "kustomization.yaml")
        .collect();
    present.sort();
    let mut listed: Vec<String> = files.iter().map(ToString::to_string).collect();
    listed.sort();
    assert_eq!(listed, present, "kustomization.yaml lists exactly the manifests in resources/");
    // The shared namespace is the platform's, applied before the kustomization (which must not own it).
    let platform = read_yaml(&Path::new(RESOURCES).join("platform/kubeopera-core.yaml"));
    platform.into_iter().chain(files.iter().flat_map(|file| read_yaml(&Path::new(RESOURCES).join(file)))).collect()
}

fn read_yaml(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    YamlLoader::load_from_str(&text)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .iter()
        .map(yaml_to_json)
        .filter(|document| !document.is_null())
        .collect()
}

fn yaml_to_json(yaml: &Yaml) -> Value {
    match yaml {
        Yaml::Hash(hash) => Value::Object(
            hash.iter()
                .map(|(key, value)| {
                    let key = key.as_str().unwrap_or_else(|| panic!("a mapping key that is not a string: {key:?}"));
                    (key.to_owned(), yaml_to_json(value))
                })
                .collect(),
        ),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::String(text) => Value::from(text.as_str()),
        Yaml::Integer(number) => Value::from(*number),
        Yaml::Boolean(flag) => Value::from(*flag),
        Yaml::Real(text) => Value::from(text.parse::<f64>().expect("a YAML float")),
        Yaml::Null => Value::Null,
        other => panic!("unsupported YAML node in a manifest (aliases are not allowed): {other:?}"),
    }
}

fn describe(object: &Value) -> String {
    format!(
        "{} {}/{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["namespace"].as_str().unwrap_or("-"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Applies every rendered document with server-side apply (strict field validation) as the admin and returns
/// each manifest with the object the API server stored.
async fn apply_all(admin: &Client) -> Vec<(Value, Value)> {
    // The tests of this binary run in parallel; two applies creating the same object at once could conflict.
    static APPLYING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _applying = APPLYING.lock().await;
    let mut applied = Vec::new();
    for manifest in rendered() {
        let what = describe(&manifest);
        let api_version = manifest["apiVersion"].as_str().unwrap_or_else(|| panic!("{what}: no apiVersion"));
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = manifest["kind"].as_str().unwrap();
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) =
            pinned_kind(admin, &gvk).await.unwrap_or_else(|error| panic!("{what}: unknown kind: {error}"));
        let name = manifest["metadata"]["name"].as_str().unwrap_or_else(|| panic!("{what}: no name"));
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Namespaced => {
                let namespace = manifest["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{what}: a namespaced object must name its namespace"));
                assert!([CORE, PROVISIONING].contains(&namespace), "{what}: unexpected namespace");
                Api::namespaced_with(admin.clone(), namespace, &resource)
            }
            Scope::Cluster => {
                assert!(manifest["metadata"]["namespace"].is_null(), "{what}: cluster-scoped with a namespace");
                Api::all_with(admin.clone(), &resource)
            }
        };
        let params = PatchParams::apply(FIELD_MANAGER).force().validation_strict();
        let stored = api
            .patch(name, &params, &Patch::Apply(&manifest))
            .await
            .unwrap_or_else(|error| panic!("the API server rejected {what}: {error}"));
        applied.push((manifest, serde_json::to_value(stored).unwrap()));
    }
    applied
}

/// Every field of `wanted` is in `stored` with the same value (the server may add defaults, never drop or
/// change what the manifest says).
fn assert_contained(wanted: &Value, stored: &Value, path: &str) {
    match (wanted, stored) {
        (Value::Object(wanted), Value::Object(stored)) => {
            for (key, value) in wanted {
                let inner = stored.get(key).unwrap_or_else(|| panic!("{path}.{key} was dropped by the API server"));
                assert_contained(value, inner, &format!("{path}.{key}"));
            }
        }
        (Value::Array(wanted), Value::Array(stored)) => {
            assert_eq!(wanted.len(), stored.len(), "{path}: {stored:?}");
            for (index, (wanted, stored)) in wanted.iter().zip(stored).enumerate() {
                assert_contained(wanted, stored, &format!("{path}[{index}]"));
            }
        }
        _ => assert_eq!(wanted, stored, "{path}"),
    }
}

async fn admin() -> (&'static test_control_plane::ControlPlane, Client) {
    provisioner::install_crypto_provider();
    let control_plane = test_control_plane::shared().await;
    let admin = control_plane.admin_client().expect("admin client");
    (control_plane, admin)
}

#[tokio::test]
async fn every_manifest_is_accepted_as_written_and_applying_again_changes_nothing() {
    let (_, admin) = admin().await;
    let first = apply_all(&admin).await;
    let kinds: Vec<String> = first.iter().map(|(manifest, _)| describe(manifest)).collect();
    for wanted in [
        "Namespace -/kubeopera-core",
        "Namespace -/kubeopera-provisioning",
        "ServiceAccount kubeopera-core/cluster-provisioner",
        "ServiceAccount kubeopera-provisioning/terraform-runner",
        "Role kubeopera-provisioning/cluster-provisioner",
        "RoleBinding kubeopera-provisioning/cluster-provisioner",
        "Role kubeopera-provisioning/terraform-runner",
        "RoleBinding kubeopera-provisioning/terraform-runner",
        "ClusterRole -/cluster-provisioner-token-review",
        "ClusterRoleBinding -/cluster-provisioner-token-review",
        "ConfigMap kubeopera-core/cluster-provisioner",
        "Deployment kubeopera-core/cluster-provisioner",
        "Service kubeopera-core/cluster-provisioner",
        "LimitRange kubeopera-provisioning/provisioning-jobs",
        "ResourceQuota kubeopera-provisioning/provisioning-jobs",
        "NetworkPolicy kubeopera-provisioning/deny-ingress",
        "NetworkPolicy kubeopera-provisioning/runner-egress",
    ] {
        assert!(kinds.iter().any(|kind| kind == wanted), "{wanted} is missing from {kinds:?}");
    }
    for (manifest, stored) in &first {
        assert_contained(manifest, stored, &describe(manifest));
        assert!(manifest.to_string().len() < 64 * 1024);
    }
    // A second apply (what a rerun or `kubectl apply -k` again does) leaves every object as it was.
    let second = apply_all(&admin).await;
    for ((manifest, first), (_, second)) in first.iter().zip(&second) {
        assert_eq!(
            first["metadata"]["resourceVersion"],
            second["metadata"]["resourceVersion"],
            "{} changed on a second apply: {second:#}",
            describe(manifest)
        );
    }
}

#[tokio::test]
async fn the_deployment_is_hardened_probed_and_limited() {
    let (_, admin) = admin().await;
    apply_all(&admin).await;
    let deployment = Api::<Deployment>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    let spec = deployment.spec.unwrap();
    let template_labels = spec.template.metadata.as_ref().unwrap().labels.clone().unwrap();
    let selector = spec.selector.match_labels.clone().unwrap();
    assert!(selector.iter().all(|(key, value)| template_labels.get(key) == Some(value)));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("cluster-provisioner"));
    assert_eq!(pod.automount_service_account_token, Some(true), "it talks to the API server");
    let pod_security = pod.security_context.unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.run_as_user, Some(65532));
    assert_eq!(pod_security.seccomp_profile.unwrap().type_, "RuntimeDefault");

    assert_eq!(pod.containers.len(), 1);
    let container = &pod.containers[0];
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.capabilities.unwrap().drop.unwrap(), ["ALL"]);

    let ports: BTreeMap<String, i32> = container
        .ports
        .clone()
        .unwrap()
        .into_iter()
        .map(|port| (port.name.unwrap_or_default(), port.container_port))
        .collect();
    assert_eq!(ports.get("http"), Some(&3000));
    assert_eq!(ports.get("metrics"), Some(&9000));
    for (which, probe, path) in [
        ("startup", container.startup_probe.clone(), "/readyz"),
        ("readiness", container.readiness_probe.clone(), "/readyz"),
        ("liveness", container.liveness_probe.clone(), "/livez"),
    ] {
        let get = probe.unwrap_or_else(|| panic!("no {which} probe")).http_get.unwrap();
        assert_eq!(get.path.as_deref(), Some(path), "{which}");
        assert_eq!(serde_json::to_value(&get.port).unwrap(), "http", "{which}");
    }
    // Kubernetes waits for the preStop sleep, then sends SIGTERM; the process stays unready for its shutdown delay and
    // then drains for at most SHUTDOWN_GRACE. All of it must fit in the grace period, or runs are killed mid-release.
    let pre_stop = container.lifecycle.clone().and_then(|lifecycle| lifecycle.pre_stop).expect("a preStop hook");
    let pre_stop_seconds = pre_stop.sleep.expect("a sleep action (the image has no shell)").seconds;
    let config = Api::<ConfigMap>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    let shutdown_delay = config.data.unwrap().get("APP_SHUTDOWN_DELAY").map(|delay| humantime::parse_duration(delay));
    let shutdown_delay = shutdown_delay.expect("APP_SHUTDOWN_DELAY is set").unwrap().as_secs() as i64;
    let needed = pre_stop_seconds + shutdown_delay + provisioner::startup::SHUTDOWN_GRACE.as_secs() as i64;
    let grace = pod.termination_grace_period_seconds.expect("terminationGracePeriodSeconds");
    assert!(grace > needed, "terminationGracePeriodSeconds {grace} is not above the {needed} s a stop may take");
    let resources = container.resources.clone().unwrap();
    let (requests, limits) = (resources.requests.unwrap(), resources.limits.unwrap());
    for name in ["cpu", "memory"] {
        assert!(requests.contains_key(name) && limits.contains_key(name), "{name} requests and limits");
    }

    // Everything it writes goes to emptyDir volumes; secrets come from Secrets the operator creates.
    let volumes = pod.volumes.unwrap();
    let mounts = container.volume_mounts.clone().unwrap();
    let tmp = mounts.iter().find(|mount| mount.mount_path == "/tmp").expect("a writable /tmp");
    assert!(volumes.iter().any(|volume| volume.name == tmp.name && volume.empty_dir.is_some()));
    let env = container.env.clone().unwrap();
    let database = env.iter().find(|variable| variable.name == "DATABASE_URL").expect("DATABASE_URL");
    assert!(database.value.is_none());
    let secret = database.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
    assert_eq!(secret.name, "cluster-provisioner-database");
    assert!(env.iter().all(|variable| variable.value_from.is_some() || variable.name == "HOME"));
    let from = container.env_from.clone().unwrap();
    assert_eq!(from[0].config_map_ref.as_ref().unwrap().name, "cluster-provisioner");

    // The Service reaches the named ports of these pods.
    let service = Api::<Service>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    let service = service.spec.unwrap();
    assert!(service.selector.unwrap().iter().all(|(key, value)| template_labels.get(key) == Some(value)));
    let targets: Vec<Value> = service
        .ports
        .unwrap()
        .iter()
        .map(|port| serde_json::to_value(port.target_port.as_ref().unwrap()).unwrap())
        .collect();
    assert_eq!(targets, [json!("http"), json!("metrics")]);
}

#[tokio::test]
async fn the_config_map_configures_the_service_through_its_documented_variables() {
    let (_, admin) = admin().await;
    apply_all(&admin).await;
    let config = Api::<ConfigMap>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    let data = config.data.unwrap();
    let help = provisioner::settings::help();
    for key in data.keys() {
        assert!(
            help.lines().any(|line| line.split_whitespace().next() == Some(key.as_str())),
            "ConfigMap key {key} is not a variable of `provisioner --help`"
        );
        assert!(!key.contains("PASSWORD") && key != "DATABASE_URL", "{key}: secrets belong in a Secret");
    }
    for variable in REQUIRED_VARIABLES {
        assert!(data.contains_key(*variable), "the ConfigMap sets no {variable}");
    }

    // The process would start with exactly this environment (the Secret's URL stands in for the real one).
    let deployment = Api::<Deployment>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    let container = deployment.spec.unwrap().template.spec.unwrap().containers.remove(0);
    let mut environment: HashMap<String, String> = data.clone().into_iter().collect();
    environment.insert("DATABASE_URL".into(), "postgres://user:placeholder@postgres.example:5432/provisioner".into());
    let settings = Settings::from_environment(environment).expect("the manifest's configuration is valid");
    assert_eq!(settings.kubernetes.jobs.namespace, PROVISIONING);
    assert_eq!(settings.kubernetes.jobs.runner_image, container.image.clone().unwrap(), "one image for both");
    assert!(settings.kubernetes.modules.is_some());
    assert!(settings.authn.enabled);
    assert_eq!(settings.authn.allowed_users, ["system:serviceaccount:kubeopera-core:host-cluster-controller"]);
    assert!(settings.server.address.ip().is_unspecified(), "the API listens on the pod's address");
    assert_eq!(settings.server.address.port(), 3000);
    assert!(settings.server.metrics_address.ip().is_unspecified());
    assert_eq!(settings.server.metrics_address.port(), 9000);
    // The OAuth client file is inside the mounted Secret.
    let oauth = settings.auth.oauth_client_file.to_str().unwrap().to_owned();
    let mounts = container.volume_mounts.unwrap();
    let mount = mounts.iter().find(|mount| oauth.starts_with(&format!("{}/", mount.mount_path))).expect("mounted");
    let volumes = deployment_volumes(&admin).await;
    let volume = volumes.iter().find(|volume| volume.name == mount.name).unwrap();
    assert_eq!(volume.secret.as_ref().unwrap().secret_name.as_deref(), Some("cluster-provisioner-oauth"));
}

async fn deployment_volumes(admin: &Client) -> Vec<k8s_openapi::api::core::v1::Volume> {
    let deployment = Api::<Deployment>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    deployment.spec.unwrap().template.spec.unwrap().volumes.unwrap()
}

/// The Jobs' namespace bounds its pods: a container without resources gets the LimitRange's defaults from the
/// real API server's admission (dry run), one above its maximum is refused, the runner's default limits fit, the
/// quota is in place, and the egress policy leaves the nodes' instance metadata (link-local) out.
#[tokio::test]
async fn the_provisioning_namespace_bounds_its_pods_and_their_egress() {
    let (_, admin) = admin().await;
    apply_all(&admin).await;
    let pods = Api::<Pod>::namespaced(admin.clone(), PROVISIONING);
    let container = json!({
        "name": "c", "image": "busybox",
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
    });
    let pod = |container: Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "limits-probe"},
            "spec": {
                "automountServiceAccountToken": false,
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [container],
            },
        }))
        .unwrap()
    };
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let admitted = pods.create(&dry_run, &pod(container.clone())).await.expect("admitted with defaults");
    let resources = admitted.spec.unwrap().containers[0].resources.clone().unwrap();
    assert_eq!(resources.requests.unwrap()["memory"].0, "128Mi");
    assert_eq!(resources.limits.unwrap()["cpu"].0, "1");

    let mut greedy = container;
    greedy["resources"] = json!({"limits": {"cpu": "8", "memory": "16Gi"}});
    let refused = pods.create(&dry_run, &pod(greedy)).await.expect_err("above the LimitRange's maximum");
    assert!(refused.to_string().contains("maximum"), "{refused}");

    let defaults = Settings::from_environment(HashMap::new()).unwrap().kubernetes.jobs.runner_resources;
    assert_eq!((defaults.cpu_limit.as_str(), defaults.memory_limit.as_str()), ("2", "2Gi"), "within the maximum");

    let quota = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        PROVISIONING,
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ResourceQuota>(&()),
    );
    assert!(quota.get("provisioning-jobs").await.is_ok());
    let policies = Api::<k8s_openapi::api::networking::v1::NetworkPolicy>::namespaced(admin.clone(), PROVISIONING);
    let egress = policies.get("runner-egress").await.unwrap().spec.unwrap().egress.unwrap();
    let blocks: Vec<_> =
        egress.iter().flat_map(|rule| rule.to.iter().flatten()).filter_map(|peer| peer.ip_block.clone()).collect();
    assert!(
        blocks.iter().all(|block| block.except.iter().flatten().any(|except| except == "169.254.0.0/16")),
        "{blocks:?}"
    );
    assert!(policies.get("deny-ingress").await.is_ok());
}

/// Pod Security admission of the real API server judges the Deployment's pod template: a namespace enforcing
/// "restricted" admits it (dry run), and the same pod without its security settings is refused there, which
/// shows the level is really enforced.
#[tokio::test]
async fn the_pod_template_meets_the_restricted_pod_security_standard() {
    let (control_plane, admin) = admin().await;
    apply_all(&admin).await;
    let namespace = control_plane.new_namespace("restricted").await.unwrap();
    let labels = json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }}});
    Api::<Namespace>::all(admin.clone())
        .patch(&namespace, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(admin.clone(), &namespace)
        .create(
            &PostParams::default(),
            &ServiceAccount { metadata: meta("cluster-provisioner"), ..ServiceAccount::default() },
        )
        .await
        .unwrap();
    let deployment = Api::<Deployment>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    let template = deployment.spec.unwrap().template;
    let pod = Pod {
        metadata: ObjectMeta { name: Some("cluster-provisioner".into()), ..template.metadata.unwrap() },
        spec: template.spec,
        ..Pod::default()
    };
    let pods = Api::<Pod>::namespaced(admin.clone(), &namespace);
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    pods.create(&dry_run, &pod).await.expect("the restricted level admits the pod template");

    let mut careless = pod.clone();
    let spec = careless.spec.as_mut().unwrap();
    spec.security_context = None;
    spec.containers[0].security_context = None;
    let error = pods.create(&dry_run, &careless).await.expect_err("restricted is enforced");
    assert!(matches!(&error, kube::Error::Api(status) if status.is_forbidden()), "{error}");
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }
}

/// What the authorizer answers for `user` (with the groups every ServiceAccount token carries).
async fn allowed(admin: &Client, user: &str, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
    let (group, resource) = match resource.split_once('.') {
        Some((resource, group)) => (group, resource),
        None => ("", resource),
    };
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, subresource)) => (resource, Some(subresource.to_owned())),
        None => (resource, None),
    };
    let account_namespace = user.split(':').nth(2).unwrap();
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{account_namespace}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                namespace: namespace.map(Into::into),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone()).create(&PostParams::default(), &review).await.unwrap();
    answer.status.unwrap().allowed
}

/// Asserts each (verb, resource, namespace, expected) for `user`, reporting every mismatch at once.
async fn assert_permissions(admin: &Client, user: &str, cases: &[(&str, &str, Option<&str>, bool)]) {
    let mut wrong = Vec::new();
    for &(verb, resource, namespace, expected) in cases {
        if allowed(admin, user, verb, resource, namespace).await != expected {
            wrong.push(format!("{verb} {resource} in {namespace:?}: expected allowed={expected}"));
        }
    }
    assert!(wrong.is_empty(), "{user}:\n{}", wrong.join("\n"));
}

fn forbidden<T: std::fmt::Debug>(result: kube::Result<T>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.is_forbidden())
}

/// The previous release's shared runner identity, which the chart keeps for one release for that release's Jobs
/// (this release's run as ServiceAccounts of their own: `runner_identity.rs`).
#[tokio::test]
async fn terraform_runner_may_only_write_secrets_and_look_up_pods_and_jobs_in_the_provisioning_namespace() {
    let (control_plane, admin) = admin().await;
    apply_all(&admin).await;
    let p = Some(PROVISIONING);
    let core = Some(CORE);
    assert_permissions(
        &admin,
        RUNNER_USER,
        &[
            ("create", "secrets", p, true),
            ("update", "secrets", p, true),
            ("get", "secrets", p, false),
            ("list", "secrets", p, false),
            ("watch", "secrets", p, false),
            ("delete", "secrets", p, false),
            ("patch", "secrets", p, false),
            ("create", "secrets", core, false),
            ("update", "secrets", core, false),
            ("create", "secrets", Some("default"), false),
            ("create", "configmaps", p, false),
            ("get", "configmaps", p, false),
            ("create", "jobs.batch", p, false),
            ("delete", "jobs.batch", p, false),
            // A stale state lock's holder: its pod, and its operation's Jobs.
            ("get", "pods", p, true),
            ("list", "pods", p, false),
            ("delete", "pods", p, false),
            ("list", "jobs.batch", p, true),
            ("get", "pods", core, false),
            ("list", "jobs.batch", core, false),
            ("list", "secrets", None, false),
        ],
    )
    .await;

    // The same, as the ServiceAccount itself: it writes its outputs Secret and can do nothing else with it.
    let name = "manifests-test-outputs";
    let admin_secrets = Api::<Secret>::namespaced(admin.clone(), PROVISIONING);
    let _ = admin_secrets.delete(name, &DeleteParams::default()).await; // a rerun after a failed run
    wait_until_gone(&admin_secrets, name).await;
    let runner = control_plane.client_for_service_account(PROVISIONING, "terraform-runner").await.unwrap();
    let secrets = Api::<Secret>::namespaced(runner.clone(), PROVISIONING);
    let secret = Secret {
        metadata: meta(name),
        string_data: Some(BTreeMap::from([("kubeconfig".to_owned(), "first".to_owned())])),
        ..Secret::default()
    };
    let created = secrets.create(&PostParams::default(), &secret).await.expect("the runner creates its Secret");
    let mut update = created.clone();
    update.string_data = Some(BTreeMap::from([("kubeconfig".to_owned(), "second".to_owned())]));
    secrets.replace(name, &PostParams::default(), &update).await.expect("the runner updates its Secret");
    assert!(forbidden(secrets.get(name).await));
    assert!(forbidden(secrets.list(&ListParams::default()).await));
    assert!(forbidden(secrets.delete(name, &DeleteParams::default()).await));
    let elsewhere = Api::<Secret>::namespaced(runner.clone(), CORE);
    assert!(forbidden(elsewhere.create(&PostParams::default(), &secret).await));
    let stored = admin_secrets.get(name).await.unwrap();
    assert_eq!(stored.data.unwrap()["kubeconfig"].0, b"second");
    admin_secrets.delete(name, &DeleteParams::default()).await.unwrap();
}

async fn wait_until_gone(api: &Api<Secret>, name: &str) {
    for _ in 0..100 {
        if api.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{name} was not deleted");
}

/// What the service needs: the seed's permissions, and the runs' runner identities (ServiceAccounts, Roles and
/// RoleBindings in the provisioning namespace, without `escalate` or `bind`).
#[tokio::test]
async fn cluster_provisioner_has_what_it_needs_and_no_more() {
    let (control_plane, admin) = admin().await;
    apply_all(&admin).await;
    let p = Some(PROVISIONING);
    let core = Some(CORE);
    let mut cases = Vec::new();
    for verb in ["get", "list", "watch", "create", "delete"] {
        cases.push((verb, "jobs.batch", p, true));
    }
    for resource in ["pods", "pods/log"] {
        for verb in ["get", "list", "watch"] {
            cases.push((verb, resource, p, true));
        }
    }
    for resource in ["secrets", "configmaps"] {
        for verb in ["get", "list", "create", "update", "delete"] {
            cases.push((verb, resource, p, true));
        }
        cases.push(("watch", resource, p, false));
        cases.push(("patch", resource, p, false));
        cases.push(("get", resource, core, false));
        cases.push(("create", resource, core, false));
    }
    for resource in ["serviceaccounts", "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io"] {
        for verb in ["get", "create", "update", "delete"] {
            cases.push((verb, resource, p, true));
        }
        for verb in ["list", "watch", "patch", "deletecollection"] {
            cases.push((verb, resource, p, false));
        }
        cases.push(("create", resource, core, false));
        cases.push(("create", resource, Some("default"), false));
    }
    cases.extend([
        ("create", "tokenreviews.authentication.k8s.io", None, true),
        ("update", "jobs.batch", p, false),
        ("patch", "jobs.batch", p, false),
        ("create", "pods", p, false),
        ("delete", "pods", p, false),
        ("create", "jobs.batch", core, false),
        ("list", "jobs.batch", core, false),
        ("create", "jobs.batch", Some("default"), false),
        ("list", "jobs.batch", None, false),
        ("list", "secrets", None, false),
        ("get", "pods/log", core, false),
        ("escalate", "roles.rbac.authorization.k8s.io", p, false),
        ("bind", "roles.rbac.authorization.k8s.io", p, false),
        ("create", "clusterroles.rbac.authorization.k8s.io", None, false),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, false),
        ("create", "serviceaccounts/token", p, false),
        // APP_AUTHZ_MODE=rbac asks what each caller may do.
        ("create", "subjectaccessreviews.authorization.k8s.io", None, true),
    ]);
    assert_permissions(&admin, PROVISIONER_USER, &cases).await;

    // As the ServiceAccount itself: a Job in the provisioning namespace is admitted (dry run), in its own
    // namespace refused, and it can review a caller's token.
    let provisioner = control_plane.client_for_service_account(CORE, "cluster-provisioner").await.unwrap();
    let job = Job {
        metadata: meta("manifests-test"),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    service_account_name: Some("terraform-runner".into()),
                    containers: vec![Container {
                        name: "terraform-runner".into(),
                        image: Some("kubeopera/cluster-provisioner:0.1.0".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                ..PodTemplateSpec::default()
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    Api::<Job>::namespaced(provisioner.clone(), PROVISIONING)
        .create(&dry_run, &job)
        .await
        .expect("cluster-provisioner creates Jobs in kubeopera-provisioning");
    assert!(forbidden(Api::<Job>::namespaced(provisioner.clone(), CORE).create(&dry_run, &job).await));
    assert!(forbidden(Api::<Secret>::namespaced(provisioner.clone(), CORE).list(&ListParams::default()).await));

    let caller = control_plane.service_account_token(CORE, "cluster-provisioner", &["cluster-provisioner"]).await;
    let review = TokenReview {
        spec: TokenReviewSpec { token: caller.unwrap(), audiences: Some(vec!["cluster-provisioner".into()]) },
        ..TokenReview::default()
    };
    let answer = Api::<TokenReview>::all(provisioner)
        .create(&PostParams::default(), &review)
        .await
        .expect("cluster-provisioner creates TokenReviews");
    let status = answer.status.unwrap();
    assert_eq!(status.authenticated, Some(true), "{status:?}");
    assert_eq!(status.user.unwrap().username.as_deref(), Some(PROVISIONER_USER));
}
