//! The Helm chart (charts/cluster-provisioner) installed, upgraded and uninstalled by the real helm on a control
//! plane of its own (the manifests tests own kubeopera-core on the shared one): one image value feeds the
//! Deployment, the migration Job and TERRAFORM_RUNNER_IMAGE, and uninstalling leaves the shared namespace and
//! everything of others in it. Needs TEST_HELM_BIN (`make helm`). The pods do not run here (no node): the
//! end-to-end test runs them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use test_control_plane::ControlPlane;
use test_support::helm::{CHART, helm};

const CORE: &str = "kubeopera-core";
const PROVISIONING: &str = "kubeopera-provisioning";

async fn create<K>(api: &Api<K>, object: K)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), &object).await.expect("create");
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() }
}

/// The objects another service keeps in the shared namespace, and the operator's two Secrets.
async fn prepare_shared_namespace(admin: &Client) {
    create(&Api::<Namespace>::all(admin.clone()), Namespace { metadata: named(CORE), ..Namespace::default() }).await;
    let config_maps = Api::<ConfigMap>::namespaced(admin.clone(), CORE);
    create(&config_maps, ConfigMap { metadata: named("host-cluster-controller"), ..ConfigMap::default() }).await;
    let secrets = Api::<Secret>::namespaced(admin.clone(), CORE);
    for (name, key, value) in [
        ("cluster-provisioner-database", "url", "postgres://provisioner:placeholder@postgres:5432/provisioner"),
        ("cluster-provisioner-oauth", "auth-oauth.yaml", "clientID: placeholder\n"),
    ] {
        let data = BTreeMap::from([(key.to_owned(), value.to_owned())]);
        create(&secrets, Secret { metadata: named(name), string_data: Some(data), ..Secret::default() }).await;
    }
}

async fn images(admin: &Client) -> (String, String) {
    let deployment = Api::<Deployment>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let config = Api::<ConfigMap>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    (pod.containers[0].image.clone().unwrap(), config.data.unwrap()["TERRAFORM_RUNNER_IMAGE"].clone())
}

#[tokio::test]
async fn the_chart_installs_upgrades_and_uninstalls_without_touching_the_shared_namespace() {
    let control_plane = ControlPlane::start().await.expect("a control plane of its own");
    let admin = control_plane.admin_client().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let kubeconfig = folder.path().join("kubeconfig");
    control_plane.write_kubeconfig(&kubeconfig).unwrap();
    prepare_shared_namespace(&admin).await;

    // The migration hook needs a node to run; the end-to-end test runs it. Its shape is checked on the render.
    let install =
        ["install", "cluster-provisioner", CHART, "--namespace", CORE, "--no-hooks", "--set", "image.tag=1.2.3"];
    helm(&kubeconfig, &install);
    assert_eq!(
        images(&admin).await,
        ("kubeopera/cluster-provisioner:1.2.3".to_owned(), "kubeopera/cluster-provisioner:1.2.3".to_owned())
    );
    let budget = Api::<PodDisruptionBudget>::namespaced(admin.clone(), CORE).get("cluster-provisioner").await.unwrap();
    assert_eq!(serde_json::to_value(budget.spec.unwrap().max_unavailable).unwrap(), 1);
    let provisioning = Api::<Namespace>::all(admin.clone()).get(PROVISIONING).await.unwrap();
    let labels = provisioning.metadata.labels.unwrap();
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "restricted");

    let upgrade =
        ["upgrade", "cluster-provisioner", CHART, "--namespace", CORE, "--no-hooks", "--set", "image.tag=1.3.0"];
    helm(&kubeconfig, &upgrade);
    assert_eq!(
        images(&admin).await,
        ("kubeopera/cluster-provisioner:1.3.0".to_owned(), "kubeopera/cluster-provisioner:1.3.0".to_owned()),
        "one image value feeds both"
    );

    helm(&kubeconfig, &["uninstall", "cluster-provisioner", "--namespace", CORE, "--wait", "--timeout", "60s"]);
    let gone = Api::<Deployment>::namespaced(admin.clone(), CORE).get_opt("cluster-provisioner").await.unwrap();
    assert!(gone.is_none(), "the Deployment is uninstalled");
    let role = Api::<ClusterRole>::all(admin.clone()).get_opt("cluster-provisioner-token-review").await.unwrap();
    assert!(role.is_none(), "cluster-scoped objects are uninstalled");
    let core = Api::<Namespace>::all(admin.clone()).get(CORE).await.unwrap();
    assert!(core.metadata.deletion_timestamp.is_none(), "the shared namespace stays");
    let others = Api::<ConfigMap>::namespaced(admin.clone(), CORE);
    assert!(others.get_opt("host-cluster-controller").await.unwrap().is_some(), "another service's object stays");
    let secrets = Api::<Secret>::namespaced(admin.clone(), CORE);
    assert!(secrets.get_opt("cluster-provisioner-database").await.unwrap().is_some(), "the operator's Secret stays");
    let provisioning = Api::<Namespace>::all(admin.clone()).get_opt(PROVISIONING).await.unwrap();
    assert!(
        provisioning.is_none_or(|namespace| namespace.metadata.deletion_timestamp.is_some()),
        "the Jobs' namespace belongs to the release and goes with it"
    );
}

