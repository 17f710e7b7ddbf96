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

/// The Jobs pull with Secrets of their own namespace and run with the cloud identity the operator annotates; the
/// service reads both as the chart writes them.
#[test]
fn the_jobs_pull_secrets_and_identity_annotations_reach_the_service() {
    use serde_json::json;
    let variables = |objects: &[serde_json::Value]| object(objects, "ConfigMap", "cluster-provisioner")["data"].clone();
    let default = variables(&render_values(&json!({}), &[]));
    assert!(
        default["APP_RUNNER_IMAGE_PULL_SECRETS"].is_null()
            && default["APP_RUNNER_SERVICE_ACCOUNT_ANNOTATIONS"].is_null()
    );
    let irsa = json!({"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/provisioner-runner"});
    let values =
        json!({"runnerImagePullSecrets": ["registry", "mirror"], "runnerServiceAccount": {"annotations": irsa}});
    let data = variables(&render_values(&values, &[]));
    let environment: std::collections::HashMap<String, String> = serde_json::from_value(data).unwrap();
    let jobs =
        provisioner::settings::Settings::from_environment(environment).expect("the service reads it").kubernetes.jobs;
    assert_eq!(jobs.image_pull_secrets, ["registry", "mirror"]);
    assert_eq!(serde_json::to_value(&jobs.service_account_annotations).unwrap(), irsa);
}

/// Credentials from the tenants' Secrets: the service is told so, may read Secrets in the listed namespaces only
/// (and the platform's), and mounts no auth-service OAuth client; by default nothing of it but the unbound role.
#[test]
fn credential_secrets_are_read_only_where_the_operator_lists() {
    use serde_json::json;
    let bindings = |objects: &[serde_json::Value]| {
        let credentials = |object: &&serde_json::Value| {
            object["kind"] == "RoleBinding" && object["roleRef"]["name"] == "cluster-provisioner-credentials"
        };
        let namespaces = objects.iter().filter(credentials).map(|object| object["metadata"]["namespace"].clone());
        namespaces.collect::<Vec<_>>()
    };
    let mounts_oauth = |objects: &[serde_json::Value]| {
        let deployment = object(objects, "Deployment", "cluster-provisioner");
        deployment["spec"]["template"]["spec"]["volumes"].to_string().contains("cluster-provisioner-oauth")
    };
    let default = render_values(&json!({}), &[]);
    assert!(bindings(&default).is_empty() && mounts_oauth(&default));
    let role = object(&default, "ClusterRole", "cluster-provisioner-credentials");
    assert_eq!(role["rules"], json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]));
    let values = json!({"credentials": {"source": "secrets", "platformNamespace": "platform", "namespaces": ["team-a", "team-b"]}});
    let secrets = render_values(&values, &[]);
    assert_eq!(bindings(&secrets), [json!("team-a"), json!("team-b"), json!("platform")]);
    assert!(!mounts_oauth(&secrets), "no OAuth client without auth-service");
    let data = &object(&secrets, "ConfigMap", "cluster-provisioner")["data"];
    assert_eq!(
        (&data["APP_CREDENTIALS_SOURCE"], &data["APP_CREDENTIALS_NAMESPACE"]),
        (&json!("secrets"), &json!("platform"))
    );
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

/// The rendered chart's objects, each as JSON.
fn objects(rendered: &str) -> Vec<serde_json::Value> {
    let documents = yaml_rust2::YamlLoader::load_from_str(rendered).expect("helm renders YAML");
    documents.iter().map(yaml_to_json).filter(|object| !object.is_null()).collect()
}

fn yaml_to_json(yaml: &yaml_rust2::Yaml) -> serde_json::Value {
    use yaml_rust2::Yaml;
    match yaml {
        Yaml::Hash(hash) => serde_json::Value::Object(
            hash.iter().map(|(key, value)| (key.as_str().unwrap().to_owned(), yaml_to_json(value))).collect(),
        ),
        Yaml::Array(items) => serde_json::Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::String(text) => serde_json::Value::from(text.as_str()),
        Yaml::Integer(number) => serde_json::Value::from(*number),
        Yaml::Boolean(flag) => serde_json::Value::from(*flag),
        Yaml::Real(text) => serde_json::Value::from(text.parse::<f64>().unwrap()),
        Yaml::Null => serde_json::Value::Null,
        other => panic!("unexpected YAML node: {other:?}"),
    }
}

