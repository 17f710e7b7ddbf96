//! The provisioner as its users run it. The image `make image` built (TEST_IMAGE_ARCHIVE) is installed with the
//! chart by the real helm on a control plane of its own with the real node (kubelet, containerd, runc): the chart's
//! hook Job runs the migrations, the service runs in its container as its ServiceAccount with the chart's RBAC
//! (in-cluster configuration), and every Job's pod runs in containers of the same image: the init container clones
//! the modules from a git server over HTTPS (a private CA and credentials, pinned to a commit), the runner applies
//! with OpenTofu and the real AWS provider on moto. Through the REST API as host-cluster-controller (a
//! ServiceAccount token), by the example client (examples/rest-client): an EKS cluster is provisioned while the
//! Deployment restarts, its kubeconfig read, the cluster upgraded, hibernated, woken and deprovisioned, and
//! nothing of it is left in moto; then the same cluster declared as a `Runtime` resource in a tenant's namespace is
//! provisioned, its kubeconfig written into a Secret beside it, and deprovisioned when the object is deleted.
//!
//! The install is docs/operator/quick-start.md's: the test runs the page's steps (its marked `sh` blocks, with the
//! page's variables set to these surroundings), credentials coming from the tenants' Secrets, and ends with the
//! page's first runtime through provisionerctl. Only what the surroundings need beyond the page (the node's
//! network, moto's endpoint, one replica, the image never pulled) is added to the page's values, by a `helm` that
//! appends them to the page's install.
//!
//! The node has no pod network, so the chart's `hostNetwork` puts the service and the Jobs on the node's (the
//! machine's loopback); with no kube-proxy either, `KUBERNETES_SERVICE_HOST/PORT` name the API server itself, as
//! on any cluster whose pods reach it directly. Needs root, PostgreSQL and the TEST_* variables of `make test`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Secret};
use kube::api::{ListParams, LogParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use provisioner::declarative::resource::RuntimeResource;
use provisioner::domain::state_bucket::state_bucket_name;
use provisioner::domain::{ProvisionRequest, Topology};
use reqwest::StatusCode;
use rest_client_example::{Step, lifecycle};
use serde_json::{Value, json};
use test_control_plane::{ControlPlane, RealNode, free_port};
use test_support::auth_service::{AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY};
use test_support::git_server::{GitServer, bare_repository};
use test_support::helm::{CHART, helm};
use test_support::moto::MotoServer;
use test_support::{Backend, TestDatabase, eks_body};

use crate::quick_start::QuickStart;

const CORE: &str = "kubeopera-core";
const PROVISIONING: &str = "kubeopera-provisioning";
/// The caller the chart lets in by default.
const CALLER: &str = "host-cluster-controller";
const MODULES_USER: (&str, &str) = ("reader", "s3cret-token");
/// The tenant whose Runtime resources the chart lets the service reconcile and give their kubeconfig Secrets.
const TENANT: &str = "team-e2e";
/// The tenant's own AWS credential (the platform's `cred-aws-1` is the REST client's).
const TENANT_CREDENTIAL: &str = "cred-aws-team-e2e";
/// Where the credentials of requests without a tenant (the REST client's) are.
const PLATFORM_CREDENTIALS: &str = "kubeopera-credentials";
/// The tenant and the page the quick start follows.
const QUICK_START_TENANT: &str = "team-a";
const QUICK_START: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operator/quick-start.md");
/// The label that makes a Secret a credential (docs/operator/credentials.md).
const CREDENTIAL_LABEL: &str = "provisioner.kubeopera.io/credential";
/// The Runtime of the tenant living the same life as the REST client's runtime.
const DECLARED: &str = "e2e-declared";
/// One run: a Job's containers start, clone, init and apply or destroy on moto.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The archive of the image under test, as `make image` wrote it (`tools/build-image.sh`).
fn image_archive() -> PathBuf {
    let archive = std::env::var_os("TEST_IMAGE_ARCHIVE").map(PathBuf::from).expect(
        "TEST_IMAGE_ARCHIVE is not set: `make test` builds the image (tools/build-image.sh with the tests' \
         binaries) and names its OCI archive",
    );
    assert!(archive.is_file(), "TEST_IMAGE_ARCHIVE={} does not exist", archive.display());
    archive
}

/// What the install takes from outside the cluster.
struct Surroundings {
    database: TestDatabase,
    moto: MotoServer,
    git: GitServer,
    commit: String,
    _folder: tempfile::TempDir,
}

impl Surroundings {
    async fn start() -> Self {
        let folder = tempfile::tempdir().unwrap();
        let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("resources/terraform/modules");
        let (bare, commit) = bare_repository(&modules, "v1", folder.path());
        let git = GitServer::start(&bare, Some(MODULES_USER)).await;
        let (database, moto) = (TestDatabase::create(Backend::Postgres).await, MotoServer::start().await);
        Surroundings { database, moto, git, commit, _folder: folder }
    }
}

/// What the surroundings add to the quick start's values: the built image never pulled, one replica on the node's
/// network, the runners on moto, and the credentials of the test's other tenant and of the platform.
fn values(control_plane: &ControlPlane, port: u16, moto: &MotoServer) -> Value {
    let mut config = json!({
        "APP_ADDRESS": format!("127.0.0.1:{port}"),
        "APP_METRICS_ADDRESS": format!("127.0.0.1:{}", free_port()),
    });
    let mut runner_env = json!({
        "AWS_ENDPOINT_URL": moto.endpoint(),
        "AWS_EC2_METADATA_DISABLED": "true",
        "RUNNER_KUBECONFIG_POLL_INTERVAL": "1s",
    });
    for variables in [&mut config, &mut runner_env] {
        let variables = variables.as_object_mut().unwrap();
        variables.extend(control_plane.in_cluster_variables().map(|(name, value)| (name.to_owned(), json!(value))));
    }
    json!({
        "image": {"pullPolicy": "Never"},
        "replicaCount": 1,
        "hostNetwork": true,
        "ports": {"http": port, "metrics": free_port()},
        "credentials": {
            "source": "secrets", "platformNamespace": PLATFORM_CREDENTIALS, "namespaces": [QUICK_START_TENANT, TENANT],
        },
        "config": config,
        "runnerEnv": runner_env,
        // The runner and the clusters' APIs (moto) are on this machine.
        "apiAllowedCidrs": [test_support::TEST_API_ALLOWED_CIDRS],
        "runtimeResources": {"namespaces": [TENANT]},
    })
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() }
}

