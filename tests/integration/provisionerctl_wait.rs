//! provisionerctl waits as `kubectl wait` does (issue #54 item 4): `create --wait` until the runtime is Ready,
//! `delete --wait` until it is Deleted, `wait --for condition=...`, `--for delete` and `--for jsonpath=...`, each
//! bounded by `--timeout`; `logs` prints a runtime's last run log as an operation's; the engine on the test control plane runs the operations and the stand-in runner plays
//! the Jobs meanwhile.

use std::time::Duration;

use test_support::engine::{Engine, runner_report};
use test_support::{Backend, provision_body};

use crate::provisionerctl_support::{ctl, request_file, serve};

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";
const FAST: [&str; 4] = ["--timeout", "60s", "--interval", "200ms"];

/// The ids of the runtime named `name` and of its last operation, once the service has recorded it.
async fn runtime_named(engine: &Engine, name: &str) -> (String, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let listed = engine.app.request("GET", &format!("/api/v1/runtimes?name={name}"), None, &[]).await.json();
        let runtime = &listed["runtimes"][0];
        if let (Some(id), Some(operation)) = (runtime["id"].as_str(), runtime["lastOperation"]["id"].as_str()) {
            return (id.to_owned(), operation.to_owned());
        }
        assert!(tokio::time::Instant::now() < deadline, "{name} was never created");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn provisionerctl_creates_and_deletes_with_wait_waits_for_conditions_and_prints_a_runtimes_log() {
    let (engine, _process) = Engine::start(Backend::Sqlite, &[]).await;
    let server = serve(engine.app.app.router.clone()).await;
    let folder = tempfile::tempdir().unwrap();
    let request = request_file(folder.path(), "waited", &provision_body("ctl-waited"));

    let create = [&["create", "-f", request.as_str(), "--wait", "-o", "name"][..], &FAST].concat();
    let runner = async {
        let (id, provisioning) = runtime_named(&engine, "ctl-waited").await;
        engine.wait_for_stage(&provisioning, "WaitForJob", Duration::from_secs(60)).await;
        let job = format!("provision-{id}");
        engine.publish_outputs(&format!("{job}-outputs"), KUBECONFIG).await;
        let printed = "Apply complete! Resources: 3 added, 0 changed, 0 destroyed.\n";
        let report = runner_report(Some(KUBECONFIG));
        engine.runner_prints_and_exits(&job, &[("terraform-runner", printed)], 0, &report).await;
        (id, provisioning)
    };
    let ((code, created, progress), (id, provisioning)) = tokio::join!(ctl(&server, &create), runner);
    assert_eq!(code, 0, "{progress}");
    assert!(created.starts_with("operation/"), "{created}");
    assert!(progress.contains(&format!("{id}: Ready after")), "{progress}");
    for target in [format!("runtime/{id}"), id.clone(), format!("operation/{provisioning}"), provisioning.clone()] {
        let (code, log, err) = ctl(&server, &["logs", &target]).await;
        assert_eq!(code, 0, "{target}: {err}");
        assert!(log.contains("Apply complete! Resources: 3 added"), "{target}: {log}");
    }
    let (code, _, refused) = ctl(&server, &["logs", "pod/ctl-waited"]).await;
    assert!(code == provisionerctl::exit::LOCAL && refused.contains("none of runtime/ID, operation/ID or ID"));

    for condition in
        ["condition=Ready", "condition=Provisioned", "condition=Progressing=False", "jsonpath={.state}=Ready"]
    {
        let (code, _, progress) = ctl(&server, &[&["wait", id.as_str(), "--for", condition][..], &FAST].concat()).await;
        assert_eq!(code, 0, "{condition}: {progress}");
    }
    let short = ["wait", id.as_str(), "--for", "condition=Progressing", "--timeout", "1s", "--interval", "200ms"];
    let (code, _, still) = ctl(&server, &short).await;
    assert_eq!(code, provisionerctl::exit::NOT_REACHED, "{still}");
    assert!(still.contains("is still Ready after 1s"), "{still}");
    let (code, _, refused) = ctl(&server, &["wait", id.as_str(), "--for", "condition=Ready=maybe"]).await;
    assert!(code == provisionerctl::exit::USAGE && refused.contains("condition=<type>[=True|False]"), "{refused}");

    let delete = [&["delete", id.as_str(), "--wait"][..], &FAST].concat();
    let job = format!("deprovision-{id}");
    let runner = engine.runner_succeeds(&job, None);
    let ((code, deleting, progress), ()) = tokio::join!(ctl(&server, &delete), runner);
    assert_eq!(code, 0, "{progress}");
    assert!(deleting.contains("deprovision"), "{deleting}");
    assert!(progress.contains(&format!("{id}: Deleted after")), "{progress}");
    let (code, _, progress) = ctl(&server, &[&["wait", id.as_str(), "--for", "delete"][..], &FAST].concat()).await;
    assert_eq!(code, 0, "{progress}");
}
