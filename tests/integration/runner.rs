//! terraform-runner end to end, with real parts only: the binary itself, OpenTofu (`TEST_TOFU_BIN`) applying and
//! destroying a configuration of built-in `terraform_data` resources whose S3 backend is moto's server, moto for
//! S3, SSM, STS and EKS, and the test control plane for the outputs Secret, written as the `terraform-runner`
//! ServiceAccount with the production RBAC.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job as BatchJob, JobSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec, Secret};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use provisioner::domain::{Cloud, ProviderVersion};
use runner_contract::plan::{EXIT_DESTRUCTIVE_PLAN, PlanSummary};
use serde_json::{Value, json};
use test_control_plane::ControlPlane;
use test_support::engine::apply_production_rbac;
use test_support::gcp::{
    CLIENT_EMAIL, FakeGcs, GoogleTokenServer, PROJECT_ID, SCOPE_CLOUD_PLATFORM, ServiceAccountKey, test_key_pair,
};
use test_support::moto::MotoServer;
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
        let moto = MotoServer::start().await;
        let control_plane = test_control_plane::shared().await;
        let namespace = control_plane.new_namespace("runner").await.expect("namespace");
        apply_production_rbac(control_plane, &namespace).await;
        let folder = tempfile::tempdir().expect("temporary folder");
        for sub in ["config", "credentials", "work"] {
            std::fs::create_dir(folder.path().join(sub)).unwrap();
        }
        // The runner's identity: a token of the terraform-runner ServiceAccount, like the Job's pod gets.
        control_plane
            .write_service_account_kubeconfig(&namespace, "terraform-runner", &folder.path().join("kubeconfig"))
            .await
            .expect("the runner's kubeconfig");
        let runtime_id = Uuid::new_v4();
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

    async fn published_kubeconfig(&self) -> Option<String> {
        let admin = self.control_plane.admin_client().unwrap();
        let secret =
            Api::<Secret>::namespaced(admin, &self.namespace).get_opt(&self.outputs_secret()).await.unwrap()?;
        let data = secret.data.expect("the outputs Secret has data");
        Some(String::from_utf8(data["kubeconfig"].0.clone()).expect("UTF-8 kubeconfig"))
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

#[tokio::test]
async fn vanilla_apply_publishes_the_kubeconfig_and_destroy_removes_the_bucket() {
    let job = Job::new().await;
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));

    // The cluster publishes its kubeconfig a while after apply finished; the runner polls for it.
    let first_kubeconfig = kubeadm_admin_conf(job.control_plane, API_ENDPOINT, "");
    let publisher = {
        let (mut state_written, command) = (job.moto.aws_command(), job.moto.aws_command());
        state_written.args(["s3api", "head-object", "--bucket", &job.bucket, "--key", "terraform.tfstate"]);
        let parameter = job.kubeconfig_parameter();
        let value = first_kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            // Once the apply has written its state, and a little later, so that the runner has to wait.
            let started = std::time::Instant::now();
            while !state_written.output().unwrap().status.success() {
                assert!(started.elapsed() < Duration::from_secs(120), "the apply never wrote its state");
                std::thread::sleep(Duration::from_millis(200));
            }
            std::thread::sleep(Duration::from_secs(3));
            let mut command = command;
            let status = command
                .args(["ssm", "put-parameter", "--name", &parameter, "--type", "SecureString", "--value", &value])
                .output()
                .unwrap();
            assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        })
    };
    let applied = job.run("apply").await;
    publisher.await.unwrap();
    applied.assert_success();
    assert!(applied.output.contains("waiting for the cluster to publish its kubeconfig"), "{}", applied.output);
    // The runner's own lines name the run they belong to.
    assert!(applied.output.contains(&format!("runtime_id={}", job.runtime_id)), "{}", applied.output);
    // Rebuilt from the node's: the same server, CA and client certificate and key, nothing else.
    let published = job.published_kubeconfig().await.expect("the kubeconfig is published");
    assert_eq!(client_certificate(&published), job.control_plane.admin_certificate_and_key().0);
    let parsed = kube::config::Kubeconfig::from_yaml(&published).unwrap();
    assert_eq!(parsed.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some(API_ENDPOINT));

    // The state bucket: created by the runner, protected, holding the state of what was applied.
    let versioning = job.s3api(&["get-bucket-versioning"]);
    assert_eq!(versioning["Status"], "Enabled");
    let encryption = job.s3api(&["get-bucket-encryption"]);
    assert_eq!(
        encryption["ServerSideEncryptionConfiguration"]["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"],
        "AES256"
    );
    let block = &job.s3api(&["get-public-access-block"])["PublicAccessBlockConfiguration"];
    for setting in ["BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"] {
        assert_eq!(block[setting], true, "{setting}");
    }
    assert_eq!(
        job.object_keys(),
        ["terraform.tfstate", "terraform.tfstate.holder.json"],
        "state written, lock released, its holder recorded"
    );
    let state = job.moto.aws(&["s3", "cp", &format!("s3://{}/terraform.tfstate", job.bucket), "-"]);
    assert!(state.contains("terraform_data"), "{state}");
    for secret in [ACCESS_KEY_ID, SECRET_ACCESS_KEY] {
        assert!(!state.contains(secret), "a credential in the state");
    }

    // A retried pod runs the whole apply again: the bucket is reused and the Secret overwritten.
    // (The second boot's certificate: any PEM certificate will do, here the CA's.)
    let (_, key) = job.control_plane.admin_certificate_and_key();
    let ca = job.control_plane.ca_pem();
    job.put_kubeconfig_parameter(&kubeadm_admin_conf_with(job.control_plane, API_ENDPOINT, ca, key, ""));
    job.run("apply").await.assert_success();
    assert_eq!(client_certificate(&job.published_kubeconfig().await.unwrap()), ca);

    // What the nodes publish besides the kubeconfig, and a parameter of another cluster that must survive.
    let join_token = format!("{}generation-1/join/token", job.ssm_prefix());
    job.moto.aws(&[
        "ssm",
        "put-parameter",
        "--name",
        &join_token,
        "--type",
        "SecureString",
        "--value",
        "abcdef.0123456789abcdef",
    ]);
    let other_cluster = format!("/kubeopera/{}/generation-1/kubeconfig", Uuid::new_v4());
    job.moto.aws(&["ssm", "put-parameter", "--name", &other_cluster, "--type", "SecureString", "--value", "other"]);
    assert_eq!(job.parameters_under(&job.ssm_prefix()).len(), 2);

    job.write_config("destroy", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    let destroyed = job.run("destroy").await;
    destroyed.assert_success();
    assert!(destroyed.output.contains("Resources: 0 added, 0 changed, 1 destroyed."), "{}", destroyed.output);
    assert!(!job.bucket_exists(), "the state bucket is removed after the destroy");
    assert_eq!(job.parameters_under(&job.ssm_prefix()), Vec::<String>::new(), "the cluster's parameters are removed");
    assert_eq!(job.parameters_under("/kubeopera"), [other_cluster], "another cluster's parameters stay");

    // A destroy retried after it finished finds nothing left to do.
    let again = job.run("destroy").await;
    again.assert_success();
    assert!(again.output.contains("nothing to destroy"), "{}", again.output);
}

