//! terraform-runner end to end, with real parts only: the binary itself, OpenTofu (`TEST_TOFU_BIN`) applying and
//! destroying a configuration of built-in `terraform_data` resources whose S3 backend is moto's server, moto for
//! S3, SSM, STS and EKS, and the test control plane for the outputs Secret, written as the run's own
//! ServiceAccount, which the worker's code creates as `cluster-provisioner` with the production RBAC.

mod cloud_failures;
mod eks;
mod encryption;
mod fetch_modules;
mod gke;
mod leftovers;
mod output;
mod permissions;
mod plans;
mod state;
mod vanilla;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job as BatchJob, JobSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec, Secret};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use provisioner::domain::run::RunNames;
use provisioner::domain::{Cloud, OperationType, ProviderVersion, RunAction};
use provisioner::executor::{Executor, RunRef};
use provisioner::settings::Settings;
use runner_contract::approval::EXIT_STALE_PLAN;
use runner_contract::plan::{EXIT_DESTRUCTIVE_PLAN, PlanRisk, PlanSummary};
use runner_contract::report::RunReport;
use serde_json::{Value, json};
use test_control_plane::ControlPlane;
use test_support::engine::apply_production_rbac;
use test_support::gcp::{
    CLIENT_EMAIL, FakeGcs, GoogleTokenServer, PROJECT_ID, SCOPE_CLOUD_PLATFORM, ServiceAccountKey, test_key_pair,
};
use test_support::moto::{CloudFault, MotoServer};
use test_support::terraform::{required_providers, test_providers, tofu_bin};
use tokio::io::AsyncReadExt;
use uuid::Uuid;

/// Distinctive fake keys (moto accepts any), so that a leak is unmistakable.
const ACCESS_KEY_ID: &str = "AKIAFAKERUNNER000001";
const SECRET_ACCESS_KEY: &str = "fake-runner-secret-access-key-000001";
const EXTERNAL_ID: &str = "fake-runner-external-id-000001";
const REGION: &str = "eu-west-1";

/// One runtime's Job, as the runner sees it: the mounted files, its namespace and identity, the cloud.
struct Job {
    moto: MotoServer,
    control_plane: &'static ControlPlane,
    namespace: String,
    folder: tempfile::TempDir,
    runtime_id: Uuid,
    bucket: String,
}

struct Outcome {
    status: ExitStatus,
    output: String,
    termination_message: String,
}

impl Job {
    async fn new() -> Job {
        Job::answering(&[]).await
    }

    /// A Job whose cloud answers with `faults` (see [`MotoServer::start_answering`]).
    async fn answering(faults: &[CloudFault]) -> Job {
        let moto = MotoServer::start_answering(faults).await;
        let control_plane = test_control_plane::shared().await;
        let namespace = control_plane.new_namespace("runner").await.expect("namespace");
        apply_production_rbac(control_plane, &namespace).await;
        let folder = tempfile::tempdir().expect("temporary folder");
        for sub in ["config", "credentials", "work"] {
            std::fs::create_dir(folder.path().join(sub)).unwrap();
        }
        // The runner's identity: the run's own ServiceAccount, Role and RoleBinding and the empty outputs Secret, as
        // the worker creates them before an apply's Job, and a token of that account, like the Job's pod gets.
        let runtime_id = Uuid::new_v4();
        let names = RunNames::new(OperationType::Provision, runtime_id);
        let worker = control_plane.client_for_service_account(&namespace, "cluster-provisioner").await.unwrap();
        let mut settings = Settings::from_environment(HashMap::new()).expect("the default settings").kubernetes.jobs;
        settings.namespace = namespace.clone();
        let (executor, _cache) = Executor::new(worker, settings);
        let run = RunRef { names: &names, runtime_id, operation_id: Uuid::new_v4() };
        executor.ensure_runner_identity(RunAction::Apply, run).await.expect("the run's identity");
        control_plane
            .write_service_account_kubeconfig(&namespace, &names.job, &folder.path().join("kubeconfig"))
            .await
            .expect("the runner's kubeconfig");
        let bucket = format!("kubeopera-test-{}", &runtime_id.simple().to_string()[..12]);
        let job = Job { moto, control_plane, namespace, folder, runtime_id, bucket };
        job.write_credentials(&[
            ("credential_type", "aws_access_key"),
            ("aws_access_key_id", ACCESS_KEY_ID),
            ("aws_secret_access_key", SECRET_ACCESS_KEY),
        ]);
        job
    }