/// The object of `kind` named `name` (the first, whichever namespace).
fn object<'a>(objects: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    let found = objects.iter().find(|object| object["kind"] == kind && object["metadata"]["name"] == name);
    found.unwrap_or_else(|| panic!("no {kind} {name} among {}", kinds_and_names(objects).join(", ")))
}

fn kinds_and_names(objects: &[serde_json::Value]) -> Vec<String> {
    let describe = |object: &serde_json::Value| {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("-").to_owned();
        format!("{} {namespace}/{}", object["kind"].as_str().unwrap(), object["metadata"]["name"].as_str().unwrap())
    };
    objects.iter().map(describe).collect()
}

/// The chart rendered with a values file holding `values`.
fn render_values(values: &serde_json::Value, extra: &[&str]) -> Vec<serde_json::Value> {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("values.json");
    std::fs::write(&file, values.to_string()).unwrap();
    objects(&render(&[&["--values", file.to_str().unwrap()], extra].concat()))
}

/// The service's pod template and the migration Job's.
fn pod_templates(objects: &[serde_json::Value]) -> [&serde_json::Value; 2] {
    let deployment = object(objects, "Deployment", "cluster-provisioner");
    let job = object(objects, "Job", "cluster-provisioner-migrate");
    [&deployment["spec"]["template"], &job["spec"]["template"]]
}

/// The conventional knobs of a pod: pull Secrets, priority, scheduling, annotations and labels reach the service's
/// pods and the migration Job's (the spread over the replicas the service's only), and the chart's own labels,
/// selector and config checksum stay; none of it is set by default.
#[test]
fn the_pods_take_the_operators_pull_secrets_scheduling_annotations_and_labels() {
    use serde_json::json;
    let toleration = json!({"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"});
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}]}
    ]}}});
    let spread = json!({"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "server"}}});
    let values = json!({
        "imagePullSecrets": ["registry", {"name": "mirror"}],
        "priorityClassName": "platform-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [toleration],
        "affinity": affinity,
        "topologySpreadConstraints": [spread],
        "podAnnotations": {"example.com/owner": "platform"},
        "podLabels": {"team": "platform"},
    });
    let configured = render_values(&values, &[]);
    for template in pod_templates(&configured) {
        let pod = &template["spec"];
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "registry"}, {"name": "mirror"}]), "{template}");
        assert_eq!(pod["priorityClassName"], "platform-critical");
        assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
        assert_eq!(pod["tolerations"], json!([toleration]));
        assert_eq!(pod["affinity"], affinity);
        assert_eq!(template["metadata"]["annotations"]["example.com/owner"], "platform");
        assert_eq!(template["metadata"]["labels"]["team"], "platform");
        assert_eq!(template["metadata"]["labels"]["app.kubernetes.io/name"], "cluster-provisioner");
    }
    let [service, migration] = pod_templates(&configured);
    assert_eq!(service["spec"]["topologySpreadConstraints"], json!([spread]));
    assert!(migration["spec"]["topologySpreadConstraints"].is_null(), "one pod spreads over nothing");
    assert!(service["metadata"]["annotations"]["checksum/config"].is_string(), "the config checksum stays");
    let deployment = object(&configured, "Deployment", "cluster-provisioner");
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    assert_eq!(
        selector,
        &json!({"app.kubernetes.io/name": "cluster-provisioner", "app.kubernetes.io/component": "server"})
    );

    let default = objects(&render(&[]));
    for template in pod_templates(&default) {
        for field in ["imagePullSecrets", "priorityClassName", "nodeSelector", "tolerations", "affinity"] {
            assert!(template["spec"][field].is_null(), "{field} by default: {template}");
        }
        assert!(template["metadata"]["labels"]["team"].is_null());
    }
    assert!(pod_templates(&default)[0]["spec"]["topologySpreadConstraints"].is_null());
    assert!(pod_templates(&default)[1]["metadata"]["annotations"].is_null());
}