#[tokio::test]
async fn eks_kubeconfig_assumes_the_role_for_every_token() {
    let job = Job::new().await;
    let role_arn = "arn:aws:iam::123456789012:role/kubeopera-provisioner";
    job.write_credentials(&[
        ("credential_type", "aws_assume_role"),
        ("role_arn", role_arn),
        ("external_id", EXTERNAL_ID),
        ("session_duration_seconds", "900"),
        ("aws_access_key_id", ACCESS_KEY_ID),
        ("aws_secret_access_key", SECRET_ACCESS_KEY),
    ]);
    // Terraform's EKS module would create the cluster; here it exists in moto and the configuration names it.
    let created = job.moto.aws(&[
        "eks",
        "create-cluster",
        "--name",
        "runner-eks",
        "--role-arn",
        "arn:aws:iam::123456789012:role/eks",
        "--resources-vpc-config",
        "subnetIds=subnet-1",
        "--output",
        "json",
    ]);
    let created: Value = serde_json::from_str(&created).unwrap();
    let endpoint = created["cluster"]["endpoint"].as_str().expect("moto gives the cluster an endpoint").to_owned();
    let ca = created["cluster"]["certificateAuthority"]["data"].as_str().expect("and a CA").to_owned();
    // Terraform runs as the role too, through a profile that assumes it (and renews it in a long run): a command
    // in the apply asks STS who it is.
    let whoami = local_exec(
        "whoami",
        &format!("{} sts get-caller-identity --query Arn --output text", job.moto.aws_cli().display()),
    );
    job.write_config(
        "apply",
        "eks",
        &format!("{CLUSTER_RESOURCE}\n\n{whoami}\noutput \"cluster_name\" {{\n  value = \"runner-eks\"\n}}\n"),
    );

    let applied = job.run("apply").await;
    applied.assert_success();
    let session = format!("assumed-role/kubeopera-provisioner/kubeopera-{}", job.runtime_id);
    assert!(applied.output.contains(&session), "Terraform ran as {session}:\n{}", applied.output);
    // The profile sits in the memory-backed folder, readable by the runner only; the source keys are only there.
    for file in ["config", "credentials"] {
        let metadata = std::fs::metadata(job.path("aws").join(file)).unwrap();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o777, 0o600, "{file}");
    }
    assert!(!std::fs::read_to_string(job.path("aws/config")).unwrap().contains(SECRET_ACCESS_KEY));

    let kubeconfig = job.published_kubeconfig().await.expect("the kubeconfig is published");
    let parsed = kube::config::Kubeconfig::from_yaml(&kubeconfig).expect("a valid kubeconfig");
    let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some(endpoint.as_str()));
    assert_eq!(cluster.certificate_authority_data.as_deref(), Some(ca.as_str()));
    let user = parsed.auth_infos[0].auth_info.as_ref().unwrap();
    assert!(user.token.is_none() && user.client_key_data.is_none(), "no stored secret in the kubeconfig");
    let exec = user.exec.as_ref().expect("an exec credential plugin");
    assert_eq!(exec.command.as_deref(), Some("aws"));
    let args = exec.args.clone().unwrap();
    assert!(args.windows(2).any(|pair| pair == ["--cluster-name", "runner-eks"]), "{args:?}");
    assert!(args.windows(2).any(|pair| pair == ["--role-arn", role_arn]), "{args:?}");
    for secret in [ACCESS_KEY_ID, SECRET_ACCESS_KEY, EXTERNAL_ID] {
        assert!(!kubeconfig.contains(secret), "a credential in the kubeconfig");
    }
    assert!(job.bucket_exists());
}

#[tokio::test]
async fn a_failing_apply_reports_a_redacted_termination_message() {
    let job = Job::new().await;
    // A command that prints the credential it runs with, then fails: the runner must redact both its streamed
    // output and its termination message.
    job.write_config(
        "apply",
        "vanilla_kubeadm",
        &local_exec(
            "leaky",
            r#"echo \"key=$AWS_SECRET_ACCESS_KEY id=$AWS_ACCESS_KEY_ID tmp=$TMPDIR\"; echo \"key=$AWS_SECRET_ACCESS_KEY\" >&2; exit 3"#,
        ),
    );
    let failed = job.run("apply").await;
    failed.assert_failure();
    assert!(failed.output.contains("key=[REDACTED] id=[REDACTED]"), "{}", failed.output);
    // Terraform's temporary files go to the writable work folder: the Job's root filesystem is read-only.
    let tmp = format!("tmp={}", job.path("work/.tmp").display());
    assert!(failed.output.contains(&tmp), "{tmp} in\n{}", failed.output);
    assert!(failed.termination_message.starts_with("`tofu apply -input=false"), "{}", failed.termination_message);
    assert!(
        failed.termination_message.contains("run.tfplan"),
        "the saved plan is applied: {}",
        failed.termination_message
    );
    assert!(failed.termination_message.contains("exit status 3"), "{}", failed.termination_message);
    assert!(job.published_kubeconfig().await.is_none(), "nothing is published after a failure");
    assert!(!job.object_keys().iter().any(|key| key.ends_with(".tflock")), "the lock is released");
}