    fn path(&self, name: &str) -> PathBuf {
        self.folder.path().join(name)
    }

    /// The credentials Secret's files, as the service writes them (`CloudCredential::secret_files`).
    fn write_credentials(&self, files: &[(&str, &str)]) {
        let dir = self.path("credentials");
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, value) in files {
            std::fs::write(dir.join(name), value).unwrap();
        }
    }

    /// The ConfigMap's files: `runner.json` as the service renders it, and a test configuration: built-in
    /// resources only, state in this run's bucket on moto.
    fn write_config(&self, action: &str, topology: &str, resources_and_outputs: &str) {
        let provider = ProviderVersion::pinned(Cloud::Aws);
        let mut manifest = json!({
            "action": action, "topology": topology, "cloud": "aws", "region": REGION,
            "stateBucket": self.bucket, "runtimeId": self.runtime_id, "runtimeName": "runner-test",
            "provider": provider,
        });
        if topology == "vanilla_kubeadm" {
            manifest["ssmParameterPrefix"] = json!(self.ssm_prefix());
        }
        std::fs::write(self.path("config/runner.json"), manifest.to_string()).unwrap();
        let main_tf = format!(
            "{}\n{}\n{resources_and_outputs}\n",
            self.moto.s3_backend(&self.bucket, REGION),
            required_providers(&provider)
        );
        std::fs::write(self.path("config/main.tf"), main_tf).unwrap();
    }

    /// Marks the configuration a vanilla wake-up's, as the renderer does: the run ends once the API server answers.
    fn wait_for_api_server(&self) {
        let path = self.path("config/runner.json");
        let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["waitForApiServer"] = json!(true);
        std::fs::write(path, manifest.to_string()).unwrap();
    }

    /// Changes fields of the written `runner.json` (another runtime's run on the same bucket, for example).
    fn patch_manifest(&self, fields: Value) {
        let path = self.path("config/runner.json");
        let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (key, value) in fields.as_object().unwrap() {
            manifest[key] = value.clone();
        }
        std::fs::write(path, manifest.to_string()).unwrap();
    }

    fn ssm_prefix(&self) -> String {
        format!("/kubeopera/{}/", self.runtime_id)
    }

    fn kubeconfig_parameter(&self) -> String {
        format!("{}generation-1/kubeconfig", self.ssm_prefix())
    }

    fn parameters_under(&self, path: &str) -> Vec<String> {
        let listing: Value = serde_json::from_str(&self.moto.aws(&[
            "ssm",
            "get-parameters-by-path",
            "--path",
            path,
            "--recursive",
            "--output",
            "json",
        ]))
        .unwrap();
        listing["Parameters"].as_array().unwrap().iter().map(|p| p["Name"].as_str().unwrap().to_owned()).collect()
    }

    fn outputs_secret(&self) -> String {
        format!("provision-{}-outputs", self.runtime_id)
    }

    /// The runner process with the Job's environment (src/executor/job.rs) pointed at the test's parts.
    fn command(&self, action: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(test_support::terraform_runner_bin());
        command
            .args(["--action", action])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.folder.path())
            .envs(self.moto.env())
            // The runner must use the mounted credential, not the ambient one the moto helper sets for the CLI.
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("RUNNER_CONFIG_DIR", self.path("config"))
            .env("RUNNER_CREDENTIALS_DIR", self.path("credentials"))
            .env("RUNNER_WORK_DIR", self.path("work"))
            .env("RUNNER_AWS_CONFIG_DIR", self.path("aws"))
            .env("RUNNER_OUTPUTS_SECRET", self.outputs_secret())
            .env("RUNNER_TERRAFORM_BINARY", tofu_bin())
            .env("RUNNER_KUBECONFIG_POLL_INTERVAL", "1s")
            .env("RUNNER_KUBECONFIG_TIMEOUT", "60s")
            .env("RUNNER_TERMINATION_LOG", self.path("termination-log"))
            .env("POD_NAMESPACE", &self.namespace)
            .env("POD_NAME", format!("provision-{}-runner", self.runtime_id))
            .env("RUNNER_OPERATION_ID", Uuid::new_v4().to_string())
            .env("KUBECONFIG", self.path("kubeconfig"))
            // The providers come from the test mirror only, with the test lock files.
            .env("TF_CLI_CONFIG_FILE", &test_providers().cli_config)
            .env("RUNNER_PROVIDER_LOCK_DIR", &test_providers().lock_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    async fn run(&self, action: &str) -> Outcome {
        self.run_with(action, &[]).await
    }

    async fn run_with(&self, action: &str, env: &[(&str, String)]) -> Outcome {
        let child = self.command(action).envs(env.iter().cloned()).spawn().expect("start terraform-runner");
        let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
            .await
            .expect("terraform-runner finishes within 3 minutes")
            .expect("terraform-runner runs");
        self.outcome(
            output.status,
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        )
    }

    fn outcome(&self, status: ExitStatus, output: String) -> Outcome {
        let termination_message = std::fs::read_to_string(self.path("termination-log")).unwrap_or_default();
        let _ = std::fs::remove_file(self.path("termination-log"));
        let outcome = Outcome { status, output, termination_message };
        outcome.assert_no_secret();
        outcome
    }

    /// `None` while nothing is published (the worker's outputs Secret is empty until an apply publishes).
    async fn published_kubeconfig(&self) -> Option<String> {
        let admin = self.control_plane.admin_client().unwrap();
        let secret =
            Api::<Secret>::namespaced(admin, &self.namespace).get_opt(&self.outputs_secret()).await.unwrap()?;
        let kubeconfig = secret.data?.remove("kubeconfig")?;
        Some(String::from_utf8(kubeconfig.0).expect("UTF-8 kubeconfig"))
    }

    /// The inventory an apply published beside the kubeconfig.
    async fn published_resources(&self) -> Vec<String> {
        let admin = self.control_plane.admin_client().unwrap();
        let secret = Api::<Secret>::namespaced(admin, &self.namespace).get(&self.outputs_secret()).await.unwrap();
        let data = secret.data.expect("the outputs Secret has data");
        runner_contract::inventory::parse(&data[runner_contract::inventory::RESOURCES_KEY].0).expect("an inventory")
    }

    fn bucket_exists(&self) -> bool {
        let status = self.moto.aws_command().args(["s3api", "head-bucket", "--bucket", &self.bucket]).output().unwrap();
        status.status.success()
    }

    fn s3api(&self, args: &[&str]) -> Value {
        let mut all = vec!["s3api"];
        all.extend(args);
        all.extend(["--bucket", &self.bucket, "--output", "json"]);
        let text = self.moto.aws(&all);
        if text.trim().is_empty() { Value::Null } else { serde_json::from_str(&text).expect("aws prints JSON") }
    }

    fn object_keys(&self) -> Vec<String> {
        let listing = self.s3api(&["list-objects-v2"]);
        listing["Contents"]
            .as_array()
            .map(|objects| objects.iter().map(|object| object["Key"].as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    }

    /// An object of the state bucket as JSON, when there is one.
    fn json_object(&self, key: &str) -> Option<Value> {
        let url = format!("s3://{}/{key}", self.bucket);
        let output = self.moto.aws_command().args(["s3", "cp", &url, "-"]).output().unwrap();
        output.status.success().then(|| serde_json::from_slice(&output.stdout).expect("a JSON object"))
    }

    /// The ETag of the Terraform state object: it changes whenever a run writes the state.
    fn state_etag(&self) -> Value {
        self.s3api(&["get-object-attributes", "--key", "terraform.tfstate", "--object-attributes", "ETag"])
    }

    /// A vanilla-shaped configuration of built-in resources: `terraform_data.cluster` (replaced when `trigger`
    /// changes), `terraform_data.workers`, and the kubeconfig parameter output.
    fn protected_cluster_config(&self, input: &str, trigger: &str) -> String {
        let parameter = self.kubeconfig_parameter();
        format!(
            "resource \"terraform_data\" \"cluster\" {{\n  input            = \"{input}\"\n  triggers_replace = \"{trigger}\"\n}}\n\n\
             resource \"terraform_data\" \"workers\" {{\n  input = \"{input}\"\n}}\n\n{}",
            vanilla_outputs(&parameter, API_ENDPOINT)
        )
    }

    /// Publishes the admin kubeconfig as a vanilla cluster's first node does (kubeadm's `admin.conf`), for
    /// `server`, with `extra_user` lines in its user.
    fn publish_node_kubeconfig(&self, server: &str, extra_user: &str) {
        self.put_kubeconfig_parameter(&kubeadm_admin_conf(self.control_plane, server, extra_user));
    }

    fn put_kubeconfig_parameter(&self, value: &str) {
        self.moto.aws(&[
            "ssm",
            "put-parameter",
            "--name",
            &self.kubeconfig_parameter(),
            "--type",
            "SecureString",
            "--overwrite",
            "--value",
            value,
        ]);
    }
}

impl Outcome {
    fn assert_no_secret(&self) {
        for secret in [ACCESS_KEY_ID, SECRET_ACCESS_KEY, EXTERNAL_ID] {
            assert!(!self.output.contains(secret), "the runner printed a credential:\n{}", self.output);
            assert!(!self.termination_message.contains(secret), "termination message: {}", self.termination_message);
        }
    }

    /// The run succeeded; its termination message is its whole report.
    fn assert_report(&self) -> RunReport {
        assert!(self.status.success(), "terraform-runner failed ({}):\n{}", self.status, self.output);
        serde_json::from_str(&self.termination_message).unwrap_or_else(|error| {
            panic!("the termination message is no report ({error}): {}", self.termination_message)
        })
    }

    /// The run succeeded; its termination message is the summary of the plan it applied.
    fn assert_success(&self) -> PlanSummary {
        assert!(self.status.success(), "terraform-runner failed ({}):\n{}", self.status, self.output);
        serde_json::from_str(&self.termination_message).unwrap_or_else(|error| {
            panic!("the termination message is no plan summary ({error}): {}", self.termination_message)
        })
    }

    /// The runner's line that says it force-unlocked a stale state lock.
    fn take_over_line(&self) -> &str {
        let mut lines = self.output.lines();
        lines
            .find(|line| line.contains("force-unlocking a stale state lock"))
            .unwrap_or_else(|| panic!("the take-over is logged:\n{}", self.output))
    }

    fn assert_failure(&self) {
        assert_eq!(self.status.code(), Some(1), "terraform-runner should fail:\n{}", self.output);
        assert!(!self.termination_message.is_empty(), "a failed run leaves a termination message");
        assert!(self.termination_message.len() <= 1024 + 3, "{}", self.termination_message);
        assert!(!self.termination_message.contains('\n'), "one line: {}", self.termination_message);
    }
}

/// The runner's setting that marks `terraform_data.cluster` protected, as the cluster resources of the real
/// topologies are.
fn protect_the_cluster() -> [(&'static str, String); 1] {
    [("RUNNER_PROTECTED_RESOURCES", "terraform_data.cluster".to_owned())]
}

const CLUSTER_RESOURCE: &str = r#"resource "terraform_data" "cluster" {
  input = "runner-test"
}"#;

/// A resource whose creation runs `command` (HCL-quoted already) in a shell.
fn local_exec(name: &str, command: &str) -> String {
    format!(
        "resource \"terraform_data\" \"{name}\" {{\n  provisioner \"local-exec\" {{\n    command = \"{command}\"\n  }}\n}}\n"
    )
}

/// Where the test configurations say a vanilla cluster's API server is (nothing listens there).
const API_ENDPOINT: &str = "https://203.0.113.10:6443";

/// A vanilla configuration's outputs: where its nodes publish the kubeconfig, and its API endpoint.
fn vanilla_outputs(kubeconfig_parameter: &str, api_endpoint: &str) -> String {
    format!(
        "output \"kubeconfig_ssm_parameter\" {{\n  value = \"{kubeconfig_parameter}\"\n}}\n\n\
         output \"api_endpoint\" {{\n  value = \"{api_endpoint}\"\n}}\n"
    )
}

fn vanilla_config(job: &Job, api_endpoint: &str) -> String {
    format!("{CLUSTER_RESOURCE}\n\n{}", vanilla_outputs(&job.kubeconfig_parameter(), api_endpoint))
}

/// The admin kubeconfig as kubeadm writes it (`admin.conf`) for `server`: the test control plane's CA and admin
/// certificate, and `extra_user` lines in its user.
fn kubeadm_admin_conf(control_plane: &ControlPlane, server: &str, extra_user: &str) -> String {
    let (certificate, key) = control_plane.admin_certificate_and_key();
    kubeadm_admin_conf_with(control_plane, server, certificate, key, extra_user)
}

fn kubeadm_admin_conf_with(
    control_plane: &ControlPlane,
    server: &str,
    certificate_pem: &str,
    key_pem: &str,
    extra_user: &str,
) -> String {
    use base64::Engine as _;
    let base64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: {server}\n  \
         name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: kubernetes-admin\n  \
         name: kubernetes-admin@kubernetes\ncurrent-context: kubernetes-admin@kubernetes\nkind: Config\n\
         preferences: {{}}\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: {}\n    \
         client-key-data: {}\n{extra_user}",
        base64(control_plane.ca_pem()),
        base64(certificate_pem),
        base64(key_pem),
    )
}

/// The client certificate of a published kubeconfig, decoded.
fn client_certificate(kubeconfig: &str) -> String {
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("a valid kubeconfig");
    let user = parsed.auth_infos[0].auth_info.as_ref().expect("a user");
    assert!(user.exec.is_none() && user.token.is_none() && user.token_file.is_none(), "{kubeconfig}");
    let data = user.client_certificate_data.as_deref().expect("a client certificate");
    use base64::Engine as _;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).unwrap()).unwrap()
}

