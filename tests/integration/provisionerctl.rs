//! provisionerctl against the service: the engine on the test control plane serves its REST API on a loopback
//! port, the stand-in runner plays the Jobs, and the command-line client takes a cluster from create to
//! kubeconfig to delete; refusals, outages, a wrong command line and a wait that runs out have their exit codes.
//! Which token reaches which server is seen by the server: a kubeconfig's token only when asked for, the config
//! file's only at its own server, none over plain HTTP to another machine.

use std::path::Path;

use serde_json::Value;
use test_support::engine::Engine;
use test_support::{Backend, provision_body};

use crate::provisionerctl_support::{Seen, recording_server, serve};

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";

/// Runs `provisionerctl --server <server> <args>`; returns its exit code, output and errors, and shows the
/// session (the closing note's transcript comes from `--nocapture`).
async fn ctl(server: &str, args: &[&str]) -> (u8, String, String) {
    // Authentication is off here: the token is given only so that no config file of the machine is read.
    let mut argv = vec!["provisionerctl", "--server", server, "--token", "unused"];
    argv.extend_from_slice(args);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = provisionerctl::run_args(argv, &mut out, &mut err).await;
    let (out, err) = (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap());
    eprintln!("$ provisionerctl {}\n{out}{err}(exit {code})", args.join(" "));
    (code, out, err)
}