/// A credential value as commands print it: encoded (base64 alone and inside an encoded file, hex, URL- and
/// JSON-escaped) and split across two lines. The runner redacts every form from its output and its termination
/// message.
#[tokio::test]
async fn every_form_of_a_credential_value_is_redacted_from_what_the_runner_prints() {
    use base64::Engine as _;
    let job = Job::new().await;
    let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY-runner-forms";
    job.write_credentials(&[
        ("credential_type", "aws_access_key"),
        ("aws_access_key_id", ACCESS_KEY_ID),
        ("aws_secret_access_key", secret),
    ]);
    let script = job.path("leaks.sh");
    std::fs::write(
        &script,
        r#"k="$AWS_SECRET_ACCESS_KEY"
echo "base64: $(printf '%s' "$k" | base64 -w0)"
echo "file: $(printf 'key=%s\nregion=eu-west-1\n' "$k" | base64 -w0)"
echo "hex: $(printf '%s' "$k" | od -An -tx1 | tr -d ' \n')"
echo "url: $(printf '%s' "$k" | sed 's|/|%2F|g; s|+|%2B|g')"
echo "json: {\"key\":\"$(printf '%s' "$k" | sed 's|/|\\/|g')\"}"
printf '%s\n' "$k" | cut -c1-12
printf '%s\n' "$k" | cut -c13-
echo "failing with $(printf '%s' "$k" | base64 -w0)" >&2
exit 3
"#,
    )
    .unwrap();
    job.write_config("apply", "vanilla_kubeadm", &local_exec("leaky", &format!("sh {}", script.display())));
    let failed = job.run("apply").await;
    failed.assert_failure();

    let standard = base64::engine::general_purpose::STANDARD;
    let hex: String = secret.bytes().map(|byte| format!("{byte:02x}")).collect();
    let forms = [
        standard.encode(secret),
        standard.encode(format!("key={secret}\nregion=eu-west-1\n")),
        hex,
        secret.replace('/', "%2F").replace('+', "%2B"),
        secret.replace('/', "\\/"),
        secret[..12].to_owned(),
        secret[12..].to_owned(),
    ];
    for form in &forms {
        assert!(!failed.output.contains(form.as_str()), "{form} printed:\n{}", failed.output);
        assert!(!failed.termination_message.contains(form.as_str()), "{form}: {}", failed.termination_message);
    }
    for label in ["base64: [REDACTED]", "hex: [REDACTED]", "url: [REDACTED]", "json: {\"key\":\"[REDACTED]\"}"] {
        assert!(failed.output.contains(label), "{label} in:\n{}", failed.output);
    }
    assert!(failed.termination_message.contains("failing with [REDACTED]"), "{}", failed.termination_message);
}

#[tokio::test]
async fn a_stop_signal_interrupts_terraform_which_releases_its_lock() {
    let job = Job::new().await;
    // Stop it the way the kubelet stops a pod, once terraform is inside the apply holding the lock.
    let (mut child, output, readers) = start_slow_apply(&job, job.command("apply")).await;
    assert!(job.object_keys().iter().any(|key| key.ends_with(".tflock")), "terraform holds the state lock");
    // SAFETY: kill(2) on the child we started; no memory is involved.
    unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the runner stops soon after the signal, without waiting for the 120 s command")
        .unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let stopped = job.outcome(status, output.lock().unwrap().clone());
    stopped.assert_failure();
    assert_eq!(stopped.termination_message, "stopped by a signal before the run finished");
    assert!(!job.object_keys().iter().any(|key| key.ends_with(".tflock")), "the lock is released");

    // Nothing is left stuck: the next attempt (with a quick command now) takes the lock and finishes.
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.run("apply").await.assert_success();
}

#[tokio::test]
async fn bad_usage_and_bad_configuration_exit_with_2_and_name_the_problem() {
    let job = Job::new().await;
    let bogus = job.command("bogus").output().await.unwrap();
    assert_eq!(bogus.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("--action \"bogus\" is not apply, destroy or plan"));

    let unconfigured = job.command("apply").env_remove("POD_NAMESPACE").output().await.unwrap();
    assert_eq!(unconfigured.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unconfigured.stderr).contains("POD_NAMESPACE"));

    // The Job's action and the rendered runner.json must agree.
    job.write_config("destroy", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    let mismatch = job.run("apply").await;
    mismatch.assert_failure();
    assert_eq!(mismatch.termination_message, "the Job asked to apply but runner.json says destroy");

    // An incomplete credential fails before anything is created, naming the missing file.
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    job.write_credentials(&[("credential_type", "aws_access_key"), ("aws_access_key_id", ACCESS_KEY_ID)]);
    let incomplete = job.run("apply").await;
    incomplete.assert_failure();
    assert!(
        incomplete.termination_message.ends_with("aws_secret_access_key is missing"),
        "{}",
        incomplete.termination_message
    );
    assert!(!job.bucket_exists(), "nothing is created before the inputs are known to be complete");
}

