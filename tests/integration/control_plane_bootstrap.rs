//! The vanilla control plane's coordination through SSM Parameter Store, against moto (`TEST_AWS_TOOLS_BIN_DIR`)
//! with recording stand-ins for kubeadm, kubectl and the node's API server: four control-plane bootstraps run
//! concurrently and must init once, then join one at a time in index order with the published credentials; then
//! their upgrade timers' runs, all at once, must upgrade them one at a time in index order (`kubeadm upgrade apply`
//! first, `kubeadm upgrade node` after it), each publishing its marker; a certificate renewal goes the same way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};
use test_support::moto::MotoServer;

use crate::modules::{AUTHENTICATION_CONFIG, run, scripts_dir};

const CONTROL_PLANE_NODES: usize = 4;
const ENDPOINT_HOST: &str = "k8s-api-test.elb.eu-west-1.amazonaws.com";
const SSM_PREFIX: &str = "/kubeopera/0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10/3f0c1e2d-5b6a-4c7d-8e9f-0a1b2c3d4e5f";
/// Where kube-apiserver finds it: the node's folder, mounted at the path kubeadm's patch names.
const AUTHENTICATION_CONFIG_FILE: &str = "/etc/kubernetes/authentication/config.json";

/// An authentication configuration as the renderer writes it: compact JSON trusting one issuer.
fn authentication_config(issuer: &str) -> String {
    serde_json::json!({
        "apiVersion": "apiserver.config.k8s.io/v1beta1",
        "kind": "AuthenticationConfiguration",
        "jwt": [{
            "issuer": { "url": issuer, "audiences": ["kubeopera"] },
            "claimMappings": { "username": { "claim": "email", "prefix": "oidc:" } },
        }],
    })
    .to_string()
}

/// Records every run with start and end times in the shared log, and sleeps in between so that overlapping runs
/// would show; fails the subcommand `STANDIN_KUBEADM_FAILS` names. `init` leaves a CA certificate and an admin
/// kubeconfig where kubeadm would; init and join leave the kubelet.conf that marks a node as joined; `certs renew
/// all` and `upgrade apply` write another client certificate (`rrr…`, `uuu…`) into the admin kubeconfig, as kubeadm
/// renews it. A run with `--patches` fails unless the kube-apiserver patch and
/// the authentication configuration are already written.
const KUBEADM_STAND_IN: &str = r#"#!/usr/bin/env bash
set -euo pipefail
if [[ ${1:-} == version ]]; then
  echo "${STANDIN_KUBEADM_VERSION:-v1.34.0}"
  exit 0
fi
echo "$(date +%s.%N) ${STANDIN_NODE} ${1:-} start $*" >>"$STANDIN_LOG"
# kubeadm reads its patches, and the API server it starts the configuration they name, right away.
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ ${args[i]} == --patches ]]; then
    if [[ ! -s ${args[i + 1]}/kube-apiserver+json.json || ! -s $STANDIN_KUBERNETES_DIR/authentication/config.json ]]; then
      echo "kubeadm $1 ran before its patch and the authentication configuration were written" >&2
      exit 1
    fi
  fi
done
sleep 0.3
# A failure injected into one subcommand (a kubeadm upgrade that cannot reach the next minor).
if [[ ${1:-} == "${STANDIN_KUBEADM_FAILS:-}" ]]; then
  echo "[upgrade/apply] FATAL: the stand-in fails $1 as asked" >&2
  echo "$(date +%s.%N) ${STANDIN_NODE} ${1:-} end" >>"$STANDIN_LOG"
  exit 1
fi
case ${1:-} in
  init)
    mkdir -p "$STANDIN_KUBERNETES_DIR/pki"
    cp "$STANDIN_CA_CERT" "$STANDIN_KUBERNETES_DIR/pki/ca.crt"
    cat >"$STANDIN_KUBERNETES_DIR/admin.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTi==
    server: https://10.0.1.10:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: kubernetes-admin
  name: kubernetes-admin@kubernetes
current-context: kubernetes-admin@kubernetes
users:
- name: kubernetes-admin
  user:
    client-certificate-data: $(head -c 3000 /dev/zero | base64 -w0)
EOF
    touch "$STANDIN_KUBERNETES_DIR/kubelet.conf"
    ;;
  join)
    mkdir -p "$STANDIN_KUBERNETES_DIR"
    touch "$STANDIN_KUBERNETES_DIR/kubelet.conf"
    ;;
  certs | upgrade)
    # `certs renew all` and `upgrade apply` renew admin.conf's client certificate with the others.
    letter=r
    [[ ${2:-} == apply ]] && letter=u
    renewed=$(head -c 3000 /dev/zero | tr '\0' "$letter" | base64 -w0)
    if [[ -e $STANDIN_KUBERNETES_DIR/admin.conf && ( $1 == certs || ${2:-} == apply ) ]]; then
      sed -i "s#client-certificate-data: .*#client-certificate-data: ${renewed}#" "$STANDIN_KUBERNETES_DIR/admin.conf"
    fi
    ;;