/// The chart rendered by `helm template` with `extra` arguments (no cluster needed).
fn render(extra: &[&str]) -> String {
    let folder = tempfile::tempdir().unwrap();
    let mut arguments = vec!["template", "cluster-provisioner", CHART, "--namespace", CORE];
    arguments.extend_from_slice(extra);
    helm(&folder.path().join("kubeconfig"), &arguments)
}

/// What the install test leaves out: the migration hook runs `provisioner migrate` with the same image before the
/// replicas, which then only check the schema; the ServiceMonitor is there when asked for.
#[test]
fn the_migration_hook_and_the_service_monitor_render_as_configured() {
    let default = render(&["--set", "image.tag=2.0.0"]);
    let hook = default.split("\n---\n").find(|document| document.contains("kind: Job")).expect("a migration Job");
    for expected in [
        "helm.sh/hook: pre-install,pre-upgrade",
        "command: [provisioner, migrate]",
        "image: kubeopera/cluster-provisioner:2.0.0",
    ] {
        assert!(hook.contains(expected), "{expected} missing in\n{hook}");
    }
    assert!(default.contains("APP_DATABASE_MIGRATE: \"false\""), "the replicas only check");
    assert!(!default.contains("kind: ServiceMonitor"));
    let monitored = render(&["--set", "serviceMonitor.enabled=true", "--set", "migrationJob=false"]);
    assert!(monitored.contains("kind: ServiceMonitor"));
    assert!(monitored.contains("APP_DATABASE_MIGRATE: \"true\"") && !monitored.contains("kind: Job"));
}

/// For a cluster without a pod network (one local node): the service, its migrations and the Jobs on the node's
/// network, a Deployment that frees the ports before it starts the next pod, a Jobs' namespace that allows it, and
/// the runner's variables in the ConfigMap the service names. Nothing of it by default.
#[test]
fn host_networking_and_the_runners_variables_are_opt_in() {
    let document = |rendered: &str, kind: &str, name: &str| {
        let found = rendered.split("\n---\n").find(|document| {
            document.contains(&format!("kind: {kind}\n")) && document.contains(&format!("  name: {name}\n"))
        });
        found.unwrap_or_else(|| panic!("no {kind} {name} in\n{rendered}")).to_owned()
    };
    let default = render(&[]);
    for absent in ["hostNetwork: true", "APP_RUNNER_HOST_NETWORK", "APP_RUNNER_ENV_CONFIGMAP", "terraform-runner-env"] {
        assert!(!default.contains(absent), "{absent} in\n{default}");
    }
    assert!(document(&default, "Namespace", PROVISIONING).contains("enforce: restricted"));

    let local = render(&["--set", "hostNetwork=true", "--set", "runnerEnv.HTTPS_PROXY=http://proxy:3128"]);
    for (kind, name) in [("Deployment", "cluster-provisioner"), ("Job", "cluster-provisioner-migrate")] {
        let rendered = document(&local, kind, name);
        assert!(rendered.contains("hostNetwork: true") && rendered.contains("ClusterFirstWithHostNet"), "{rendered}");
    }
    assert!(document(&local, "Deployment", "cluster-provisioner").contains("maxSurge: 0"));
    assert!(document(&local, "Namespace", PROVISIONING).contains("enforce: privileged"));
    let config = document(&local, "ConfigMap", "cluster-provisioner");
    assert!(config.contains("APP_RUNNER_HOST_NETWORK: \"true\""), "{config}");
    assert!(config.contains("APP_RUNNER_ENV_CONFIGMAP: \"terraform-runner-env\""), "{config}");
    let runner_env = document(&local, "ConfigMap", "terraform-runner-env");
    assert!(runner_env.contains(&format!("namespace: {PROVISIONING}")), "{runner_env}");
    assert!(runner_env.contains("HTTPS_PROXY: \"http://proxy:3128\""), "{runner_env}");
}