/// Starts `command` on an apply whose only resource takes 120 s, and returns once Terraform is inside the apply,
/// holding the state lock: the child, everything it printed so far and still prints, and the readers of that.
async fn start_slow_apply(
    job: &Job,
    mut command: tokio::process::Command,
) -> (tokio::process::Child, Arc<Mutex<String>>, [tokio::task::JoinHandle<()>; 2]) {
    job.write_config("apply", "vanilla_kubeadm", &local_exec("slow", "sleep 120"));
    let mut child = command.spawn().expect("start terraform-runner");
    let output = Arc::new(Mutex::new(String::new()));
    let readers =
        [collect(child.stdout.take().unwrap(), output.clone()), collect(child.stderr.take().unwrap(), output.clone())];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !output.lock().unwrap().contains("terraform_data.slow: Creating...") {
        assert!(tokio::time::Instant::now() < deadline, "apply never started:\n{}", output.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(200)).await;
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

#[tokio::test]
async fn gke_apply_keeps_state_in_gcs_and_destroy_removes_the_bucket() {
    let job = Job::new().await;
    let gcs = FakeGcs::start().await;
    let token_server = GoogleTokenServer::start(&test_key_pair().public_key_der).await;
    let key = ServiceAccountKey::generate(&token_server.token_uri());
    job.write_credentials(&[
        ("credential_type", "gcp_service_account"),
        ("service_account.json", &key.json),
        ("project_id", PROJECT_ID),
    ]);
    let write_config = |action: &str| {
        let manifest = json!({
            "action": action, "topology": "gke", "cloud": "gcp", "region": "europe-west1",
            "stateBucket": job.bucket, "runtimeId": job.runtime_id, "runtimeName": "runner-test",
            "gcpProject": PROJECT_ID, "provider": ProviderVersion::pinned(Cloud::Gcp),
        });
        std::fs::write(job.path("config/runner.json"), manifest.to_string()).unwrap();
        // Terraform's GCS backend signs in with the same key file (its token_uri is the test's token server).
        let main_tf = format!(
            r#"terraform {{
  backend "gcs" {{
    bucket                  = "{bucket}"
    prefix                  = "terraform"
    storage_custom_endpoint = "{endpoint}/storage/v1/"
  }}
}}

{required}
{CLUSTER_RESOURCE}

output "cluster_name" {{
  value = "runner-gke"
}}

output "cluster_endpoint" {{
  value = "34.1.2.3"
}}

output "cluster_ca_certificate" {{
  value = "Q0EK"
}}

output "location" {{
  value = "europe-west1"
}}
"#,
            bucket = job.bucket,
            endpoint = gcs.base_url(),
            required = required_providers(&ProviderVersion::pinned(Cloud::Gcp)),
        );
        std::fs::write(job.path("config/main.tf"), main_tf).unwrap();
    };
    let emulator = [("STORAGE_EMULATOR_HOST", gcs.emulator_host())];

    // The runner's first token is refused like an expired one: it gets a new one and carries on.
    gcs.expire_first_token();
    write_config("apply");
    let applied = job.run_with("apply", &emulator).await;
    applied.assert_success();
    assert!(!applied.output.contains(&key.key.private_key_pem.lines().nth(1).unwrap().to_owned()));

    // The runner signed in as the service account and created a versioned bucket with that token.
    let claims = token_server.accepted_claims();
    assert!(
        claims.iter().any(|claim| claim["iss"] == CLIENT_EMAIL && claim["scope"] == SCOPE_CLOUD_PLATFORM),
        "{claims:?}"
    );
    let issued = token_server.issued_tokens();
    let created = gcs
        .requests()
        .into_iter()
        .find(|request| {
            request.method == "POST" && request.path_and_query.starts_with("/storage/v1/b?project=kubeopera-test")
        })
        .expect("the runner created the bucket in the credential's project");
    let bearer = created.authorization.as_deref().and_then(|value| value.strip_prefix("Bearer ")).unwrap();
    assert!(issued.iter().any(|token| token == bearer), "the bucket was created with an issued token");
    let refused =
        gcs.requests().into_iter().find(|request| request.status == 401).expect("the first token was refused");
    assert_ne!(refused.authorization, created.authorization, "the bucket was created with a renewed token");
    assert_eq!(gcs.bucket(&job.bucket).await.expect("the state bucket")["versioning"]["enabled"], true);
    assert_eq!(
        gcs.object_names(&job.bucket).await,
        ["terraform/default.holder.json", "terraform/default.tfstate"],
        "state written, lock released, its holder recorded"
    );
    for token in &issued {
        assert!(!applied.output.contains(token.as_str()), "the access token was printed");
    }

    // A lock left in GCS by a run whose pod is gone: the next run unlocks it by its generation, as tofu's GCS
    // backend does (the ID inside the object is not what it unlocks by).
    let record: Value =
        serde_json::from_slice(&gcs.object(&job.bucket, "terraform/default.holder.json").await.unwrap()).unwrap();
    let who = format!("runner@{}", record["hostname"].as_str().unwrap());
    let left = json!({
        "ID": "d2b7a7c4-0000-4000-8000-000000000001", "Operation": "OperationTypeApply", "Info": "", "Who": who,
        "Version": "1.12.6", "Created": "2026-12-01T00:00:00Z",
        "Path": format!("gs://{}/terraform/default.tflock", job.bucket),
    });
    let lock = gcs.put_object(&job.bucket, "terraform/default.tflock", left.to_string()).await;
    let generation = lock["generation"].as_str().map(str::to_owned).unwrap_or_else(|| lock["generation"].to_string());
    let mut next_run = RunIdentity::new(&job, "next").env();
    next_run.extend(emulator.clone());
    let took_over = job.run_with("apply", &next_run).await;
    took_over.assert_success();
    let unlocked = took_over.take_over_line();
    assert!(unlocked.contains(&format!("lock_id=\"{generation}\"")), "{unlocked}");
    assert!(gcs.object(&job.bucket, "terraform/default.tflock").await.is_none(), "the lock is gone");

    let kubeconfig = job.published_kubeconfig().await.expect("the kubeconfig is published");
    let parsed = kube::config::Kubeconfig::from_yaml(&kubeconfig).expect("a valid kubeconfig");
    assert_eq!(parsed.current_context.as_deref(), Some("gke_kubeopera-test_europe-west1_runner-gke"));
    assert_eq!(parsed.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("https://34.1.2.3"));
    let exec = parsed.auth_infos[0].auth_info.as_ref().unwrap().exec.as_ref().unwrap();
    assert_eq!(exec.command.as_deref(), Some("gke-gcloud-auth-plugin"));
    assert!(!kubeconfig.contains("PRIVATE KEY"));

    write_config("destroy");
    let destroyed = job.run_with("destroy", &emulator).await;
    destroyed.assert_success();
    assert!(destroyed.output.contains("Resources: 0 added, 0 changed, 1 destroyed."), "{}", destroyed.output);
    assert!(gcs.bucket(&job.bucket).await.is_none(), "the state bucket is removed after the destroy");
}

/// Every run is planned first and exactly the saved plan is applied; its summary (from tofu's own `show -json`)
/// is the termination message. A plan that would replace a protected resource is refused with its own exit code,
/// naming the resource, and changes nothing; a harmless change to the same configuration is applied.
#[tokio::test]
async fn the_runner_plans_first_and_refuses_to_replace_a_protected_resource() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let config = |input: &str, trigger: &str| job.protected_cluster_config(input, trigger);
    let protect = protect_the_cluster();

    job.write_config("apply", "vanilla_kubeadm", &config("v1", "generation-1"));
    let created = job.run_with("apply", &protect).await.assert_success();
    assert_eq!(created, PlanSummary { add: 2, ..PlanSummary::default() });
    let state = || job.state_etag();
    let applied_state = state();

    // A new trigger replaces the cluster: refused before anything changes.
    job.write_config("apply", "vanilla_kubeadm", &config("v1", "generation-2"));
    let refused = job.run_with("apply", &protect).await;
    assert_eq!(refused.status.code(), Some(EXIT_DESTRUCTIVE_PLAN), "{}", refused.output);
    assert_eq!(
        refused.termination_message,
        "the plan would destroy or replace protected resources (terraform_data.cluster); nothing was changed"
    );
    assert!(!refused.output.contains("Apply complete"), "{}", refused.output);
    assert_eq!(state(), applied_state, "the state is untouched");

    // Without the replacement, the change is an update, applied as planned.
    job.write_config("apply", "vanilla_kubeadm", &config("v2", "generation-1"));
    let changed = job.run_with("apply", &protect).await.assert_success();
    assert_eq!(changed, PlanSummary { change: 2, ..PlanSummary::default() });

    // A destroy is planned too, and may remove what an apply must keep.
    job.write_config("destroy", "vanilla_kubeadm", &config("v2", "generation-1"));
    let destroyed = job.run_with("destroy", &protect).await.assert_success();
    let mut addresses = destroyed.destroyed.clone();
    addresses.sort();
    assert_eq!(addresses, ["terraform_data.cluster", "terraform_data.workers"]);
    assert_eq!((destroyed.add, destroyed.change, destroyed.destroy), (0, 0, 2));
}