/// What the test adds beside the quick start: its other tenant and the platform's credentials (the REST client's
/// requests name no tenant), each a labelled Secret of its namespace.
async fn prepare_other_credentials(admin: &Client) {
    for (namespace, credential) in [(TENANT, TENANT_CREDENTIAL), (PLATFORM_CREDENTIALS, "cred-aws-1")] {
        let object = Namespace { metadata: named(namespace), ..Namespace::default() };
        Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &object).await.unwrap();
        let keys = [
            ("type", "aws_access_key"),
            ("accessKeyId", AWS_ACCESS_KEY_ID),
            ("secretAccessKey", AWS_SECRET_ACCESS_KEY),
        ];
        let data = keys.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
        let mut metadata = named(credential);
        metadata.labels = Some([(CREDENTIAL_LABEL.to_owned(), "true".to_owned())].into());
        let secret = Secret { metadata, string_data: Some(data), ..Secret::default() };
        Api::<Secret>::namespaced(admin.clone(), namespace).create(&PostParams::default(), &secret).await.unwrap();
    }
}

/// The quick start's steps with its variables set to these surroundings.
fn quick_start(folder: &Path, kubeconfig: &Path, around: &Surroundings, extra_values: &Path, port: u16) -> QuickStart {
    let ca_file = folder.join("modules-ca.crt");
    std::fs::write(&ca_file, around.git.ca_pem()).unwrap();
    let chart = std::fs::read_to_string(format!("{CHART}/Chart.yaml")).unwrap();
    let version = chart.lines().find_map(|line| line.strip_prefix("appVersion: ")).expect("the chart's appVersion");
    let version = version.trim().trim_matches('"').to_owned();
    let (user, password) = MODULES_USER;
    let variables = [
        ("DATABASE_URL", around.database.url.as_str()),
        ("REGISTRY", "kubeopera"),
        ("VERSION", &version),
        ("MODULES_URL", &around.git.url()),
        ("MODULES_REF", "v1"),
        ("MODULES_COMMIT", &around.commit),
        ("MODULES_USER", user),
        ("MODULES_PASSWORD", password),
        ("MODULES_CA_FILE", ca_file.to_str().unwrap()),
        ("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", AWS_SECRET_ACCESS_KEY),
        ("API_ALLOWED_CIDR", test_support::TEST_API_ALLOWED_CIDRS),
        ("PROVISIONER_SERVER", &format!("http://127.0.0.1:{port}")),
    ];
    QuickStart::new(Path::new(QUICK_START), kubeconfig, extra_values, &variables)
}