/// The operator's ranges for every cluster's API have no default in the chart either: unset, requests without their
/// own are refused; set, they become APP_API_ALLOWED_CIDRS, which the service accepts.
#[test]
fn the_api_ranges_are_unset_unless_the_operator_names_them() {
    assert!(!render(&[]).contains("APP_API_ALLOWED_CIDRS:"), "no default");
    let rendered = render(&["--set", "apiAllowedCidrs={203.0.113.0/24,198.51.100.7/32}"]);
    assert!(rendered.contains("APP_API_ALLOWED_CIDRS: \"203.0.113.0/24,198.51.100.7/32\""), "{rendered}");
    let environment = std::collections::HashMap::from([(
        "APP_API_ALLOWED_CIDRS".to_owned(),
        "203.0.113.0/24,198.51.100.7/32".to_owned(),
    )]);
    let settings = provisioner::settings::Settings::from_environment(environment).expect("the service reads it");
    assert_eq!(settings.validation.api_allowed_cidrs.map(|cidrs| cidrs.len()), Some(2));
}

/// States are encrypted once the operator names the passphrase's Secret, and the service reads the setting; the
/// Runtime resources are reconciled everywhere while the chart installs their definition (or in the tenants'
/// namespaces it names, each with the kubeconfig Secrets granted), and not without it.
#[test]
fn state_encryption_and_runtime_resources_follow_their_values() {
    let default = render(&[]);
    assert!(!default.contains("APP_STATE_ENCRYPTION_SECRET"), "off by default");
    assert!(
        default.contains("APP_RUNTIME_RESOURCES: \"all\"") && default.contains("kind\": \"CustomResourceDefinition")
    );
    let encrypted = render(&["--set", "stateEncryption.secretName=state-encryption"]);
    assert!(encrypted.contains("APP_STATE_ENCRYPTION_SECRET: \"state-encryption\""), "{encrypted}");
    let environment =
        std::collections::HashMap::from([("APP_STATE_ENCRYPTION_SECRET".to_owned(), "state-encryption".to_owned())]);
    let settings = provisioner::settings::Settings::from_environment(environment).expect("the service reads it");
    assert_eq!(settings.kubernetes.jobs.state_encryption_secret.as_deref(), Some("state-encryption"));
    let tenants = render(&["--set", "runtimeResources.namespaces={team-a,team-b}"]);
    assert!(tenants.contains("APP_RUNTIME_RESOURCES: \"team-a,team-b\""), "{tenants}");
    let kubeconfig_bindings =
        tenants.matches("name: cluster-provisioner-runtime-kubeconfigs\n  namespace: team-").count();
    assert_eq!(kubeconfig_bindings, 2, "one RoleBinding per tenant namespace: {tenants}");
    let without = render(&["--set", "crds.install=false"]);
    assert!(!without.contains("APP_RUNTIME_RESOURCES") && !without.contains("cluster-provisioner-runtimes"));
}

/// Traces are off by default; with a collector, the service exports there (the runners follow its setting) and
/// both network policies let the service and the Jobs reach the collector's namespace on its port.
#[test]
fn traces_reach_the_collector_only_when_configured() {
    let default = render(&[]);
    assert!(!default.contains("OTEL_EXPORTER_OTLP_ENDPOINT") && !default.contains("port: 4318"), "{default}");
    let traced = render(&[
        "--set",
        "traces.endpoint=http://otel-collector.observability:4318",
        "--set",
        "traces.namespace=observability",
    ]);
    assert!(traced.contains("OTEL_EXPORTER_OTLP_ENDPOINT: \"http://otel-collector.observability:4318\""), "{traced}");
    let policies: Vec<&str> = traced
        .split("\n---\n")
        .filter(|document| document.contains("kind: NetworkPolicy\n") && document.contains("egress:"))
        .collect();
    assert_eq!(policies.len(), 2, "the service's and the Jobs' egress: {traced}");
    for policy in policies {
        assert!(
            policy.contains("kubernetes.io/metadata.name: observability") && policy.contains("port: 4318"),
            "{policy}"
        );
    }
}
