//! `provisionerctl get runtime ID -w` and `get runtimes -w` watch as kubectl's `--watch` does (issue #54 item 4):
//! the current row, then a row for each change of state or stage, until the runtime settles. The engine on the test
//! control plane runs the provisioning and the stand-in runner plays its Job while the command watches.

use std::time::Duration;

use test_support::engine::Engine;
use test_support::{Backend, provision_body};

use crate::provisionerctl_support::{ctl, serve};

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: []\n";

#[tokio::test]
async fn provisionerctl_watches_a_runtime_row_by_row_until_it_settles() {
    let (engine, _process) = Engine::start(Backend::Sqlite, &[]).await;
    let server = serve(engine.app.app.router.clone()).await;
    let (id, provisioning) = engine.provision(&provision_body("ctl-watched")).await;

    let rows = r#"jsonpath={.state} {.lastOperation.stage}{"\n"}"#;
    let watch = ["get", "runtime", id.as_str(), "-w", "--interval", "100ms", "-o", rows];
    let runner = async {
        engine.wait_for_stage(&provisioning, "WaitForJob", Duration::from_secs(60)).await;
        // Long enough for the watch to ask while the runner runs.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let job = format!("provision-{id}");
        engine.runner_succeeds(&job, Some((&format!("{job}-outputs"), KUBECONFIG))).await;
    };
    let watched = tokio::time::timeout(Duration::from_secs(120), async { tokio::join!(ctl(&server, &watch), runner) });
    let ((code, printed, err), ()) = watched.await.expect("the watch ends once the runtime has settled");
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = printed.lines().collect();
    let (last, changes) = rows.split_last().unwrap();
    assert!(last.starts_with("Ready "), "{printed}");
    assert!(changes.iter().all(|row| row.starts_with("Provisioning ")), "{printed}");
    assert!(changes.contains(&"Provisioning WaitForJob"), "{printed}");
    assert!(rows.windows(2).all(|pair| pair[0] != pair[1]), "a row for each change only: {printed}");

    // Settled already: the table and its row, and the watch ends.
    for args in [&["get", "runtime", id.as_str(), "-w"][..], &["get", "runtimes", "-w", "-o", "wide"]] {
        let (code, table, err) = ctl(&server, args).await;
        assert_eq!(code, 0, "{err}");
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines.len() == 2 && lines[0].starts_with("NAME") && lines[1].contains(" Ready "), "{table}");
    }
}