esac
echo "$(date +%s.%N) ${STANDIN_NODE} ${1:-} end" >>"$STANDIN_LOG"
"#;

/// Records its arguments (and reads a manifest from a file, as `kubectl apply -f` would).
const KUBECTL_STAND_IN: &str = r#"#!/usr/bin/env bash
set -euo pipefail
echo "${STANDIN_NODE} $*" >>"$STANDIN_KUBECTL_LOG"
"#;

const NO_OP_STAND_IN: &str = "#!/usr/bin/env bash\nexit 0\n";

/// The node's own API server (`curl https://127.0.0.1:6443/readyz`): ready once `STANDIN_READY` exists.
const CURL_STAND_IN: &str = r#"#!/usr/bin/env bash
[[ -n ${STANDIN_READY:-} && -e $STANDIN_READY ]] || exit 7
echo ok
"#;

struct Scene {
    folder: tempfile::TempDir,
    bin: PathBuf,
    ca_cert: PathBuf,
}

impl Scene {
    fn new() -> Self {
        let folder = tempfile::Builder::new().prefix("bootstrap-").tempdir().unwrap();
        let bin = folder.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for (name, script) in [
            ("kubeadm", KUBEADM_STAND_IN),
            ("kubectl", KUBECTL_STAND_IN),
            ("curl", CURL_STAND_IN),
            ("systemctl", NO_OP_STAND_IN),
            ("dnf", NO_OP_STAND_IN),
            ("modprobe", NO_OP_STAND_IN),
            ("sysctl", NO_OP_STAND_IN),
            ("swapoff", NO_OP_STAND_IN),
        ] {
            let path = bin.join(name);
            std::fs::write(&path, script).unwrap();
            let mut permissions = std::fs::metadata(&path).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
            std::fs::set_permissions(&path, permissions).unwrap();
        }
        let ca_cert = folder.path().join("ca.crt");
        let output = run(Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=kubernetes"])
            .arg("-keyout")
            .arg(folder.path().join("ca.key"))
            .arg("-out")
            .arg(&ca_cert)
            .stdin(Stdio::null()));
        assert!(output.status.success(), "openssl req: {}", String::from_utf8_lossy(&output.stderr));
        Scene { folder, bin, ca_cert }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.folder.path().join(name)
    }

    fn kubernetes_dir(&self, node: &str) -> PathBuf {
        self.path(&format!("{node}/kubernetes"))
    }