/// A dry run plans and changes nothing: a new cluster is planned without its state bucket being created (from
/// empty local state), an existing one against its state, which stays as it was; a destructive plan is reported
/// as the real run would refuse it.
#[tokio::test]
async fn a_dry_run_plans_without_changing_anything() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let config = |input: &str, trigger: &str| job.protected_cluster_config(input, trigger);
    let protect = protect_the_cluster();

    job.write_config("plan", "vanilla_kubeadm", &config("v1", "generation-1"));
    let preview = job.run_with("plan", &protect).await.assert_success();
    assert_eq!(preview, PlanSummary { add: 2, ..PlanSummary::default() });
    assert!(!job.bucket_exists(), "a dry run of a new cluster creates no state bucket");
    assert!(job.published_kubeconfig().await.is_none(), "a dry run publishes nothing");

    job.write_config("apply", "vanilla_kubeadm", &config("v1", "generation-1"));
    job.run_with("apply", &protect).await.assert_success();
    let state = || job.state_etag();
    let applied_state = state();

    job.write_config("plan", "vanilla_kubeadm", &config("v2", "generation-1"));
    let planned = job.run_with("plan", &protect).await.assert_success();
    assert_eq!(planned, PlanSummary { change: 2, ..PlanSummary::default() });
    assert_eq!(state(), applied_state, "a dry run leaves the state as it was");

    job.write_config("plan", "vanilla_kubeadm", &config("v1", "generation-2"));
    let refused = job.run_with("plan", &protect).await;
    assert_eq!(refused.status.code(), Some(EXIT_DESTRUCTIVE_PLAN), "{}", refused.output);
    assert!(refused.termination_message.contains("terraform_data.cluster"), "{}", refused.termination_message);
    assert_eq!(state(), applied_state);
}

/// A vanilla wake-up started the stopped control plane: the run ends only once its API server answers (the real
/// test API server, reached through a proxy that refuses connections until the "boot" is over), and fails, saying
/// so, when it never does.
#[tokio::test]
async fn a_wake_up_waits_until_the_api_server_answers() {
    let job = Job::new().await;
    let upstream = job.control_plane.server_url().trim_start_matches("https://").parse().expect("host:port");
    let proxy = test_support::fault_proxy::FaultProxy::start(upstream).await;
    proxy.cut();
    let server = format!("https://{}", proxy.address());
    job.publish_node_kubeconfig(&server, "");
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, &server));
    job.wait_for_api_server();

    let run = job.command("apply").spawn().expect("start terraform-runner");
    // The control plane "boots" for a few seconds after the apply (which writes the state) has started it.
    let answering = async {
        let mut state_written = tokio::process::Command::from(job.moto.aws_command());
        state_written.args(["s3api", "head-object", "--bucket", &job.bucket, "--key", "terraform.tfstate"]);
        let started = tokio::time::Instant::now();
        while !state_written.output().await.unwrap().status.success() {
            assert!(started.elapsed() < Duration::from_secs(120), "the apply never wrote its state");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        proxy.restore();
    };
    let (output, ()) = tokio::join!(tokio::time::timeout(Duration::from_secs(180), run.wait_with_output()), answering);
    let output = output.expect("the wake-up finishes within 3 minutes").unwrap();
    let outcome = job.outcome(
        output.status,
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
    );
    outcome.assert_success();
    let (waiting, answers) =
        (outcome.output.find("waiting for the API server to answer"), outcome.output.find("the API server answers"));
    assert!(waiting.is_some() && waiting < answers, "{}", outcome.output);
    assert!(job.published_kubeconfig().await.is_some());

    proxy.cut();
    let timeout = [("RUNNER_KUBECONFIG_TIMEOUT", "3s".to_owned())];
    let outcome = job.run_with("apply", &timeout).await;
    outcome.assert_failure();
    assert!(
        outcome.termination_message.starts_with(&format!("the API server at {server}/ did not answer within 3s")),
        "{}",
        outcome.termination_message
    );
}

/// A vanilla cluster's kubeconfig comes from its nodes, which the tenant controls: on a wake-up (which connects
/// to the API server with it) a planted `exec` runs nothing and a planted `tokenFile` sends nothing anywhere; the
/// run fails naming the refused field and publishes nothing.
#[tokio::test]
async fn a_kubeconfig_planted_in_ssm_runs_nothing_sends_nothing_and_is_not_published() {
    let job = Job::new().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = format!("https://{}", listener.local_addr().unwrap());
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = connections.clone();
    let accepting = tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let marker = job.path("exec-ran");
    let exec = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: /bin/sh\n      args:\n      \
         - -c\n      - touch {} && echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"x\"}}}}'\n      \
         interactiveMode: Never\n",
        marker.display()
    );
    let token_file = job.path("credentials/aws_secret_access_key");
    for (server, extra_user, field) in [
        (API_ENDPOINT.to_owned(), exec, "exec"),
        (elsewhere.clone(), format!("    tokenFile: {}\n", token_file.display()), "tokenFile"),
    ] {
        job.publish_node_kubeconfig(&server, &extra_user);
        job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
        job.wait_for_api_server();
        let outcome = job.run_with("apply", &[("RUNNER_KUBECONFIG_TIMEOUT", "5s".to_owned())]).await;
        outcome.assert_failure();
        assert!(
            outcome.termination_message.starts_with(&format!(
                "the kubeconfig the cluster published to SSM parameter {} is refused",
                job.kubeconfig_parameter()
            )) && outcome.termination_message.contains(field),
            "{field}: {}",
            outcome.termination_message
        );
        outcome.assert_no_secret();
        assert!(job.published_kubeconfig().await.is_none(), "{field}: nothing is published");
    }
    assert!(!marker.exists(), "the planted exec ran in the runner");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0, "the runner connected to {elsewhere}");
    accepting.abort();
}