#[tokio::test]
async fn provisionerctl_takes_a_cluster_from_create_to_kubeconfig_to_delete() {
    let (engine, _process) = Engine::start(Backend::Sqlite, &[]).await;
    let server = serve(engine.app.app.router.clone()).await;
    let folder = tempfile::tempdir().unwrap();
    let request = folder.path().join("request.json");
    std::fs::write(&request, provision_body("ctl-cluster").to_string()).unwrap();
    let request = request.display().to_string();

    let (code, created, err) = ctl(&server, &["create", "-f", &request]).await;
    assert_eq!(code, 0, "{err}");
    assert!(created.starts_with("ID ") && created.contains("provision"), "{created}");
    let (code, listed, _) = ctl(&server, &["get", "runtimes", "-o", "json"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let runtime = listed["runtimes"].as_array().unwrap().iter().find(|runtime| runtime["name"] == "ctl-cluster");
    let runtime_id = runtime.expect("the runtime is listed")["id"].as_str().unwrap().to_owned();

    let outputs = format!("provision-{runtime_id}-outputs");
    engine.runner_succeeds(&format!("provision-{runtime_id}"), Some((&outputs, KUBECONFIG))).await;
    let wait_for = |state| ["wait", "--for", state, "--timeout", "60s", "--interval", "200ms", runtime_id.as_str()];
    let (code, _, progress) = ctl(&server, &wait_for("state=Ready")).await;
    assert_eq!(code, 0, "{progress}");
    assert!(progress.contains("Ready after"), "{progress}");
    let (code, table, _) = ctl(&server, &["get", "runtimes"]).await;
    let row = table.lines().find(|line| line.starts_with("ctl-cluster")).unwrap_or_else(|| panic!("{table}"));
    assert_eq!((code, row.split_whitespace().nth(2)), (0, Some("Ready")), "{table}");
    let (code, described, _) = ctl(&server, &["describe", &runtime_id]).await;
    assert_eq!(code, 0);
    assert!(described.contains("state: Ready") && described.contains("\nOperations:\nID "), "{described}");
    let (code, kubeconfig, _) = ctl(&server, &["kubeconfig", &runtime_id]).await;
    assert_eq!((code, kubeconfig.as_str()), (0, KUBECONFIG));
    // A kubeconfig without a credential of its own has nothing to rotate (a minted one: kubeconfig_lifetime.rs).
    let (code, _, refused) = ctl(&server, &["rotate-kubeconfig", &runtime_id]).await;
    assert_eq!(code, provisionerctl::exit::REFUSED, "{refused}");
    assert!(refused.contains("holds no credential"), "{refused}");
    // A vanilla runtime's certificates renewed: an operation of its own, followed like any.
    let (code, renewing, err) = ctl(&server, &["renew-certificates", &runtime_id]).await;
    assert_eq!(code, 0, "{err}");
    assert!(renewing.contains("renew_certificates"), "{renewing}");
    engine.runner_succeeds(&format!("renewal-{runtime_id}"), Some((&outputs, KUBECONFIG))).await;
    let (code, _, progress) = ctl(&server, &wait_for("state=Ready")).await;
    assert_eq!(code, 0, "{progress}");

    let (code, deleting, err) = ctl(&server, &["delete", &runtime_id]).await;
    assert_eq!(code, 0, "{err}");
    assert!(deleting.contains("deprovision"), "{deleting}");
    engine.runner_succeeds(&format!("deprovision-{runtime_id}"), None).await;
    let (code, _, progress) = ctl(&server, &wait_for("state=Deleted")).await;
    assert_eq!(code, 0, "{progress}");
    let (code, history, _) = ctl(&server, &["operations", &runtime_id, "-o", "yaml"]).await;
    assert_eq!(code, 0);
    assert!(history.contains("operation: deprovision") && history.contains("operation: provision"), "{history}");

    // Each failure has its exit code.
    let (code, _, refused) = ctl(&server, &["get", "runtime", "0190b8a6-0000-7000-8000-00000000dead"]).await;
    assert_eq!(code, provisionerctl::exit::REFUSED, "{refused}");
    assert!(refused.starts_with("Error from server (404)"), "{refused}");
    let (code, _, local) = ctl(&server, &["get", "runtime", "../../metrics"]).await;
    assert_eq!(code, provisionerctl::exit::LOCAL, "{local}");
    let (code, _, unreachable) = ctl("http://127.0.0.1:1", &["get", "runtimes"]).await;
    assert_eq!(code, provisionerctl::exit::UNAVAILABLE, "{unreachable}");
    let (code, _, usage) = ctl(&server, &["frobnicate"]).await;
    assert_eq!(code, provisionerctl::exit::USAGE, "{usage}");
    std::fs::write(folder.path().join("request.json"), provision_body("ctl-waiting").to_string()).unwrap();
    let (code, queued, _) = ctl(&server, &["create", "-f", &request]).await;
    assert_eq!(code, 0);
    let provisioning = queued.lines().nth(1).and_then(|row| row.split_whitespace().next()).unwrap().to_owned();
    let (_, listed, _) = ctl(&server, &["get", "runtimes", "--state", "Provisioning", "-o", "json"]).await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let waiting = listed["runtimes"][0]["id"].as_str().unwrap().to_owned();
    let short = ["wait", "--for", "state=Ready", "--timeout", "1s", "--interval", "200ms", waiting.as_str()];
    let (code, _, still) = ctl(&server, &short).await;
    assert_eq!(code, provisionerctl::exit::NOT_REACHED, "{still}");
    assert!(still.contains("is still Provisioning after 1s"), "{still}");
    let (code, cancelled, err) = ctl(&server, &["cancel", &provisioning, "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    let cancelled: Value = serde_json::from_str(&cancelled).unwrap();
    assert_eq!(cancelled["operationId"], provisioning.as_str(), "{cancelled}");
}

/// A digest of the stand-in runner's saved plan.
fn digest(fill: char) -> String {
    fill.to_string().repeat(64)
}

/// The stand-in runner's report of a plan it saved for approval.
fn waiting_report(sha: &str) -> String {
    let mut report: Value = serde_json::from_str(test_support::engine::RUNNER_PLAN_SUMMARY).unwrap();
    report["savedPlanSha256"] = serde_json::json!(sha);
    report.to_string()
}

/// Day two from the command line: a provisioning whose plan waits is approved by its digest (a wrong one refused),
/// the runner's log is printed, an upgrade's waiting plan is rejected and the failed upgrade retried.
#[tokio::test]
async fn provisionerctl_approves_a_plan_prints_its_log_rejects_an_upgrade_and_retries_it() {
    const WAIT: std::time::Duration = std::time::Duration::from_secs(60);
    let (engine, _process) = Engine::start(Backend::Sqlite, &[]).await;
    let server = serve(engine.app.app.router.clone()).await;
    let folder = tempfile::tempdir().unwrap();
    let mut body = provision_body("ctl-gated");
    body["runtimeInput"]["approvalPolicy"] = serde_json::json!("manual");
    let request = folder.path().join("request.json");
    std::fs::write(&request, body.to_string()).unwrap();
    let (code, created, err) = ctl(&server, &["create", "-f", &request.display().to_string(), "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(&created).unwrap();
    let (runtime_id, provisioning) =
        (created["runtimeId"].as_str().unwrap().to_owned(), created["id"].as_str().unwrap().to_owned());
    let job = format!("provision-{runtime_id}");
    engine.wait_for_stage(&provisioning, "WaitForJob", WAIT).await;
    engine.runner_exits(&job, 0, &waiting_report(&digest('c'))).await;
    engine.wait_for_stage(&provisioning, "AwaitingApproval", WAIT).await;

    let (code, _, refused) = ctl(&server, &["approve", &provisioning, "--plan-sha256", &digest('d')]).await;
    assert_eq!(code, provisionerctl::exit::REFUSED, "{refused}");
    let (code, approved, err) = ctl(&server, &["approve", &provisioning, "--plan-sha256", &digest('c')]).await;
    assert_eq!(code, 0, "{err}");
    assert!(approved.contains(&provisioning), "{approved}");
    engine.wait_for_stage(&provisioning, "WaitForJob", WAIT).await;
    engine.publish_outputs(&format!("{job}-outputs"), KUBECONFIG).await;
    let printed =
        "Plan: 3 to add, 0 to change, 0 to destroy.\nApply complete! Resources: 3 added, 0 changed, 0 destroyed.\n";
    let report = test_support::engine::runner_report(Some(KUBECONFIG));
    engine.runner_prints_and_exits(&format!("{job}-approved"), &[("terraform-runner", printed)], 0, &report).await;
    let wait_ready = ["wait", "--for", "state=Ready", "--timeout", "60s", "--interval", "200ms", runtime_id.as_str()];
    let (code, _, progress) = ctl(&server, &wait_ready).await;
    assert_eq!(code, 0, "{progress}");
    let (code, log, err) = ctl(&server, &["logs", &provisioning]).await;
    assert_eq!(code, 0, "{err}");
    assert!(log.contains("Apply complete! Resources: 3 added"), "{log}");

    let change = folder.path().join("change.yaml");
    std::fs::write(&change, "workerPool:\n  maxSize: 9\n").unwrap();
    let (code, upgraded, err) =
        ctl(&server, &["upgrade", &runtime_id, "-f", &change.display().to_string(), "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    let upgrading = serde_json::from_str::<Value>(&upgraded).unwrap()["id"].as_str().unwrap().to_owned();
    engine.wait_for_stage(&upgrading, "WaitForJob", WAIT).await;
    engine.runner_exits(&format!("upgrade-{runtime_id}"), 0, &waiting_report(&digest('e'))).await;
    engine.wait_for_stage(&upgrading, "AwaitingApproval", WAIT).await;
    let (code, rejected, err) = ctl(&server, &["reject", &upgrading, "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&rejected).unwrap()["status"], "failed", "{rejected}");
    let (code, retried, err) = ctl(&server, &["retry", &upgrading, "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    let retried: Value = serde_json::from_str(&retried).unwrap();
    assert_eq!(retried["operation"], "upgrade", "{retried}");
    assert_ne!(retried["id"], upgrading.as_str(), "a new operation: {retried}");
}

/// A kubeconfig whose current context's user has a token (a cloud's, which belongs to its cluster only), beside
/// the user `ops`.
const KUBECONFIG_WITH_TOKENS: &str = "apiVersion: v1\nkind: Config\ncurrent-context: gke\nclusters:\n- name: gke\n  cluster:\n    server: https://gke.example\ncontexts:\n- name: gke\n  context:\n    cluster: gke\n    user: gke\nusers:\n- name: gke\n  user:\n    token: gke-cloud-token\n- name: ops\n  user:\n    token: ops-token\n";

/// A folder with the kubeconfig above and an empty home: no file of the machine is read.
fn files(folder: &Path) -> provisionerctl::Locations {
    std::fs::create_dir_all(folder.join("home")).unwrap();
    std::fs::write(folder.join("kubeconfig"), KUBECONFIG_WITH_TOKENS).unwrap();
    provisionerctl::Locations {
        kubeconfig: Some(folder.join("kubeconfig").into_os_string()),
        config: None,
        home: Some(folder.join("home")),
    }
}

/// provisionerctl's own config file, whose current context sends the user `operator`'s token to `server`.
fn own_config(folder: &Path, server: &str) -> std::path::PathBuf {
    let config = format!(
        "current-context: provisioner\nclusters:\n- name: provisioner\n  cluster:\n    server: {server}\ncontexts:\n- \
         name: provisioner\n  context:\n    cluster: provisioner\n    user: operator\nusers:\n- name: operator\n  \
         user:\n    token: config-token\n"
    );
    std::fs::write(folder.join("config"), config).unwrap();
    folder.join("config")
}

/// Runs `provisionerctl <args>` with the files at `locations`; returns its exit code and errors.
async fn ctl_with(locations: &provisionerctl::Locations, args: &[&str]) -> (u8, String) {
    let argv = std::iter::once("provisionerctl").chain(args.iter().copied());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = provisionerctl::run_args_in(locations, argv, &mut out, &mut err).await;
    let err = String::from_utf8(err).unwrap();
    eprintln!("$ provisionerctl {}\n{}{err}(exit {code})", args.join(" "), String::from_utf8_lossy(&out));
    (code, err)
}

fn seen(recorded: &Seen) -> Vec<Option<String>> {
    recorded.lock().unwrap().clone()
}

#[tokio::test]
async fn provisionerctl_sends_no_token_of_the_kubeconfigs_current_context_unasked() {
    let (_app, server, recorded) = recording_server().await;
    let folder = tempfile::tempdir().unwrap();
    let (code, err) = ctl_with(&files(folder.path()), &["--server", &server, "get", "runtimes"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(seen(&recorded), [None]);
}

#[tokio::test]
async fn provisionerctl_sends_the_token_of_the_kubeconfig_user_it_is_told() {
    let (_app, server, recorded) = recording_server().await;
    let folder = tempfile::tempdir().unwrap();
    let args = ["--server", &server, "--kubeconfig-user", "ops", "get", "runtimes"];
    let (code, err) = ctl_with(&files(folder.path()), &args).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(seen(&recorded), [Some("Bearer ops-token".to_owned())]);
}

#[tokio::test]
async fn provisionerctl_sends_its_config_files_token_to_the_config_files_server() {
    let (_app, server, recorded) = recording_server().await;
    let folder = tempfile::tempdir().unwrap();
    let locations =
        provisionerctl::Locations { config: Some(own_config(folder.path(), &server)), ..files(folder.path()) };
    let (code, err) = ctl_with(&locations, &["get", "runtimes"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(seen(&recorded), [Some("Bearer config-token".to_owned())]);
}

#[tokio::test]
async fn provisionerctl_keeps_the_config_files_token_from_another_server() {
    let (_app, server, recorded) = recording_server().await;
    let folder = tempfile::tempdir().unwrap();
    let config = own_config(folder.path(), "http://127.0.0.1:1");
    let locations = provisionerctl::Locations { config: Some(config), ..files(folder.path()) };
    let (code, err) = ctl_with(&locations, &["--server", &server, "get", "runtimes"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(seen(&recorded), [None]);
    assert_eq!(err.matches("no token sent").count(), 1, "{err}");
    assert!(!err.contains("config-token"), "{err}");
}

/// The provisionerctl binary in a process of its own with `environment` (its variables are read as a user's
/// shell gives them, and no other test sees them); returns whether it succeeded.
async fn ctl_in_own_process(args: &[&str], home: &Path, environment: &[(&str, &Path)]) -> bool {
    let mut child = tokio::process::Command::new(crate::provisionerctl_support::binary());
    child.args(args);
    for variable in ["PROVISIONER_TOKEN", "PROVISIONER_TOKEN_FILE", "PROVISIONER_SERVER", "PROVISIONERCTL_CONFIG"] {
        child.env_remove(variable);
    }
    child.env("HOME", home).env_remove("KUBECONFIG");
    child.envs(environment.iter().copied());
    child.kill_on_drop(true).status().await.unwrap().success()
}

/// `PROVISIONER_TOKEN_FILE` names the token's file, read again on each run as a projected ServiceAccount token
/// rotates; `--token-file` names another, and `PROVISIONER_TOKEN` comes first, as in `e2e_test/test.sh`.
#[tokio::test]
async fn provisionerctl_sends_the_token_of_provisioner_token_file_as_it_is_on_each_run() {
    let (_app, server, recorded) = recording_server().await;
    let folder = tempfile::tempdir().unwrap();
    let (file, other) = (folder.path().join("token"), folder.path().join("other"));
    std::fs::write(&other, "flag-token\n").unwrap();
    let variable = [("PROVISIONER_TOKEN_FILE", file.as_path())];
    let list = ["--server", &server, "get", "runtimes"];
    for token in ["first-token\n", "rotated-token"] {
        std::fs::write(&file, token).unwrap();
        assert!(ctl_in_own_process(&list, folder.path(), &variable).await);
    }
    let flag = [&list[..], &["--token-file", other.to_str().unwrap()]].concat();
    assert!(ctl_in_own_process(&flag, folder.path(), &variable).await);
    let token = [("PROVISIONER_TOKEN", Path::new("given-token")), variable[0]];
    assert!(ctl_in_own_process(&list, folder.path(), &token).await);
    let bearer = |token: &str| Some(format!("Bearer {token}"));
    let sent = [bearer("first-token"), bearer("rotated-token"), bearer("flag-token"), bearer("given-token")];
    assert_eq!(seen(&recorded), sent);
}

/// The name never resolves, so nothing would leave the machine even without the check; the refusal is local (exit
/// 1, not 4 for a server that cannot be reached) and comes before any connection.
#[tokio::test]
async fn provisionerctl_refuses_to_send_a_token_over_plain_http_to_another_machine() {
    provisioner::install_crypto_provider();
    let folder = tempfile::tempdir().unwrap();
    let locations = files(folder.path());
    let args = ["--server", "http://provisioner.invalid:3000", "--token", "given-token", "get", "runtimes"];
    let (code, err) = ctl_with(&locations, &args).await;
    assert_eq!(code, provisionerctl::exit::LOCAL, "{err}");
    assert!(err.contains("--allow-plain-http") && err.contains("http://provisioner.invalid:3000"), "{err}");
    assert!(!err.contains("given-token"), "{err}");
    let allowed = [&args[..], &["--allow-plain-http"]].concat();
    let (code, err) = ctl_with(&locations, &allowed).await;
    assert_eq!(code, provisionerctl::exit::UNAVAILABLE, "allowed, it tries to connect: {err}");
}