/// A database CA file, say: extra variables, volumes and mounts reach both containers that talk to PostgreSQL,
/// after the chart's own.
#[test]
fn extra_variables_volumes_and_mounts_reach_the_service_and_the_migration_job() {
    use serde_json::json;
    let variable = json!({"name": "PGSSLROOTCERT", "value": "/etc/database-ca/ca.crt"});
    let volume = json!({"name": "database-ca", "secret": {"secretName": "database-ca"}});
    let mount = json!({"name": "database-ca", "mountPath": "/etc/database-ca", "readOnly": true});
    let values = json!({"extraEnv": [variable], "extraVolumes": [volume], "extraVolumeMounts": [mount]});
    let configured = render_values(&values, &[]);
    let [service, migration] = pod_templates(&configured).map(|template| &template["spec"]);
    let last = |list: &serde_json::Value| list.as_array().unwrap().last().unwrap().clone();
    for pod in [service, migration] {
        let container = &pod["containers"][0];
        assert_eq!(last(&container["env"]), variable, "{container}");
        assert_eq!(container["env"][0]["name"], "DATABASE_URL", "the chart's own variables stay");
        assert_eq!(last(&container["volumeMounts"]), mount);
        assert_eq!(last(&pod["volumes"]), volume);
    }
    let mounts: Vec<&str> = service["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mount| mount["name"].as_str().unwrap())
        .collect();
    assert_eq!(mounts, ["oauth", "tmp", "database-ca"]);

    let default = objects(&render(&[]));
    let [service, migration] = pod_templates(&default).map(|template| &template["spec"]);
    assert_eq!(service["containers"][0]["env"].as_array().unwrap().len(), 2);
    assert_eq!(service["volumes"].as_array().unwrap().len(), 2);
    assert!(migration["volumes"].is_null() && migration["containers"][0]["volumeMounts"].is_null());
}

/// The "restricted" contexts stay the defaults; an operator replaces fields or drops them with null (OpenShift
/// assigns the user and groups itself), for the service and the migration Job alike.
#[test]
fn the_security_contexts_default_to_restricted_and_can_be_replaced() {
    use serde_json::json;
    let default = objects(&render(&[]));
    for template in pod_templates(&default) {
        let pod = &template["spec"];
        assert_eq!(
            pod["securityContext"],
            json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}})
        );
        assert_eq!(
            pod["containers"][0]["securityContext"],
            json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}})
        );
    }
    let openshift = render(&[
        "--set",
        "podSecurityContext.runAsUser=null,podSecurityContext.runAsGroup=null,podSecurityContext.fsGroup=null",
        "--set",
        "containerSecurityContext.readOnlyRootFilesystem=false",
    ]);
    for template in pod_templates(&objects(&openshift)) {
        let pod = &template["spec"];
        assert_eq!(pod["securityContext"], json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}));
        assert_eq!(pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"], false);
        assert_eq!(pod["containers"][0]["securityContext"]["capabilities"], json!({"drop": ["ALL"]}));
    }
}