/// The init container clones the pinned ref and checks its commit: a tag moved to another commit fails the
/// fetch (so the Job's runner never starts) and leaves no modules behind; a URL carrying credentials is refused.
#[tokio::test]
async fn fetch_modules_refuses_a_moved_tag() {
    let folder = tempfile::tempdir().unwrap();
    let repo = folder.path().join("modules");
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.name=test", "-c", "user.email=test@example.invalid", "-C"])
            .arg(&repo)
            .args(args)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "--quiet"]);
    std::fs::write(repo.join("main.tf"), "# pinned\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "--quiet", "-m", "pinned"]);
    git(&["tag", "v1"]);
    let pinned = git(&["rev-parse", "HEAD"]);
    std::fs::write(repo.join("main.tf"), "# moved\n").unwrap();
    git(&["commit", "--quiet", "-am", "moved"]);

    let fetch = |url: &str, target: &str| {
        let termination = folder.path().join(format!("{target}.termination"));
        let output = std::process::Command::new(test_support::terraform_runner_bin())
            .arg("fetch-modules")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("MODULES_REPO_URL", url)
            .env("MODULES_REPO_REF", "v1")
            .env("MODULES_REPO_COMMIT", &pinned)
            .env("MODULES_REPO_ALLOW_LOCAL", "true")
            .env("MODULES_DIR", folder.path().join(target))
            .env("RUNNER_TERMINATION_LOG", &termination)
            .output()
            .unwrap();
        (output.status.code(), std::fs::read_to_string(termination).unwrap_or_default())
    };
    let url = format!("file://{}", repo.display());
    let (code, message) = fetch(&url, "first");
    assert_eq!(code, Some(0), "{message}");
    assert_eq!(std::fs::read_to_string(folder.path().join("first/main.tf")).unwrap(), "# pinned\n");

    git(&["tag", "-f", "v1"]);
    let moved = git(&["rev-parse", "HEAD"]);
    let (code, message) = fetch(&url, "second");
    assert_eq!(code, Some(1), "{message}");
    assert_eq!(
        message,
        format!(
            "the modules repository's v1 is commit {moved}, not the pinned {pinned}: the ref was moved; nothing was run"
        )
    );
    assert!(!folder.path().join("second").exists(), "nothing is left for Terraform");

    let (code, message) = fetch("https://user:token@git.example.invalid/modules.git", "third");
    assert_eq!(code, Some(2), "{message}");
    assert!(message.starts_with("MODULES_REPO_URL:") && !message.contains("token@"), "{message}");
}

/// A modules repository behind HTTPS with a private CA and basic credentials: the init container clones it with
/// the CA (`ca.crt`) and the credentials of the mounted Secret; without the CA the clone is refused as untrusted,
/// without the credentials the server refuses it, and neither ever reaches Terraform. (Multi-threaded: the runner
/// runs as a blocking child process while this runtime serves the repository.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_modules_trusts_the_repositorys_private_ca_and_sends_its_credentials() {
    let folder = tempfile::tempdir().unwrap();
    let files = folder.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("main.tf"), "# pinned\n").unwrap();
    let (bare, pinned) = test_support::git_server::bare_repository(&files, "v1", folder.path());
    let server = test_support::git_server::GitServer::start(&bare, Some(("reader", "s3cret-token"))).await;

    let fetch = |secret: &[(&str, &str)], target: &str| {
        let credentials = folder.path().join(format!("{target}.credentials"));
        std::fs::create_dir(&credentials).unwrap();
        for (file, text) in secret {
            std::fs::write(credentials.join(file), text).unwrap();
        }
        let termination = folder.path().join(format!("{target}.termination"));
        let output = std::process::Command::new(test_support::terraform_runner_bin())
            .arg("fetch-modules")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("MODULES_REPO_URL", server.url())
            .env("MODULES_REPO_REF", "v1")
            .env("MODULES_REPO_COMMIT", &pinned)
            .env("MODULES_REPO_CREDENTIALS_DIR", &credentials)
            .env("MODULES_DIR", folder.path().join(target))
            .env("RUNNER_TERMINATION_LOG", &termination)
            .output()
            .unwrap();
        (output.status.code(), std::fs::read_to_string(termination).unwrap_or_default())
    };
    let (username, password, ca) = (("username", "reader"), ("password", "s3cret-token"), ("ca.crt", server.ca_pem()));
    let ((fetched, message), target) = (fetch(&[username, password, ca], "all"), folder.path().join("all"));
    assert_eq!(fetched, Some(0), "{message}");
    assert_eq!(std::fs::read_to_string(target.join("main.tf")).unwrap(), "# pinned\n");

    let (untrusted, message) = fetch(&[username, password], "no-ca");
    assert_eq!(untrusted, Some(1));
    assert!(message.contains("certificate"), "{message}");
    let (refused, message) = fetch(&[ca], "no-credentials");
    assert_eq!(refused, Some(1));
    assert!(!message.contains("s3cret-token"), "{message}");
    for target in ["no-ca", "no-credentials"] {
        assert!(!folder.path().join(target).join("main.tf").exists(), "{target}: nothing is left for Terraform");
    }
}

/// A state bucket belongs to one runtime: a provisioning dry run that reuses a live runtime's name (and so its
/// bucket's name) plans from empty state without reading, locking or recording itself in the live bucket, and a
/// run of another runtime on that bucket is refused before it locks anything.
#[tokio::test]
async fn a_live_runtimes_state_bucket_is_never_touched_by_another_runtime() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let config = job.protected_cluster_config("v1", "generation-1");
    job.write_config("apply", "vanilla_kubeadm", &config);
    job.run("apply").await.assert_success();
    let (state, holder) = (job.state_etag(), job.json_object("terraform.tfstate.holder.json"));
    assert_eq!(holder.as_ref().unwrap()["runtimeId"], job.runtime_id.to_string(), "{holder:?}");

    let preview = Uuid::new_v4();
    job.write_config("plan", "vanilla_kubeadm", &config);
    job.patch_manifest(json!({ "runtimeId": preview, "planFromEmptyState": true }));
    let planned = job.run("plan").await.assert_success();
    assert_eq!(planned, PlanSummary { add: 2, ..PlanSummary::default() }, "planned as a new cluster");
    assert_eq!(job.state_etag(), state, "the live state is untouched");
    assert_eq!(job.json_object("terraform.tfstate.holder.json"), holder, "the live holder record is untouched");
    assert!(!job.object_keys().iter().any(|key| key.ends_with(".tflock")), "no lock is left");

    job.write_config("apply", "vanilla_kubeadm", &config);
    job.patch_manifest(json!({ "runtimeId": preview }));
    let refused = job.run("apply").await;
    refused.assert_failure();
    assert_eq!(
        refused.termination_message,
        format!(
            "state bucket {} holds the state of runtime {}, not this runtime's; nothing was changed",
            job.bucket, job.runtime_id
        )
    );
    assert_eq!(job.state_etag(), state);
}