/// Runs the quick start's step `name`, with the cluster's state when it fails.
async fn step(page: &QuickStart, name: &str, diagnose: impl AsyncFn() -> String) -> String {
    match tokio::task::block_in_place(|| page.run(name)) {
        Ok(printed) => printed,
        Err(failure) => panic!("the quick start's {failure}\n{}", diagnose().await),
    }
}

/// Waits until the service is ready: `helm install --wait` counts one replica with `maxUnavailable: 1` as
/// available before its pod is.
async fn wait_until_ready(base_url: &str, diagnose: impl AsyncFn() -> String) {
    let deadline = Instant::now() + RUN_TIMEOUT;
    let http = reqwest::Client::new();
    loop {
        let ready = http.get(format!("{base_url}/readyz")).send().await;
        if ready.is_ok_and(|response| response.status() == StatusCode::OK) {
            return;
        }
        assert!(Instant::now() < deadline, "the service never became ready\n{}", diagnose().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One Job ran the provisioning, in one pod, whose runner log the real kubelet serves.
async fn the_provisioning_ran_once_on_the_real_node(admin: &Client, runtime_id: &str) {
    let jobs = Api::<Job>::namespaced(admin.clone(), PROVISIONING).list(&ListParams::default()).await.unwrap();
    assert_eq!(jobs.items.len(), 1, "one Job for the provisioning");
    let pods = job_pods(admin, &format!("provision-{runtime_id}")).await;
    assert_eq!(pods.len(), 1, "one pod ran terraform");
    let pod = pods[0].metadata.name.clone().unwrap();
    let runner_log = LogParams { container: Some("terraform-runner".into()), ..LogParams::default() };
    let printed = Api::<Pod>::namespaced(admin.clone(), PROVISIONING).logs(&pod, &runner_log).await.unwrap();
    assert!(printed.contains("Apply complete! Resources: 31 added"), "the real kubelet serves the log: {printed}");
}

/// The pods of both namespaces with their phases, the service's log and the node's: what a failed run needs.
async fn diagnosis(admin: &Client, node: &RealNode<'_>) -> String {
    let mut report = String::new();
    for namespace in [CORE, PROVISIONING] {
        let events = Api::<Event>::namespaced(admin.clone(), namespace);
        for event in events.list(&ListParams::default()).await.map(|list| list.items).unwrap_or_default() {
            let object = event.involved_object;
            let (kind, name) = (object.kind.unwrap_or_default(), object.name.unwrap_or_default());
            let (reason, message) = (event.reason.unwrap_or_default(), event.message.unwrap_or_default());
            report.push_str(&format!("event {namespace}/{kind}/{name}: {reason}: {message}\n"));
        }
        let pods = Api::<Pod>::namespaced(admin.clone(), namespace);
        for pod in pods.list(&ListParams::default()).await.map(|list| list.items).unwrap_or_default() {
            let name = pod.metadata.name.unwrap_or_default();
            let phase = pod.status.and_then(|status| status.phase).unwrap_or_default();
            report.push_str(&format!("== pod {namespace}/{name}: {phase}\n"));
            let spec = pod.spec.unwrap_or_default();
            let containers = spec.init_containers.unwrap_or_default().into_iter().chain(spec.containers);
            for container in containers {
                let tail =
                    LogParams { container: Some(container.name.clone()), tail_lines: Some(40), ..LogParams::default() };
                let log = pods.logs(&name, &tail).await.unwrap_or_else(|error| error.to_string());
                report.push_str(&format!("-- {}:\n{log}\n", container.name));
            }
        }
    }
    report + &node.log_tail()
}

/// The pods of the Job `job`, which the real node ran.
async fn job_pods(admin: &Client, job: &str) -> Vec<Pod> {
    let pods = Api::<Pod>::namespaced(admin.clone(), PROVISIONING);
    let of_the_job = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    pods.list(&of_the_job).await.unwrap().items
}

/// Waits until the runner container of the Job `job` runs: the init container cloned the modules.
async fn wait_for_the_runner(admin: &Client, job: &str, diagnose: impl AsyncFn() -> String) {
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        let running = job_pods(admin, job).await.into_iter().any(|pod| {
            let statuses = pod.status.and_then(|status| status.container_statuses).unwrap_or_default();
            statuses.iter().any(|status| status.state.as_ref().is_some_and(|state| state.running.is_some()))
        });
        if running {
            return;
        }
        assert!(Instant::now() < deadline, "the runner of {job} never ran\n{}", diagnose().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `kubectl rollout restart`, then waits until the new pod is ready and the old one gone.
async fn restart_the_deployment(admin: &Client, diagnose: impl AsyncFn() -> String) {
    let deployments = Api::<Deployment>::namespaced(admin.clone(), CORE);
    let restarted = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": format!("{:?}", std::time::SystemTime::now()),
    }}}}});
    let patched =
        deployments.patch("cluster-provisioner", &PatchParams::default(), &Patch::Merge(&restarted)).await.unwrap();
    let generation = patched.metadata.generation.unwrap();
    let pods = Api::<Pod>::namespaced(admin.clone(), CORE);
    let server = ListParams::default().labels("app.kubernetes.io/component=server");
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        let deployment = deployments.get("cluster-provisioner").await.unwrap();
        let status = deployment.status.unwrap_or_default();
        let pod_count = pods.list(&server).await.unwrap().items.len();
        let rolled = status.observed_generation >= Some(generation)
            && status.updated_replicas == Some(1)
            && status.ready_replicas == Some(1)
            && pod_count == 1;
        if rolled {
            return;
        }
        assert!(Instant::now() < deadline, "the restart did not finish: {status:?}\n{}", diagnose().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_installed_by_the_chart_runs_an_eks_clusters_life_on_the_real_node() {
    let test_started = Instant::now();
    let control_plane = ControlPlane::start().await.expect("a control plane of its own");
    let node = RealNode::start(&control_plane).await.expect("the real node");
    let _scheduler = node.schedule_pods().unwrap();
    node.import_image(&image_archive()).await.expect("the image loads into the node's containerd");
    let admin = control_plane.admin_client().unwrap();
    let around = Surroundings::start().await;
    prepare_other_credentials(&admin).await;
    let diagnose = async || diagnosis(&admin, &node).await;

    let folder = tempfile::tempdir().unwrap();
    let kubeconfig = folder.path().join("kubeconfig");
    control_plane.write_kubeconfig(&kubeconfig).unwrap();
    let port = free_port();
    let values_file = folder.path().join("values.json");
    std::fs::write(&values_file, values(&control_plane, port, &around.moto).to_string()).unwrap();
    let page = quick_start(folder.path(), &kubeconfig, &around, &values_file, port);
    let installing = Instant::now();
    step(&page, "secrets", &diagnose).await;
    step(&page, "install", &diagnose).await;
    step(&page, "caller", &diagnose).await;
    let token = control_plane.service_account_token(CORE, CALLER, &["cluster-provisioner"]).await.unwrap();
    let base_url = format!("http://127.0.0.1:{port}");
    wait_until_ready(&base_url, &diagnose).await;
    eprintln!("end-to-end: installed (migrations, then the service ready) in {:.1?}", installing.elapsed());

    // A runtime's whole life as the example client (examples/rest-client) lives it, retrying through a rolling
    // restart of the service while the runner applies: the next pod takes the operation over and follows the same
    // Job. The checks of each step run as the client reports it.
    let client = rest_client_example::Client::new(base_url, token, RUN_TIMEOUT);
    let upgrade = json!({"kubernetesVersion": "1.35", "workerPool": {"maxSize": 5}});
    let mut runtime_id = String::new();
    let mut step_started = Instant::now();
    let observe = async |step: &Step| {
        match step {
            Step::Created { id } => {
                runtime_id = id.clone();
                wait_for_the_runner(&admin, &format!("provision-{id}"), &diagnose).await;
                eprintln!(
                    "end-to-end: POST -> the runner container running on the real node in {:.1?}",
                    step_started.elapsed()
                );
                restart_the_deployment(&admin, &diagnose).await;
            }
            Step::Settled { change: "provision", .. } => {
                eprintln!("end-to-end: provisioned in {:.1?} (with a restart of the service)", step_started.elapsed());
                the_provisioning_ran_once_on_the_real_node(&admin, &runtime_id).await;
            }
            Step::Kubeconfig { text } => {
                assert!(text.contains("get-token") && text.contains("e2e"), "{text}");
            }
            Step::Settled { change, .. } => eprintln!("end-to-end: {change} in {:.1?}", step_started.elapsed()),
        }
        step_started = Instant::now();
    };
    let rest_life = Instant::now();
    if let Err(error) = lifecycle(&client, &eks_body("e2e"), &upgrade, observe).await {
        panic!("the example client's lifecycle: {error}\n{}", diagnose().await);
    }
    let rest_life = rest_life.elapsed();
    let declared_life = runtime_resource_life(&admin, &diagnose).await;
    eprintln!(
        "end-to-end: the same life (provision, upgrade, hibernate, wake, deprovision) took {rest_life:.1?} through REST \
         (with a restart of the service) and {declared_life:.1?} through a Runtime"
    );
    // The quick start's last step: its tenant's first runtime through provisionerctl, created, read and deleted.
    let first_runtime = Instant::now();
    let printed = step(&page, "first-runtime", &diagnose).await;
    eprintln!(
        "end-to-end: the quick start's first runtime created, Ready and deleted in {:.1?}",
        first_runtime.elapsed()
    );
    assert!(printed.contains("Ready"), "provisionerctl showed the runtime Ready: {printed}");
    let moto = &around.moto;
    let clusters = moto.aws(&["eks", "list-clusters", "--region", "eu-central-1", "--output", "json"]);
    assert_eq!(serde_json::from_str::<Value>(&clusters).unwrap()["clusters"], json!([]), "the cluster is gone");
    let bucket = state_bucket_name("dev", "e2e", runtime_id.parse().unwrap());
    let head = moto.aws_command().args(["s3api", "head-bucket", "--bucket", &bucket]).output().unwrap();
    assert!(!head.status.success(), "the state bucket {bucket} is gone");

    let uninstall = ["uninstall", "cluster-provisioner", "--namespace", CORE, "--wait", "--timeout", "2m"];
    tokio::task::block_in_place(|| helm(&kubeconfig, &uninstall));
    // The kubelet stops the service's pod after helm deleted its Deployment.
    let server = ListParams::default().labels("app.kubernetes.io/component=server");
    let deadline = Instant::now() + RUN_TIMEOUT;
    while !Api::<Pod>::namespaced(admin.clone(), CORE).list(&server).await.unwrap().items.is_empty() {
        assert!(Instant::now() < deadline, "the service's pod outlived the uninstall\n{}", diagnose().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("end-to-end: the whole test took {:.1?}", test_started.elapsed());
}

/// The same life declared as a `Runtime` in the tenant's namespace, as `kubectl apply` and edits drive it: Ready with
/// its kubeconfig Secret, an upgrade (a new generation), hibernated and woken (the `hibernated` field), then deleted
/// and gone once deprovisioned. Each step's time and the total are printed beside REST's; returns the total.
async fn runtime_resource_life(admin: &Client, diagnose: impl AsyncFn() -> String) -> Duration {
    let runtimes: Api<RuntimeResource> = Api::namespaced(admin.clone(), TENANT);
    let mut request = ProvisionRequest::example_named(Topology::Eks, DECLARED);
    request.cluster_config.credential_id = TENANT_CREDENTIAL.to_owned();
    let spec = serde_json::to_value(&request.cluster_config).unwrap();
    let object = json!({
        "apiVersion": "provisioner.kubeopera.io/v1alpha1", "kind": "Runtime",
        "metadata": { "name": DECLARED }, "spec": spec,
    });
    let life = Instant::now();
    runtimes.create(&PostParams::default(), &serde_json::from_value(object).unwrap()).await.unwrap();
    let with_kubeconfig =
        |object: &RuntimeResource| object.status.as_ref().is_some_and(|s| s.kubeconfig_secret_ref.is_some());
    settle(&runtimes, "Provision", "Ready", with_kubeconfig, &diagnose).await;
    eprintln!("end-to-end: a Runtime created -> Ready with its kubeconfig Secret in {:.1?}", life.elapsed());
    let secret = Api::<Secret>::namespaced(admin.clone(), TENANT).get("e2e-declared-kubeconfig").await.unwrap();
    assert!(secret.data.is_some_and(|data| data.contains_key("kubeconfig")));

    let edits = [
        (json!({"kubernetesVersion": "1.35", "workerPool": {"maxSize": 5}}), "Upgrade", "Ready"),
        (json!({"hibernated": true}), "Hibernate", "Hibernated"),
        (json!({"hibernated": false}), "WakeUp", "Ready"),
    ];
    for (edit, operation, state) in edits {
        let step = Instant::now();
        let patch = Patch::Merge(json!({ "spec": edit }));
        runtimes.patch(DECLARED, &PatchParams::default(), &patch).await.unwrap();
        settle(&runtimes, operation, state, |_| true, &diagnose).await;
        eprintln!("end-to-end: a Runtime edited -> {operation} -> {state} in {:.1?}", step.elapsed());
    }

    let deleting = Instant::now();
    runtimes.delete(DECLARED, &Default::default()).await.unwrap();
    let deadline = Instant::now() + RUN_TIMEOUT;
    while runtimes.get_opt(DECLARED).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the Runtime was never deprovisioned\n{}", diagnose().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("end-to-end: a Runtime deleted -> deprovisioned and gone in {:.1?}", deleting.elapsed());
    life.elapsed()
}

/// Waits until the Runtime's status shows its latest generation observed, its last operation `operation`
/// succeeded and the runtime in `state` (and `also` holds).
async fn settle(
    runtimes: &Api<RuntimeResource>,
    operation: &str,
    state: &str,
    also: impl Fn(&RuntimeResource) -> bool,
    diagnose: impl AsyncFn() -> String,
) {
    let settled = |object: &RuntimeResource| {
        let Some(status) = object.status.as_ref() else { return false };
        let last = status.last_operation.as_ref();
        status.observed_generation == object.metadata.generation
            && last.is_some_and(|last| last.operation_type == operation && last.state == "Succeeded")
            && status.state.as_deref() == Some(state)
            && also(object)
    };
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        let object = runtimes.get_opt(DECLARED).await.unwrap();
        if object.as_ref().is_some_and(settled) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the Runtime never got {state} by {operation}: {object:#?}\n{}",
            diagnose().await
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