/// A runner started in the background: the child, everything it printed so far and still prints, and the readers
/// of that.
type Started = (tokio::process::Child, Arc<Mutex<String>>, [tokio::task::JoinHandle<()>; 2]);

/// Starts `command` and returns once it printed `line`.
async fn start_until(mut command: tokio::process::Command, line: &str) -> Started {
    let mut child = command.spawn().expect("start terraform-runner");
    let output = Arc::new(Mutex::new(String::new()));
    let readers =
        [collect(child.stdout.take().unwrap(), output.clone()), collect(child.stderr.take().unwrap(), output.clone())];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !output.lock().unwrap().contains(line) {
        assert!(tokio::time::Instant::now() < deadline, "never printed {line}:\n{}", output.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, output, readers)
}

fn collect(
    mut stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<String>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(read) => into.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read])),
            }
        }
    })
}

/// Who a run is, as the Job tells the runner.
struct RunIdentity {
    pod: String,
    operation_id: Uuid,
}

impl RunIdentity {
    fn new(job: &Job, attempt: &str) -> Self {
        RunIdentity { pod: format!("provision-{}-{attempt}", job.runtime_id), operation_id: Uuid::new_v4() }
    }

    /// Its variables, with a short wait for a lock held by someone else.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("POD_NAME", self.pod.clone()),
            ("RUNNER_OPERATION_ID", self.operation_id.to_string()),
            ("RUNNER_STATE_LOCK_TIMEOUT", "2s".to_owned()),
            ("RUNNER_STATE_LOCK_POLL_INTERVAL", "1s".to_owned()),
        ]
    }
}