/// Bucket names are global: someone in another account who creates the state bucket's name first (granting
/// everyone access) never receives a state. The run fails naming the bucket and writes nothing to it.
#[tokio::test]
async fn a_state_bucket_of_another_account_is_refused_and_never_written() {
    let job = Job::new().await;
    let assumed: Value = serde_json::from_str(&job.moto.aws(&[
        "sts",
        "assume-role",
        "--role-arn",
        "arn:aws:iam::210987654321:role/squatter",
        "--role-session-name",
        "squatter",
        "--output",
        "json",
    ]))
    .unwrap();
    let keys = &assumed["Credentials"];
    let squatter = |args: &[&str]| {
        let output = job
            .moto
            .aws_command()
            .env("AWS_ACCESS_KEY_ID", keys["AccessKeyId"].as_str().unwrap())
            .env("AWS_SECRET_ACCESS_KEY", keys["SecretAccessKey"].as_str().unwrap())
            .env("AWS_SESSION_TOKEN", keys["SessionToken"].as_str().unwrap())
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let identity: Value = serde_json::from_str(&squatter(&["sts", "get-caller-identity", "--output", "json"])).unwrap();
    assert_eq!(identity["Account"], "210987654321", "the squatter is another account");
    squatter(&[
        "s3api",
        "create-bucket",
        "--bucket",
        &job.bucket,
        "--create-bucket-configuration",
        &format!("LocationConstraint={REGION}"),
    ]);
    let everyone = json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:*",
        "Resource": [format!("arn:aws:s3:::{}", job.bucket), format!("arn:aws:s3:::{}/*", job.bucket)],
    }]});
    squatter(&["s3api", "put-bucket-policy", "--bucket", &job.bucket, "--policy", &everyone.to_string()]);

    job.write_config("apply", "vanilla_kubeadm", &job.protected_cluster_config("v1", "generation-1"));
    let refused = job.run("apply").await;
    refused.assert_failure();
    assert_eq!(
        refused.termination_message,
        format!(
            "state bucket {} exists but does not belong to account 123456789012; nothing was read or written",
            job.bucket
        )
    );
    let listing: Value = serde_json::from_str(&squatter(&[
        "s3api",
        "list-object-versions",
        "--bucket",
        &job.bucket,
        "--output",
        "json",
    ]))
    .unwrap_or(Value::Null);
    assert!(listing["Versions"].as_array().is_none_or(Vec::is_empty), "written to: {listing}");
    job.write_config("plan", "vanilla_kubeadm", &job.protected_cluster_config("v1", "generation-1"));
    job.run("plan").await.assert_failure();
    job.write_config("destroy", "vanilla_kubeadm", &job.protected_cluster_config("v1", "generation-1"));
    job.run("destroy").await.assert_failure();
    // The bucket stays theirs: a destroy never removes someone else's bucket.
    squatter(&["s3api", "head-bucket", "--bucket", &job.bucket]);
}

/// A vanilla upgrade's configuration: three control-plane machines (replaced for a new `machine_type`), the
/// resource the nodes watch for the version and the workers (both replaced for a new `version`), each logging
/// when it is created.
fn control_plane_and_workers(job: &Job, machine_type: &str, version: &str) -> String {
    let events = job.path("events.log");
    // `label` is what the creation logs (`machine${count.index}` for the counted machines).
    let resource = |name: &str, label: &str, count: &str, trigger: &str| {
        format!(
            "resource \"terraform_data\" \"{name}\" {{\n{count}  triggers_replace = \"{trigger}\"\n  provisioner \"local-exec\" {{\n    \
             command = \"echo {label} $(date +%s.%N) >> {}\"\n  }}\n}}\n",
            events.display()
        )
    };
    format!(
        "{}\n{}\n{}\n{}",
        resource("machine", "machine${count.index}", "  count = 3\n", machine_type),
        resource("control_plane", "control_plane", "", version),
        resource("workers", "workers", "", version),
        vanilla_outputs(&job.kubeconfig_parameter(), API_ENDPOINT)
    )
}

/// `(resource, time)` of every creation logged by [`control_plane_and_workers`].
fn created(job: &Job) -> Vec<(String, f64)> {
    let events = std::fs::read_to_string(job.path("events.log")).unwrap_or_default();
    events
        .lines()
        .map(|line| {
            let (name, time) = line.split_once(' ').expect("name time");
            (name.to_owned(), time.parse().expect("a timestamp"))
        })
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A vanilla upgrade changes the control plane first, one step at a time, each applied alone and awaited until the
/// nodes say they have taken it: each machine's new type (node 0, 1, 2), then the version; only then the workers
/// roll. When the control plane never gets there, the workers stay as they are.
#[tokio::test]
async fn a_vanilla_upgrade_rolls_the_workers_only_after_the_control_plane() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &control_plane_and_workers(&job, "m6i.large", "1.34"));
    job.run("apply").await.assert_success();
    assert_eq!(created(&job).len(), 5);

    let upgrade = |machine_type: &str, version: &str| {
        job.write_config("apply", "vanilla_kubeadm", &control_plane_and_workers(&job, machine_type, version));
        let path = job.path("config/runner.json");
        let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["controlPlaneUpgrade"] = json!({
            "machines": "terraform_data.machine", "machineType": machine_type,
            "resource": "terraform_data.control_plane", "lastNode": 2, "version": version,
        });
        std::fs::write(path, manifest.to_string()).unwrap();
    };
    upgrade("m6i.xlarge", "1.35");
    let nodes_path = format!("{}generation-1/control-plane", job.ssm_prefix());
    let run = job.command("apply").spawn().expect("start terraform-runner");
    // The "nodes" take each change a second after it was applied, and say so; returns when each was said.
    let nodes = async {
        let mut said = Vec::new();
        let started = tokio::time::Instant::now();
        while said.len() < 4 {
            assert!(started.elapsed() < Duration::from_secs(150), "the control plane's changes were not all applied");
            let events = created(&job);
            if let Some((name, _)) = events.get(5 + said.len()) {
                let marker = match name.strip_prefix("machine") {
                    Some(node) => format!("{nodes_path}/{node}/running/m6i.xlarge"),
                    None => format!("{nodes_path}/2/upgraded/1.35"),
                };
                tokio::time::sleep(Duration::from_secs(1)).await;
                let mut put = tokio::process::Command::from(job.moto.aws_command());
                put.args([
                    "ssm",
                    "put-parameter",
                    "--name",
                    &marker,
                    "--type",
                    "String",
                    "--value",
                    "x",
                    "--overwrite",
                ]);
                assert!(put.output().await.unwrap().status.success());
                said.push(unix_now());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        said
    };
    let (output, said) = tokio::join!(tokio::time::timeout(Duration::from_secs(240), run.wait_with_output()), nodes);
    let output = output.expect("the upgrade finishes within 4 minutes").unwrap();
    let outcome = job.outcome(
        output.status,
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
    );
    outcome.assert_success();
    let events = created(&job);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[5..], ["machine0", "machine1", "machine2", "control_plane", "workers"], "{events:?}");
    // Each step started only after the nodes had taken the one before.
    for (step, said) in said.iter().enumerate() {
        assert!(events[5 + step + 1].1 > *said, "step {} started before step {step} was taken: {events:?}", step + 1);
    }
    assert!(outcome.output.contains("waiting for the control plane"), "{}", outcome.output);

    // A control plane that never gets there: the run fails, naming it, and the workers stay.
    upgrade("m6i.xlarge", "1.36");
    let timeout = [("RUNNER_CONTROL_PLANE_UPGRADE_TIMEOUT", "3s".to_owned())];
    let outcome = job.run_with("apply", &timeout).await;
    outcome.assert_failure();
    assert!(
        outcome.termination_message.starts_with(&format!(
            "the cluster did not publish that its control plane runs 1.36 to SSM parameter {nodes_path}/2/upgraded/1.36 \
             within 3s"
        )),
        "{}",
        outcome.termination_message
    );
    let names: Vec<String> = created(&job).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names[10..], ["control_plane"], "only the unchanged machines were skipped and no worker replaced");
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

