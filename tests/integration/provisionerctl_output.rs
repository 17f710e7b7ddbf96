//! provisionerctl prints what kubectl users expect (issue #54 item 4): `-o name|wide|jsonpath=...` beside the
//! table, JSON and YAML, lists filtered by label (`-l`) and tenant (`--tenant`), and every page with `--all`.
//! Against the app on a loopback port; runtimes stay queued, since no engine runs here.

use serde_json::json;
use test_support::auth_service::aws_credential;
use test_support::{Backend, provision_body, spawn_app};

use crate::provisionerctl_support::{create, ctl, serve};

#[tokio::test]
async fn provisionerctl_prints_names_wide_tables_and_jsonpath() {
    let app = spawn_app(Backend::Sqlite).await;
    let server = serve(app.app.router.clone()).await;
    let folder = tempfile::tempdir().unwrap();
    let mut body = provision_body("ctl-out-a");
    body["runtimeInput"]["labels"] = json!({"team": "blue"});
    let first = create(&server, folder.path(), &body, &[]).await;
    let second = create(&server, folder.path(), &provision_body("ctl-out-b"), &[]).await;

    let (code, names, _) = ctl(&server, &["get", "runtimes", "-o", "name"]).await;
    assert_eq!((code, names), (0, format!("runtime/{first}\nruntime/{second}\n")));
    let (code, wide, _) = ctl(&server, &["get", "runtimes", "-o", "wide"]).await;
    assert_eq!(code, 0);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[6..], ["OPERATION", "STAGE", "LABELS", "CREATED"], "{wide}");
    let row = wide.lines().find(|line| line.starts_with("ctl-out-a")).unwrap();
    assert!(row.contains(" provision ") && row.contains(" team=blue "), "{wide}");
    let (code, listed, _) = ctl(&server, &["get", "runtimes", "-o", "jsonpath={.items[*].name}"]).await;
    assert_eq!((code, listed.as_str()), (0, "ctl-out-a ctl-out-b"));
    let template = r#"jsonpath={.runtimes[?(@.name=="ctl-out-b")].id}{"\n"}"#;
    let (code, filtered, _) = ctl(&server, &["get", "runtimes", "-o", template]).await;
    assert_eq!((code, filtered), (0, format!("{second}\n")));
    let (code, state, _) = ctl(&server, &["get", "runtime", &first, "-o", "jsonpath={.state}/{.labels.team}"]).await;
    assert_eq!((code, state.as_str()), (0, "Provisioning/blue"));
    let (code, operations, _) = ctl(&server, &["operations", &first, "-o", "name"]).await;
    assert!(code == 0 && operations.starts_with("operation/") && operations.lines().count() == 1, "{operations}");

    let (code, _, refused) = ctl(&server, &["get", "runtimes", "-o", "jsonpath={.items[*].name"]).await;
    assert_eq!(code, provisionerctl::exit::USAGE, "{refused}");
    assert!(refused.contains("jsonpath \"{.items[*].name\": the '{' at 0 is not closed"), "{refused}");
    let (code, _, refused) = ctl(&server, &["get", "runtimes", "-o", "xml"]).await;
    assert!(code == provisionerctl::exit::USAGE && refused.contains("none of table, wide, name"), "{refused}");
}

#[tokio::test]
async fn provisionerctl_selects_by_labels_and_follows_every_page() {
    let app = spawn_app(Backend::Sqlite).await;
    let server = serve(app.app.router.clone()).await;
    let folder = tempfile::tempdir().unwrap();
    let mut ids = Vec::new();
    for (name, labels) in [
        ("ctl-sel-a", json!({"team": "blue", "tier": "1"})),
        ("ctl-sel-b", json!({"team": "blue", "tier": "2"})),
        ("ctl-sel-c", json!({"team": "red"})),
    ] {
        let mut body = provision_body(name);
        body["runtimeInput"]["labels"] = labels;
        ids.push(create(&server, folder.path(), &body, &[]).await);
    }
    let names = |ids: &[&String]| ids.iter().map(|id| format!("runtime/{id}\n")).collect::<String>();

    let (code, blue, _) = ctl(&server, &["get", "runtimes", "-l", "team=blue", "-o", "name"]).await;
    assert_eq!((code, blue), (0, names(&[&ids[0], &ids[1]])));
    let (code, both, _) = ctl(&server, &["get", "runtimes", "--selector", "team=blue,tier=2", "-o", "name"]).await;
    assert_eq!((code, both), (0, names(&[&ids[1]])));
    let (code, _, refused) = ctl(&server, &["get", "runtimes", "-l", "team!=blue"]).await;
    assert!(code == provisionerctl::exit::USAGE && refused.contains("is not key=value"), "{refused}");

    let (code, first, more) = ctl(&server, &["get", "runtimes", "--chunk-size", "2", "-o", "name"]).await;
    assert_eq!((code, first), (0, names(&[&ids[0], &ids[1]])));
    assert!(more.contains("more runtimes follow on further pages: --all lists them all"), "{more}");
    let (code, every, more) = ctl(&server, &["get", "runtimes", "--all", "--chunk-size", "2", "-o", "name"]).await;
    assert_eq!((code, every, more), (0, names(&[&ids[0], &ids[1], &ids[2]]), String::new()));
    let (code, listed, _) = ctl(&server, &["get", "runtimes", "--all", "--chunk-size", "1", "-o", "json"]).await;
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!((code, listed["runtimes"].as_array().unwrap().len()), (0, 3), "{listed}");
    assert_eq!(listed["nextCursor"], serde_json::Value::Null);
}

/// Each tenant sees its own runtimes only; a runtime created for a tenant is that tenant's.
#[tokio::test]
async fn provisionerctl_acts_for_the_tenant_it_is_told() {
    let app = spawn_app(Backend::Sqlite).await;
    let server = serve(app.app.router.clone()).await;
    let folder = tempfile::tempdir().unwrap();
    for tenant in ["tenant-a", "tenant-b"] {
        app.auth.add_tenant_credential(tenant, &format!("cred-{tenant}"), aws_credential());
        let mut body = provision_body(&format!("ctl-shop-{tenant}"));
        body["clusterConfig"]["credentialId"] = json!(format!("cred-{tenant}"));
        create(&server, folder.path(), &body, &["--tenant", tenant]).await;
    }
    for tenant in ["tenant-a", "tenant-b"] {
        let args = ["--tenant", tenant, "get", "runtimes", "-o", "jsonpath={.items[*].name}"];
        let (code, names, err) = ctl(&server, &args).await;
        assert_eq!((code, names), (0, format!("ctl-shop-{tenant}")), "{err}");
    }
}