/// IRSA or Workload Identity for the service: annotations on its ServiceAccount, none by default.
#[test]
fn service_account_annotations_land_on_the_services_service_account() {
    let arn = "arn:aws:iam::123456789012:role/cluster-provisioner";
    let annotated =
        objects(&render(&["--set", &format!("serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn={arn}")]));
    let account = object(&annotated, "ServiceAccount", "cluster-provisioner");
    assert_eq!(account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"], arn, "{account}");
    assert!(
        object(&objects(&render(&[])), "ServiceAccount", "cluster-provisioner")["metadata"]["annotations"].is_null()
    );
}

/// By default every object keeps the name it always had, whatever the release's name (the end-to-end test, the
/// rendered manifests and the docs name them); fullnameOverride renames the chart's objects and every reference to
/// them, nameOverride the name label and the selectors with it, and the service's Lease keeps its fixed name.
#[test]
fn the_names_stay_unless_overridden() {
    use serde_json::json;
    let expected = [
        "Namespace -/kubeopera-provisioning",
        "NetworkPolicy kubeopera-core/cluster-provisioner",
        "NetworkPolicy kubeopera-provisioning/deny-ingress",
        "NetworkPolicy kubeopera-provisioning/runner-egress",
        "ResourceQuota kubeopera-provisioning/provisioning-jobs",
        "LimitRange kubeopera-provisioning/provisioning-jobs",
        "PodDisruptionBudget kubeopera-core/cluster-provisioner",
        "ServiceAccount kubeopera-core/cluster-provisioner",
        "ServiceAccount kubeopera-provisioning/terraform-runner",
        "ConfigMap kubeopera-core/cluster-provisioner",
        "CustomResourceDefinition -/runtimes.provisioner.kubeopera.io",
        "ClusterRole -/cluster-provisioner-token-review",
        "ClusterRole -/cluster-provisioner-runtimes",
        "ClusterRole -/cluster-provisioner-credentials",
        "ClusterRole -/cluster-provisioner-runtime-kubeconfigs",
        "ClusterRoleBinding -/cluster-provisioner-token-review",
        "ClusterRoleBinding -/cluster-provisioner-runtimes",
        "Role kubeopera-provisioning/cluster-provisioner",
        "Role kubeopera-provisioning/terraform-runner",
        "Role kubeopera-core/cluster-provisioner-runtimes-lease",
        "RoleBinding kubeopera-provisioning/cluster-provisioner",
        "RoleBinding kubeopera-provisioning/terraform-runner",
        "RoleBinding kubeopera-core/cluster-provisioner-runtimes-lease",
        "Service kubeopera-core/cluster-provisioner",
        "Deployment kubeopera-core/cluster-provisioner",
        "Job kubeopera-core/cluster-provisioner-migrate",
    ];
    let folder = tempfile::tempdir().unwrap();
    let other_release = ["template", "provisioner", CHART, "--namespace", CORE];
    for rendered in [render(&[]), helm(&folder.path().join("kubeconfig"), &other_release)] {
        let mut names = kinds_and_names(&objects(&rendered));
        names.sort();
        let mut expected = expected.map(str::to_owned).to_vec();
        expected.sort();
        assert_eq!(names, expected);
    }

    let renamed = objects(&render(&["--set", "fullnameOverride=cp", "--set", "runtimeResources.namespaces={team-a}"]));
    for (kind, name) in [
        ("Deployment", "cp"),
        ("Service", "cp"),
        ("ConfigMap", "cp"),
        ("ServiceAccount", "cp"),
        ("PodDisruptionBudget", "cp"),
        ("NetworkPolicy", "cp"),
        ("Job", "cp-migrate"),
        ("ClusterRole", "cp-token-review"),
        ("ClusterRole", "cp-runtime-kubeconfigs"),
        ("RoleBinding", "cp-runtime-kubeconfigs"),
        ("ClusterRoleBinding", "cp-runtimes"),
    ] {
        object(&renamed, kind, name);
    }
    let names = kinds_and_names(&renamed);
    assert!(!names.iter().any(|name| name.contains("cluster-provisioner")), "{names:?}");
    let pod = &object(&renamed, "Deployment", "cp")["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "cp");
    assert_eq!(pod["containers"][0]["envFrom"][0]["configMapRef"]["name"], "cp");
    for (kind, name) in [
        ("RoleBinding", "cp"),
        ("ClusterRoleBinding", "cp-token-review"),
        ("ClusterRoleBinding", "cp-runtimes"),
        ("RoleBinding", "cp-runtime-kubeconfigs"),
        ("RoleBinding", "cp-runtimes-lease"),
    ] {
        let binding = object(&renamed, kind, name);
        assert_eq!(binding["subjects"][0]["name"], "cp", "{binding}");
        assert!(binding["roleRef"]["name"].as_str().unwrap().starts_with("cp"), "{binding}");
    }
    let lease = object(&renamed, "Role", "cp-runtimes-lease");
    assert_eq!(lease["rules"][0]["resourceNames"], json!([provisioner::declarative::leadership::LEASE_NAME]));

    let relabelled = objects(&render(&["--set", "nameOverride=provisioner"]));
    let deployment = object(&relabelled, "Deployment", "provisioner");
    assert_eq!(deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"], "provisioner");
    assert_eq!(deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"], "provisioner");
    let policy = object(&relabelled, "NetworkPolicy", "provisioner");
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"], "provisioner");
    let service = object(&relabelled, "Service", "provisioner");
    assert_eq!(service["spec"]["selector"]["app.kubernetes.io/name"], "provisioner");
}

/// Where the cluster enforces no NetworkPolicy, or the operator brings their own: `networkPolicy.enabled=false`
/// renders none at all, neither the service's nor the Jobs' namespace's.
#[test]
fn network_policy_enabled_false_renders_no_network_policy() {
    let count =
        |rendered: &[serde_json::Value]| rendered.iter().filter(|object| object["kind"] == "NetworkPolicy").count();
    assert_eq!(count(&objects(&render(&[]))), 3, "the service's, deny-ingress and runner-egress");
    let without = objects(&render(&["--set", "networkPolicy.enabled=false"]));
    assert_eq!(count(&without), 0, "{:?}", kinds_and_names(&without));
}

/// The Jobs reach 443 and 6443 by default; an ssh:// modules URL (22) or a proxy (3128) is a value away, as a port
/// open to every address but link-local or as a rule of the operator's own.
#[test]
fn the_runners_egress_ports_and_rules_are_configurable() {
    use serde_json::json;
    let ports = |objects: &[serde_json::Value]| {
        let egress = &object(objects, "NetworkPolicy", "runner-egress")["spec"]["egress"];
        let anywhere = egress.as_array().unwrap().iter().find(|rule| rule["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0");
        let anywhere = anywhere.unwrap_or_else(|| panic!("no rule to every address: {egress}"));
        assert_eq!(anywhere["to"][0]["ipBlock"]["except"], json!(["169.254.0.0/16"]));
        (anywhere["ports"].clone(), egress.as_array().unwrap().len())
    };
    let tcp = |port: u16| json!({"protocol": "TCP", "port": port});
    assert_eq!(ports(&objects(&render(&[]))), (json!([tcp(443), tcp(6443)]), 2), "DNS and 443/6443 by default");
    let proxy = json!({"to": [{"ipBlock": {"cidr": "10.0.0.10/32"}}], "ports": [{"protocol": "TCP", "port": 3128}]});
    let values = json!({"networkPolicy": {"runners": {"ports": [443, 6443, 22], "extraEgress": [proxy]}}});
    let configured = render_values(&values, &[]);
    assert_eq!(ports(&configured), (json!([tcp(443), tcp(6443), tcp(22)]), 3));
    let egress = &object(&configured, "NetworkPolicy", "runner-egress")["spec"]["egress"];
    assert_eq!(egress[2], proxy);
    // The service's own: DNS, the API server, the provisioned clusters' API servers, PostgreSQL, auth-service.
    let service = &object(&configured, "NetworkPolicy", "cluster-provisioner")["spec"]["egress"];
    assert_eq!(service.as_array().unwrap().len(), 5, "{service}");
    assert_eq!(service[2]["to"][0]["ipBlock"], json!({"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16"]}));
    assert_eq!(service[2]["ports"], json!([tcp(443), tcp(6443)]));
}

/// The Jobs' namespace's LimitRange and ResourceQuota are today's numbers unless the operator sets others.
#[test]
fn the_jobs_namespaces_limits_and_quota_come_from_values() {
    use serde_json::json;
    let default = objects(&render(&[]));
    let limits =
        |objects: &[serde_json::Value]| object(objects, "LimitRange", "provisioning-jobs")["spec"]["limits"].clone();
    let quota =
        |objects: &[serde_json::Value]| object(objects, "ResourceQuota", "provisioning-jobs")["spec"]["hard"].clone();
    assert_eq!(
        limits(&default),
        json!([{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
            "default": {"cpu": "1", "memory": "1Gi"}, "max": {"cpu": "4", "memory": "4Gi"}}])
    );
    assert_eq!(
        quota(&default),
        json!({"pods": "60", "requests.cpu": "15", "requests.memory": "30Gi", "limits.cpu": "100",
            "limits.memory": "100Gi", "secrets": "500", "configmaps": "300"})
    );
    let values = json!({"provisioningLimitRange": {"max": {"memory": "8Gi"}},
        "provisioningResourceQuota": {"pods": "120", "limits.memory": "200Gi"}});
    let configured = render_values(&values, &[]);
    assert_eq!(limits(&configured)[0]["max"], json!({"cpu": "4", "memory": "8Gi"}));
    assert_eq!(limits(&configured)[0]["default"], json!({"cpu": "1", "memory": "1Gi"}), "the rest stays");
    let hard = quota(&configured);
    assert_eq!(
        (&hard["pods"], &hard["limits.memory"], &hard["requests.cpu"]),
        (&json!("120"), &json!("200Gi"), &json!("15"))
    );
}

/// `helm template` with `extra`, its error output when it fails.
fn render_error(extra: &[&str]) -> String {
    let helm = std::env::var("TEST_HELM_BIN").expect("TEST_HELM_BIN");
    let folder = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(helm)
        .args(["template", "cluster-provisioner", CHART, "--namespace", CORE])
        .args(extra)
        .env("HELM_CACHE_HOME", folder.path().join("cache"))
        .env("HELM_CONFIG_HOME", folder.path().join("config"))
        .env("HELM_DATA_HOME", folder.path().join("data"))
        .output()
        .expect("run helm");
    assert!(!output.status.success(), "helm template {extra:?} rendered");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// values.schema.json: a misspelt or mistyped value fails `helm template` (and so install and upgrade) naming it,
/// at the top level and in the chart's own objects, instead of being silently ignored; the chart's own pod labels
/// cannot be replaced.
#[test]
fn a_misspelt_value_fails_naming_it() {
    let top = render_error(&["--set", "replicaCont=3"]);
    assert!(top.contains("additional properties 'replicaCont' not allowed"), "{top}");
    let nested = render_error(&["--set", "networkPolicy.runners.port=22"]);
    assert!(nested.contains("/networkPolicy/runners") && nested.contains("'port'"), "{nested}");
    let typed = render_error(&["--set", "replicaCount=two"]);
    assert!(typed.contains("/replicaCount") && typed.contains("want integer"), "{typed}");
    let open = render_error(&["--set", "networkPolicy.runners.ports=null"]);
    assert!(open.contains("/networkPolicy/runners") && open.contains("'ports'"), "no ports would open all: {open}");
    let selector = render_error(&["--set", "podLabels.app\\.kubernetes\\.io/component=other"]);
    assert!(selector.contains("app.kubernetes.io/component"), "{selector}");
}

/// The schema describes every value of values.yaml: each is a property of it (down to the objects it describes),
/// and it allows no top-level value that values.yaml does not document.
#[test]
fn the_schema_covers_every_value_of_values_yaml() {
    let chart = std::path::Path::new(CHART);
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(chart.join("values.schema.json")).unwrap()).unwrap();
    let values = yaml_rust2::YamlLoader::load_from_str(&std::fs::read_to_string(chart.join("values.yaml")).unwrap());
    let values = yaml_to_json(&values.unwrap()[0]);
    fn check(schema: &serde_json::Value, values: &serde_json::Value, path: &str) {
        let Some(properties) = schema["properties"].as_object() else { return };
        let values = values.as_object().unwrap_or_else(|| panic!("{path} is an object"));
        for (key, value) in values {
            let property = properties.get(key).unwrap_or_else(|| panic!("{path}.{key} is not in the schema"));
            check(property, value, &format!("{path}.{key}"));
        }
        // Nested objects may allow more than values.yaml sets (a LimitRange's min, say); the top level may not.
        if path.is_empty() {
            let missing: Vec<&String> =
                properties.keys().filter(|key| !values.contains_key(*key) && *key != "global").collect();
            assert!(missing.is_empty(), "{path}: the schema allows {missing:?}, which values.yaml does not document");
        }
    }
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["additionalProperties"], false);
    check(&schema, &values, "");
}

/// `helm lint --strict` finds nothing to warn about.
#[test]
fn helm_lint_is_clean() {
    let folder = tempfile::tempdir().unwrap();
    let output = helm(&folder.path().join("kubeconfig"), &["lint", "--strict", CHART]);
    assert!(!output.contains("[WARNING]") && !output.contains("[ERROR]"), "{output}");
    assert!(output.contains("0 chart(s) failed"), "{output}");
}