/// A pod or Job of the run, as the API server knows it: nothing schedules the pod or starts the (suspended) Job
/// here, so the pod stays pending and the Job unfinished.
fn pod_template(name: Option<&str>, operation_id: Uuid) -> (ObjectMeta, PodSpec) {
    let metadata = ObjectMeta {
        name: name.map(str::to_owned),
        labels: Some([(runner_contract::job::OPERATION_LABEL.to_owned(), operation_id.to_string())].into()),
        ..ObjectMeta::default()
    };
    let spec = PodSpec {
        containers: vec![Container {
            name: "terraform-runner".into(),
            image: Some("runner".into()),
            ..Container::default()
        }],
        restart_policy: Some("Never".into()),
        service_account_name: Some("terraform-runner".into()),
        ..PodSpec::default()
    };
    (metadata, spec)
}

const LOCK: &str = "terraform.tfstate.tflock";
const HOLDER: &str = "terraform.tfstate.holder.json";

#[tokio::test]
async fn a_lock_left_by_a_killed_apply_is_taken_over_only_once_its_holder_is_gone() {
    let job = Job::new().await;
    let admin = job.control_plane.admin_client().unwrap();
    let pods = Api::<Pod>::namespaced(admin.clone(), &job.namespace);
    let jobs = Api::<BatchJob>::namespaced(admin, &job.namespace);
    let first = RunIdentity::new(&job, "first");
    let (metadata, spec) = pod_template(Some(&first.pod), first.operation_id);
    pods.create(&PostParams::default(), &Pod { metadata, spec: Some(spec), ..Pod::default() }).await.unwrap();

    // The first run is killed inside its apply the way a lost node or the OOM killer ends it: the runner and
    // Terraform at once, so nothing releases the lock.
    let mut command = job.command("apply");
    command.envs(first.env()).process_group(0);
    let (mut child, _, readers) = start_slow_apply(&job, command).await;
    // SAFETY: kill(2) on the process group of the child we started; no memory is involved.
    unsafe { libc::kill(-(child.id().unwrap() as libc::pid_t), libc::SIGKILL) };
    child.wait().await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let lock = job.json_object(LOCK).expect("the killed apply left its lock");
    let holder = job.json_object(HOLDER).expect("the run recorded itself as the holder");
    assert_eq!(
        (holder["pod"].as_str(), holder["operationId"].as_str()),
        (Some(first.pod.as_str()), Some(first.operation_id.to_string().as_str()))
    );
    assert!(lock["Who"].as_str().unwrap().ends_with(&format!("@{}", holder["hostname"].as_str().unwrap())), "{lock}");

    // Its pod is still there (pending, or stopping): the next run leaves the lock alone and fails waiting for it.
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let second = RunIdentity::new(&job, "second");
    let left_alone = job.run_with("apply", &second.env()).await;
    left_alone.assert_failure();
    assert!(left_alone.output.contains("the state is locked and the lock is left alone"), "{}", left_alone.output);
    let message = &left_alone.termination_message;
    assert!(message.starts_with(&format!("the state is locked by {}", lock["Who"].as_str().unwrap())), "{message}");
    assert!(message.contains(&format!("(its holder pod {} still runs)", first.pod)), "{message}");
    assert_eq!(job.json_object(LOCK).as_ref(), Some(&lock), "the lock is untouched");

    // The pod is gone, but its operation still has an unfinished Job: left alone again.
    pods.delete(&first.pod, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.unwrap();
    let (mut metadata, spec) = pod_template(None, first.operation_id);
    metadata.name = Some(format!("provision-{}", job.runtime_id));
    let unfinished = BatchJob {
        metadata: metadata.clone(),
        spec: Some(JobSpec {
            suspend: Some(true),
            template: PodTemplateSpec { metadata: Some(metadata), spec: Some(spec) },
            ..JobSpec::default()
        }),
        ..BatchJob::default()
    };
    jobs.create(&PostParams::default(), &unfinished).await.unwrap();
    while pods.get_opt(&first.pod).await.unwrap().is_some() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The next run waits (judging the lock again every second), and takes over once nothing of the first run is
    // left: the lock is force-unlocked, in the run's log, and the run goes on.
    let mut waiting = second.env();
    waiting.push(("RUNNER_STATE_LOCK_TIMEOUT", "90s".to_owned()));
    let mut child = job.command("apply").envs(waiting).spawn().expect("start terraform-runner");
    let output = Arc::new(Mutex::new(String::new()));
    let readers =
        [collect(child.stdout.take().unwrap(), output.clone()), collect(child.stderr.take().unwrap(), output.clone())];
    let why = format!("its holder's operation {} still has an unfinished Job", first.operation_id);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !output.lock().unwrap().contains(&why) {
        assert!(tokio::time::Instant::now() < deadline, "the lock was not left alone:\n{}", output.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(job.json_object(LOCK).as_ref(), Some(&lock), "the lock is untouched");
    let background =
        DeleteParams { propagation_policy: Some(kube::api::PropagationPolicy::Background), ..DeleteParams::default() };
    jobs.delete(unfinished.metadata.name.as_deref().unwrap(), &background).await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait()).await.expect("the run ends").unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let took_over = job.outcome(status, output.lock().unwrap().clone());
    took_over.assert_success();
    let lock_id = lock["ID"].as_str().unwrap();
    let unlocked = took_over.take_over_line();
    assert!(
        unlocked.contains(lock_id)
            && unlocked.contains(&first.pod)
            && unlocked.contains(&first.operation_id.to_string()),
        "{unlocked}"
    );
    assert!(job.json_object(LOCK).is_none(), "the lock is released after the run");
    assert_eq!(job.json_object(HOLDER).unwrap()["pod"], second.pod.as_str(), "the run recorded itself as the holder");
}