    /// The env file the compute module's user data would write, plus what the test replaces (no instance
    /// metadata, no installation, moto, fast polling).
    fn env_file(&self, node: &str, role: &str, index: Option<usize>, moto: &MotoServer, timeout: u32) -> PathBuf {
        let address = 10 + index.unwrap_or(50);
        let mut settings = vec![
            ("CLUSTER_NAME", "team-a".to_owned()),
            ("AWS_REGION", test_support::moto::REGION.to_owned()),
            ("SSM_PREFIX", SSM_PREFIX.to_owned()),
            ("API_ENDPOINT", ENDPOINT_HOST.to_owned()),
            ("API_PORT", "6443".to_owned()),
            ("KUBERNETES_VERSION", "1.34".to_owned()),
            ("NODE_ROLE", role.to_owned()),
            ("POLL_INTERVAL_SECONDS", "0.5".to_owned()),
            ("WAIT_TIMEOUT_SECONDS", timeout.to_string()),
            ("BOOTSTRAP_SKIP_INSTALL", "true".to_owned()),
            ("NODE_NAME", format!("ip-10-0-1-{address}.eu-west-1.compute.internal")),
            ("NODE_IP", format!("10.0.1.{address}")),
            ("INSTANCE_TYPE", "m6i.large".to_owned()),
            ("KUBERNETES_DIR", self.kubernetes_dir(node).display().to_string()),
            ("AWS_ENDPOINT_URL", moto.endpoint()),
        ];
        if let Some(index) = index {
            settings.extend([
                ("NODE_INDEX", index.to_string()),
                ("CONTROL_PLANE_COUNT", CONTROL_PLANE_NODES.to_string()),
                ("CONTROL_PLANE_ENDPOINT", ENDPOINT_HOST.to_owned()),
                ("POD_CIDR", "192.168.0.0/16".to_owned()),
                ("SERVICE_CIDR", "10.96.0.0/12".to_owned()),
                ("CALICO_VERSION", "v3.30.3".to_owned()),
                ("AWS_CCM_VERSION", "v1.34.0".to_owned()),
            ]);
        }
        let text: String = settings.iter().map(|(key, value)| format!("{key}='{value}'\n")).collect();
        std::fs::create_dir_all(self.path(node)).unwrap();
        let path = self.path(&format!("{node}/bootstrap.env"));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn command(&self, script: &str, node: &str, env_file: &Path, moto: &MotoServer) -> tokio::process::Command {
        let path = format!(
            "{}:{}:{}",
            self.bin.display(),
            moto.bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = tokio::process::Command::new("bash");
        command
            .arg(scripts_dir().join(script))
            .arg(env_file)
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .envs(moto.env())
            .env("PATH", path)
            .env("STANDIN_NODE", node)
            .env("STANDIN_LOG", self.path("kubeadm.log"))
            .env("STANDIN_KUBECTL_LOG", self.path("kubectl.log"))
            .env("STANDIN_KUBERNETES_DIR", self.kubernetes_dir(node))
            .env("STANDIN_CA_CERT", &self.ca_cert)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

/// One kubeadm run from the stand-in's log.
#[derive(Debug)]
struct KubeadmRun {
    node: String,
    subcommand: String,
    arguments: String,
    start: f64,
    end: f64,
}

fn kubeadm_runs(log: &str) -> Vec<KubeadmRun> {
    let mut open: BTreeMap<String, KubeadmRun> = BTreeMap::new();
    let mut runs = Vec::new();
    for line in log.lines() {
        let mut fields = line.splitn(5, ' ');
        let (Some(time), Some(node), Some(subcommand), Some(phase)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            panic!("bad kubeadm log line {line:?}")
        };
        let time: f64 = time.parse().unwrap();
        match phase {
            "start" => {
                let run = KubeadmRun {
                    node: node.to_owned(),
                    subcommand: subcommand.to_owned(),
                    arguments: fields.next().unwrap_or_default().to_owned(),
                    start: time,
                    end: f64::NAN,
                };
                assert!(open.insert(node.to_owned(), run).is_none(), "node {node} ran kubeadm twice at once");
            }
            "end" => {
                let mut run = open.remove(node).unwrap_or_else(|| panic!("end without start: {line}"));
                run.end = time;
                runs.push(run);
            }
            other => panic!("bad phase {other:?} in {line:?}"),
        }
    }
    assert!(open.is_empty(), "kubeadm runs that never ended: {open:?}");
    runs.sort_by(|a, b| a.start.total_cmp(&b.start));
    runs
}

async fn finish(name: &str, child: tokio::process::Child) -> (std::process::ExitStatus, String) {
    let output = tokio::time::timeout(Duration::from_secs(240), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{name}'s bootstrap did not finish within 240 s"))
        .unwrap();
    let log = format!(
        "--- {name} stdout:\n{}--- {name} stderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status, log)
}

/// The word after `name` in a logged command line (none of the values here has a space).
fn flag<'a>(arguments: &'a str, name: &str) -> Option<&'a str> {
    let words: Vec<&str> = arguments.split(' ').collect();
    words.iter().position(|word| *word == name).and_then(|position| words.get(position + 1).copied())
}

fn ca_cert_hash(ca_cert: &Path) -> String {
    let public_key = run(Command::new("openssl").args(["x509", "-noout", "-pubkey", "-in"]).arg(ca_cert));
    assert!(public_key.status.success());
    let mut child = Command::new("openssl")
        .args(["pkey", "-pubin", "-outform", "DER"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&public_key.stdout).unwrap();
    let der = child.wait_with_output().unwrap();
    assert!(der.status.success());
    let digest = Sha256::digest(&der.stdout);
    format!("sha256:{}", digest.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_nodes_join_and_upgrade_one_at_a_time_in_order_through_ssm() {
    let moto = MotoServer::start().await;
    let scene = Scene::new();
    // What Terraform publishes before it starts the nodes.
    let authentication_parameter = format!("{SSM_PREFIX}/{AUTHENTICATION_CONFIG}");
    let put_authentication_config = |document: &str| {
        moto.aws(&[
            "ssm",
            "put-parameter",
            "--name",
            &authentication_parameter,
            "--type",
            "String",
            "--tier",
            "Intelligent-Tiering",
            "--overwrite",
            "--value",
            document,
        ]);
    };
    let first_config = authentication_config("https://issuer.example.com");
    put_authentication_config(&first_config);

    // Started in reverse order, so a bootstrap that did not wait for its predecessor would join first.
    let mut children = Vec::new();
    for index in (0..CONTROL_PLANE_NODES).rev() {
        let node = format!("cp{index}");
        let env_file = scene.env_file(&node, "control-plane", Some(index), &moto, 180);
        let child = scene.command("control-plane.sh", &node, &env_file, &moto).spawn().expect("start bash");
        children.push((node, child));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut logs = String::new();
    let mut failed = Vec::new();
    for (node, child) in children {
        let (status, log) = finish(&node, child).await;
        if !status.success() {
            failed.push(format!("{node}: {status}"));
        }
        logs.push_str(&log);
    }
    assert!(failed.is_empty(), "bootstraps failed: {failed:?}\n{logs}");

    let parameter = |name: &str| {
        moto.aws(&["ssm", "get-parameter", "--name", &format!("{SSM_PREFIX}/{name}"), "--with-decryption"])
    };
    let value = |name: &str| -> (String, String) {
        let json: serde_json::Value = serde_json::from_str(&parameter(name)).unwrap();
        (
            json["Parameter"]["Value"].as_str().unwrap().to_owned(),
            json["Parameter"]["Type"].as_str().unwrap().to_owned(),
        )
    };
    let (endpoint, endpoint_type) = value("join/endpoint");
    let (token, token_type) = value("join/token");
    let (hash, hash_type) = value("join/ca-cert-hash");
    let (certificate_key, key_type) = value("control-plane/certificate-key");
    let (kubeconfig, kubeconfig_type) = value("kubeconfig");
    assert_eq!(endpoint, format!("{ENDPOINT_HOST}:6443"));
    assert_eq!((endpoint_type.as_str(), hash_type.as_str()), ("String", "String"));
    assert_eq!(
        (token_type.as_str(), key_type.as_str(), kubeconfig_type.as_str()),
        ("SecureString", "SecureString", "SecureString")
    );
    let (token_id, token_secret) = token.split_once('.').expect("token is id.secret");
    assert!(token_id.len() == 6 && token_secret.len() == 16, "token {token:?}");
    assert!(token.bytes().all(|byte| byte == b'.' || byte.is_ascii_digit() || byte.is_ascii_lowercase()));
    assert!(certificate_key.len() == 64 && certificate_key.bytes().all(|byte| byte.is_ascii_hexdigit()));
    assert_eq!(hash, ca_cert_hash(&scene.ca_cert), "the published CA hash is not the CA certificate's");
    assert!(
        kubeconfig.contains(&format!("server: https://{ENDPOINT_HOST}:6443")) && !kubeconfig.contains("10.0.1.10"),
        "the kubeconfig is not pointed at the advertised endpoint:\n{kubeconfig}"
    );
    assert!(kubeconfig.len() > 4096, "the stand-in kubeconfig should need the advanced tier like a real one");
    for index in 0..CONTROL_PLANE_NODES {
        let (marker, _) = value(&format!("control-plane/{index}/joined"));
        assert_eq!(marker, format!("ip-10-0-1-{}.eu-west-1.compute.internal", 10 + index));
    }

    let log = std::fs::read_to_string(scene.path("kubeadm.log")).expect("kubeadm ran");
    let runs = kubeadm_runs(&log);
    for pair in runs.windows(2) {
        assert!(pair[1].start >= pair[0].end, "kubeadm runs overlapped: {pair:?}\n{log}");
    }
    let order: Vec<(&str, &str)> = runs.iter().map(|run| (run.node.as_str(), run.subcommand.as_str())).collect();
    assert_eq!(order, [("cp0", "init"), ("cp1", "join"), ("cp2", "join"), ("cp3", "join")], "\n{log}");

    let init = &runs[0].arguments;
    assert!(init.split(' ').any(|word| word == "--upload-certs"), "{init}");
    assert_eq!(flag(init, "--control-plane-endpoint"), Some(endpoint.as_str()));
    assert_eq!(flag(init, "--token"), Some(token.as_str()));
    assert_eq!(flag(init, "--certificate-key"), Some(certificate_key.as_str()));
    assert_eq!(flag(init, "--pod-network-cidr"), Some("192.168.0.0/16"));
    assert_eq!(flag(init, "--service-cidr"), Some("10.96.0.0/12"));
    assert_eq!(flag(init, "--apiserver-cert-extra-sans"), Some(ENDPOINT_HOST));
    assert_eq!(flag(init, "--kubernetes-version"), Some("v1.34.0"));
    for run in &runs[1..] {
        let arguments = &run.arguments;
        assert_eq!(flag(arguments, "join"), Some(endpoint.as_str()), "{arguments}");
        assert!(arguments.split(' ').any(|word| word == "--control-plane"), "{arguments}");
        assert_eq!(flag(arguments, "--token"), Some(token.as_str()), "{arguments}");
        assert_eq!(flag(arguments, "--discovery-token-ca-cert-hash"), Some(hash.as_str()), "{arguments}");
        assert_eq!(flag(arguments, "--certificate-key"), Some(certificate_key.as_str()), "{arguments}");
    }

    // Every API server runs with the published authentication configuration: each node wrote it, for root only,
    // and gave kubeadm init or join a patch of the kube-apiserver static pod that adds the flag and mounts its
    // folder.
    let authentication_file = |node: &str| scene.kubernetes_dir(node).join("authentication/config.json");
    for run in &runs {
        let kubernetes_dir = scene.kubernetes_dir(&run.node);
        let patches = kubernetes_dir.join("patches");
        assert_eq!(flag(&run.arguments, "--patches"), Some(patches.to_str().unwrap()), "{}", run.arguments);
        let patch: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(patches.join("kube-apiserver+json.json")).unwrap())
                .expect("the patch is JSON");
        let mount = Path::new(AUTHENTICATION_CONFIG_FILE).parent().unwrap().to_str().unwrap();
        assert_eq!(
            patch,
            serde_json::json!([
                {
                    "op": "add",
                    "path": "/spec/containers/0/command/-",
                    "value": format!("--authentication-config={AUTHENTICATION_CONFIG_FILE}"),
                },
                {
                    "op": "add",
                    "path": "/spec/volumes/-",
                    "value": {
                        "name": "authentication",
                        "hostPath": { "path": kubernetes_dir.join("authentication") },
                    },
                },
                {
                    "op": "add",
                    "path": "/spec/containers/0/volumeMounts/-",
                    "value": { "name": "authentication", "mountPath": mount, "readOnly": true },
                },
            ]),
            "{}",
            run.node
        );
        let file = authentication_file(&run.node);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), first_config, "{}", run.node);
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(file.parent().unwrap()), mode(&file)), (0o700, 0o600), "{}", run.node);
    }

    // Only node 0 installs the add-ons: Calico and the AWS cloud controller manager.
    let kubectl = std::fs::read_to_string(scene.path("kubectl.log")).unwrap();
    let applies: Vec<&str> = kubectl.lines().collect();
    assert_eq!(applies.len(), 2, "{kubectl}");
    assert!(applies.iter().all(|line| line.starts_with("cp0 apply")), "{kubectl}");
    assert!(applies[0].contains("projectcalico/calico/v3.30.3/manifests/calico.yaml"), "{kubectl}");

    // A worker joins with the published credentials, without --control-plane.
    let env_file = scene.env_file("worker", "worker", None, &moto, 30);
    let child = scene.command("worker.sh", "worker", &env_file, &moto).spawn().unwrap();
    let (status, worker_log) = finish("worker", child).await;
    assert!(status.success(), "{worker_log}");
    let runs = kubeadm_runs(&std::fs::read_to_string(scene.path("kubeadm.log")).unwrap());
    let worker = runs.iter().find(|run| run.node == "worker").expect("the worker ran kubeadm");
    assert_eq!(worker.subcommand, "join");
    assert_eq!(flag(&worker.arguments, "join"), Some(endpoint.as_str()));
    assert_eq!(flag(&worker.arguments, "--token"), Some(token.as_str()));
    assert_eq!(flag(&worker.arguments, "--discovery-token-ca-cert-hash"), Some(hash.as_str()));
    assert!(!worker.arguments.contains("--control-plane") && !worker.arguments.contains("--certificate-key"));
    assert!(!worker.arguments.contains("--patches"), "a worker runs no API server: {}", worker.arguments);

    // Every node runs the version it was built with.
    for index in 0..CONTROL_PLANE_NODES {
        assert_eq!(value(&format!("control-plane/{index}/upgraded/1.34")).0, "v1.34.0");
    }

    // Terraform publishes a new version and new issuers; every node's upgrade timer fires (all at once, last node
    // first), each writing the new authentication configuration for its API server to reload.
    let second_config = authentication_config("https://login.example.org/realms/team-a");
    put_authentication_config(&second_config);
    let target = format!("{SSM_PREFIX}/control-plane/upgrade-target");
    moto.aws(&["ssm", "put-parameter", "--name", &target, "--type", "String", "--value", "1.35", "--overwrite"]);
    let upgrade = |index: usize| {
        let node = format!("cp{index}");
        let env_file = scene.path(&format!("{node}/bootstrap.env"));
        let mut command = scene.command("control-plane.sh", &node, &env_file, &moto);
        command.arg("upgrade").env("STANDIN_KUBEADM_VERSION", "v1.35.0");
        (node, command.spawn().expect("start bash"))
    };
    let mut upgrades = Vec::new();
    for index in (0..CONTROL_PLANE_NODES).rev() {
        upgrades.push(upgrade(index));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for (node, child) in upgrades {
        let (status, log) = finish(&node, child).await;
        assert!(
            status.success(),
            "{node}'s upgrade failed
{log}"
        );
    }
    let log = std::fs::read_to_string(scene.path("kubeadm.log")).unwrap();
    let runs: Vec<KubeadmRun> = kubeadm_runs(&log).into_iter().filter(|run| run.subcommand == "upgrade").collect();
    for pair in runs.windows(2) {
        assert!(pair[1].start >= pair[0].end, "kubeadm upgrades overlapped: {pair:?}\n{log}");
    }
    // With the same patch as init and join: kubeadm writes the API server's manifest anew.
    let patches = |node: &str| scene.kubernetes_dir(node).join("patches").display().to_string();
    let order: Vec<(&str, &str)> = runs.iter().map(|run| (run.node.as_str(), run.arguments.as_str())).collect();
    assert_eq!(
        order,
        [
            ("cp0", format!("upgrade apply v1.35.0 --yes --patches {}", patches("cp0")).as_str()),
            ("cp1", format!("upgrade node --patches {}", patches("cp1")).as_str()),
            ("cp2", format!("upgrade node --patches {}", patches("cp2")).as_str()),
            ("cp3", format!("upgrade node --patches {}", patches("cp3")).as_str())
        ],
        "\n{log}"
    );
    for index in 0..CONTROL_PLANE_NODES {
        assert_eq!(value(&format!("control-plane/{index}/upgraded/1.35")).0, "v1.35.0");
        assert_eq!(std::fs::read_to_string(authentication_file(&format!("cp{index}"))).unwrap(), second_config);
    }
    // Node 0 published the admin kubeconfig kubeadm renewed with the upgrade (`uuu…` in base64).
    let (upgraded_kubeconfig, _) = value("kubeconfig");
    assert!(upgraded_kubeconfig.contains("dXV1dXV1"), "{upgraded_kubeconfig}");
    assert!(upgraded_kubeconfig.contains(&format!("server: https://{ENDPOINT_HOST}:6443")));
    // The next timer run finds nothing to do.
    let (node, child) = upgrade(0);
    let (status, again) = finish(&node, child).await;
    assert!(status.success(), "{again}");
    let upgrades_now = kubeadm_runs(&std::fs::read_to_string(scene.path("kubeadm.log")).unwrap())
        .into_iter()
        .filter(|run| run.subcommand == "upgrade")
        .count();
    assert_eq!(upgrades_now, CONTROL_PLANE_NODES, "an upgrade ran twice:\n{again}");
    // Nor does it rewrite an unchanged authentication configuration; and one it cannot read stays as it is.
    assert!(!again.contains("wrote "), "{again}");
    moto.aws(&["ssm", "delete-parameter", "--name", &authentication_parameter]);
    let (node, child) = upgrade(0);
    let (status, unreadable) = finish(&node, child).await;
    assert!(status.success(), "{unreadable}");
    assert_eq!(std::fs::read_to_string(authentication_file("cp0")).unwrap(), second_config, "{unreadable}");

    // The second minor of a chained upgrade (1.34, 1.35, now 1.36): node 0's kubeadm fails, so no node moves on and
    // every node keeps its marker of the minor before; once it passes (the retry's run), the minor goes through as
    // the first did, one node after the other.
    moto.aws(&["ssm", "put-parameter", "--name", &target, "--type", "String", "--value", "1.36", "--overwrite"]);
    let second_minor = |index: usize, fails: bool| {
        let node = format!("cp{index}");
        let env_file = scene.path(&format!("{node}/bootstrap.env"));
        let mut command = scene.command("control-plane.sh", &node, &env_file, &moto);
        command.arg("upgrade").env("STANDIN_KUBEADM_VERSION", "v1.36.0");
        if fails {
            command.env("STANDIN_KUBEADM_FAILS", "upgrade");
        }
        (node, command.spawn().expect("start bash"))
    };
    let (node, child) = second_minor(0, true);
    let (status, failed) = finish(&node, child).await;
    assert!(!status.success() && failed.contains("the stand-in fails upgrade"), "{failed}");
    let unpublished = |index: usize| {
        let marker = format!("{SSM_PREFIX}/control-plane/{index}/upgraded/1.36");
        !moto.aws_command().args(["ssm", "get-parameter", "--name", &marker]).output().unwrap().status.success()
    };
    for index in 0..CONTROL_PLANE_NODES {
        assert!(unpublished(index), "node {index} says it runs the minor that failed");
        assert_eq!(value(&format!("control-plane/{index}/upgraded/1.35")).0, "v1.35.0");
    }
    let mut retries = Vec::new();
    for index in (0..CONTROL_PLANE_NODES).rev() {
        retries.push(second_minor(index, false));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for (node, child) in retries {
        let (status, log) = finish(&node, child).await;
        assert!(status.success(), "{node}'s upgrade to 1.36 failed\n{log}");
    }
    let log = std::fs::read_to_string(scene.path("kubeadm.log")).unwrap();
    let minors: Vec<(String, String)> = kubeadm_runs(&log)
        .into_iter()
        .filter(|run| run.arguments.starts_with("upgrade apply"))
        .map(|run| (run.node, run.arguments.split(' ').nth(2).unwrap_or_default().to_owned()))
        .collect();
    let expected =
        [("cp0", "v1.35.0"), ("cp0", "v1.36.0"), ("cp0", "v1.36.0")].map(|(n, v)| (n.to_owned(), v.to_owned()));
    assert_eq!(minors, expected, "one kubeadm upgrade apply per minor, the failed one run again\n{log}");
    for index in 0..CONTROL_PLANE_NODES {
        assert_eq!(value(&format!("control-plane/{index}/upgraded/1.36")).0, "v1.36.0");
    }

    // Every node says it runs, on its machine type; after a boot on a new one (a machine type change), once its API
    // server is ready, it says so again.
    for index in 0..CONTROL_PLANE_NODES {
        assert_eq!(
            value(&format!("control-plane/{index}/running/m6i.large")).0,
            format!("ip-10-0-1-{}.eu-west-1.compute.internal", 10 + index)
        );
    }
    let env_file = scene.path("cp1/bootstrap.env");
    let settings =
        std::fs::read_to_string(&env_file).unwrap().replace("INSTANCE_TYPE='m6i.large'", "INSTANCE_TYPE='m6i.xlarge'");
    std::fs::write(&env_file, settings).unwrap();
    let mut command = scene.command("control-plane.sh", "cp1", &env_file, &moto);
    let ready = scene.path("cp1/ready");
    let child = command.arg("report-ready").env("STANDIN_READY", &ready).spawn().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let marker = format!("{SSM_PREFIX}/control-plane/1/running/m6i.xlarge");
    let early = moto.aws_command().args(["ssm", "get-parameter", "--name", &marker]).output().unwrap();
    assert!(!early.status.success(), "published before the API server was ready");
    std::fs::write(&ready, "").unwrap();
    let (status, reported) = finish("cp1", child).await;
    assert!(status.success(), "{reported}");
    assert_eq!(value("control-plane/1/running/m6i.xlarge").0, "ip-10-0-1-11.eu-west-1.compute.internal");

    // A node whose predecessor never joins gives up after its timeout, without running kubeadm.
    let env_file = scene.env_file("cp9", "control-plane", Some(9), &moto, 2);
    let child = scene.command("control-plane.sh", "cp9", &env_file, &moto).spawn().unwrap();
    let (status, stuck_log) = finish("cp9", child).await;
    assert!(!status.success(), "{stuck_log}");
    assert!(stuck_log.contains(&format!("gave up waiting for {SSM_PREFIX}/control-plane/8/joined")), "{stuck_log}");
    let runs = kubeadm_runs(&std::fs::read_to_string(scene.path("kubeadm.log")).unwrap());
    assert!(runs.iter().all(|run| run.node != "cp9"), "the stuck node ran kubeadm");
}

/// Bootstraps the four control-plane nodes at once, as their instances would start after Terraform published
/// their authentication configuration; every one must succeed.
async fn bootstrap_control_plane(scene: &Scene, moto: &MotoServer) {
    let parameter = format!("{SSM_PREFIX}/{AUTHENTICATION_CONFIG}");
    let document = authentication_config("https://issuer.example.com");
    moto.aws(&["ssm", "put-parameter", "--name", &parameter, "--type", "String", "--value", &document]);
    let mut children = Vec::new();
    for index in (0..CONTROL_PLANE_NODES).rev() {
        let node = format!("cp{index}");
        let env_file = scene.env_file(&node, "control-plane", Some(index), moto, 180);
        children.push((node.clone(), scene.command("control-plane.sh", &node, &env_file, moto).spawn().unwrap()));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    finish_all("bootstrap", children).await;
}

/// Waits for every node's script; fails with all their logs when one failed.
async fn finish_all(what: &str, children: Vec<(String, tokio::process::Child)>) {
    let (mut failed, mut logs) = (Vec::new(), String::new());
    for (node, child) in children {
        let (status, log) = finish(&node, child).await;
        if !status.success() {
            failed.push(node);
        }
        logs.push_str(&log);
    }
    assert!(failed.is_empty(), "{what}s failed: {failed:?}\n{logs}");
}

/// When each node's kube-apiserver manifest left its folder and came back, as the kubelet would see it (polled
/// every 20 ms).
fn watch_static_pods(
    scene: &Scene,
) -> (tokio::task::JoinHandle<BTreeMap<String, Vec<bool>>>, tokio::sync::watch::Sender<bool>) {
    let manifests: Vec<(String, PathBuf)> = (0..CONTROL_PLANE_NODES)
        .map(|index| {
            let node = format!("cp{index}");
            let manifest = scene.kubernetes_dir(&node).join("manifests/kube-apiserver.yaml");
            (node, manifest)
        })
        .collect();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let watching = tokio::spawn(async move {
        let mut seen: BTreeMap<String, Vec<bool>> = BTreeMap::new();
        while !*stopped.borrow() {
            for (node, manifest) in &manifests {
                let states = seen.entry(node.clone()).or_default();
                let present = manifest.exists();
                if states.last() != Some(&present) {
                    states.push(present);
                }
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
                _ = stopped.changed() => {}
            }
        }
        seen
    });
    (watching, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_nodes_renew_their_certificates_one_at_a_time_and_node_0_publishes_the_renewed_kubeconfig() {
    let moto = MotoServer::start().await;
    let scene = Scene::new();
    bootstrap_control_plane(&scene, &moto).await;
    let value = |name: &str| -> String {
        let answer =
            moto.aws(&["ssm", "get-parameter", "--name", &format!("{SSM_PREFIX}/{name}"), "--with-decryption"]);
        let json: serde_json::Value = serde_json::from_str(&answer).unwrap();
        json["Parameter"]["Value"].as_str().unwrap().to_owned()
    };
    let renewed_certificate = "cnJycnJy";
    assert!(!value("kubeconfig").contains(renewed_certificate));
    for index in 0..CONTROL_PLANE_NODES {
        // Each node says it takes renewals; its static pods are the kubelet's manifests.
        assert_eq!(
            value(&format!("control-plane/{index}/renews-certificates")),
            format!("ip-10-0-1-{}.eu-west-1.compute.internal", 10 + index)
        );
        let manifests = scene.kubernetes_dir(&format!("cp{index}")).join("manifests");
        std::fs::create_dir_all(&manifests).unwrap();
        for name in ["kube-apiserver.yaml", "etcd.yaml"] {
            std::fs::write(manifests.join(name), name).unwrap();
        }
    }

    // terraform-runner asks for a renewal; every node's timer fires at once, last node first.
    let request = format!("{SSM_PREFIX}/control-plane/certificates-renewal");
    moto.aws(&[
        "ssm",
        "put-parameter",
        "--name",
        &request,
        "--type",
        "String",
        "--value",
        "0192f0c0-renewal",
        "--overwrite",
    ]);
    let (watching, stop_watching) = watch_static_pods(&scene);
    let timer_run = |index: usize| {
        let node = format!("cp{index}");
        let env_file = scene.path(&format!("{node}/bootstrap.env"));
        let mut command = scene.command("control-plane.sh", &node, &env_file, &moto);
        // The node's API server answers once its manifest is back.
        let manifest = scene.kubernetes_dir(&node).join("manifests/kube-apiserver.yaml");
        command.arg("upgrade").env("STATIC_POD_STOP_SECONDS", "0.3").env("STANDIN_READY", manifest);
        (node, command.spawn().unwrap())
    };
    let mut runs = Vec::new();
    for index in (0..CONTROL_PLANE_NODES).rev() {
        runs.push(timer_run(index));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    finish_all("renewal", runs).await;
    let _ = stop_watching.send(true);
    let static_pods = watching.await.unwrap();

    // One node at a time, in order, each its static pods stopped and started again.
    let log = std::fs::read_to_string(scene.path("kubeadm.log")).unwrap();
    let renewals: Vec<KubeadmRun> = kubeadm_runs(&log).into_iter().filter(|run| run.subcommand == "certs").collect();
    let order: Vec<(&str, &str)> = renewals.iter().map(|run| (run.node.as_str(), run.arguments.as_str())).collect();
    let expected: Vec<(String, &str)> =
        (0..CONTROL_PLANE_NODES).map(|index| (format!("cp{index}"), "certs renew all")).collect();
    let expected: Vec<(&str, &str)> = expected.iter().map(|(node, arguments)| (node.as_str(), *arguments)).collect();
    assert_eq!(order, expected, "\n{log}");
    for pair in renewals.windows(2) {
        assert!(pair[1].start >= pair[0].end, "renewals overlapped: {pair:?}");
    }
    for index in 0..CONTROL_PLANE_NODES {
        let node = format!("cp{index}");
        assert_eq!(static_pods[&node], [true, false, true], "{node}'s API server was not restarted once");
        let manifests = scene.kubernetes_dir(&node).join("manifests");
        assert!(manifests.join("etcd.yaml").exists(), "{node}'s etcd manifest is back");
        assert!(value(&format!("control-plane/{index}/renewed/0192f0c0-renewal")).ends_with('Z'));
    }
    // Node 0 published the renewed admin kubeconfig, pointed at the advertised endpoint as before.
    let kubeconfig = value("kubeconfig");
    assert!(kubeconfig.contains(renewed_certificate), "{kubeconfig}");
    assert!(kubeconfig.contains(&format!("server: https://{ENDPOINT_HOST}:6443")));

    // The next timer run finds nothing to renew.
    let (node, child) = timer_run(0);
    let (status, again) = finish(&node, child).await;
    assert!(status.success(), "{again}");
    let renewals = kubeadm_runs(&std::fs::read_to_string(scene.path("kubeadm.log")).unwrap())
        .into_iter()
        .filter(|run| run.subcommand == "certs")
        .count();
    assert_eq!(renewals, CONTROL_PLANE_NODES, "a renewal ran twice:\n{again}");
}
