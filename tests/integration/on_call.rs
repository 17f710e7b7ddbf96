//! The on-call package of the chart: the suggested alerts (files/alerts.yaml) and the dashboard
//! (files/dashboard.json). Every expression is parsed by a PromQL parser, as Prometheus would, and every metric it
//! names is one the service exports (read from a real scrape); every alert has a severity, a summary and a
//! runbook that exists; the chart renders both when asked.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use promql_parser::parser::Expr;
use promql_parser::util::{ExprVisitor, parse_duration, walk_expr};
use serde_json::Value;
use test_support::clusters::kubeadm_admin_kubeconfig;
use test_support::engine::Engine;
use test_support::helm::{CHART, helm};
use test_support::{Backend, provision_body};
use yaml_rust2::YamlLoader;

const WAIT: Duration = Duration::from_secs(60);

/// The metric names a scrape exports: each family under the names its samples carry. A family without a series is
/// not scraped, so the service first does its work: a provisioning fails, another runs.
async fn exported_metric_names() -> BTreeSet<String> {
    let (engine, process) = Engine::start(
        Backend::Sqlite,
        &[("APP_CERTIFICATE_READS_PER_MINUTE", "600"), ("APP_CERTIFICATE_REREAD_AFTER", "1s")],
    )
    .await;
    // A cluster whose certificates the watch reads: the test control plane playing a provisioned one.
    let cluster = engine.control_plane;
    let watched = engine
        .provisioned(&provision_body("on-call-watched"), &kubeadm_admin_kubeconfig(cluster, cluster.server_url()))
        .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while engine.app.get(&format!("/api/v1/runtimes/{watched}")).await.json()["certificates"].is_null() {
        assert!(tokio::time::Instant::now() < deadline, "the certificates were not read");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (runtime_id, failing) = engine.provision(&provision_body("on-call-failing")).await;
    engine.wait_for_stage(&failing, "WaitForJob", WAIT).await;
    engine.runner_fails(&format!("provision-{runtime_id}"), "the cloud said no").await;
    engine.wait_for_stage(&failing, "Done", WAIT).await;
    let (_, running) = engine.provision(&provision_body("on-call-running")).await;
    engine.wait_for_stage(&running, "WaitForJob", WAIT).await;
    let scrape = engine.app.metrics().await;
    process.stop().await;
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        let Some(family) = line.strip_prefix("# TYPE ") else { continue };
        let (name, kind) = family.split_once(' ').expect("a TYPE line names the family and its type");
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
    }
    names
}

/// The metric names an expression selects.
fn selected_metrics(expression: &str) -> BTreeSet<String> {
    struct Selected(BTreeSet<String>);
    impl ExprVisitor for Selected {
        type Error = ();
        fn pre_visit(&mut self, expr: &Expr) -> Result<bool, ()> {
            let selector = match expr {
                Expr::VectorSelector(selector) => selector,
                Expr::MatrixSelector(matrix) => &matrix.vs,
                _ => return Ok(true),
            };
            self.0.insert(selector.name.clone().expect("every selector names its metric"));
            Ok(true)
        }
    }
    let parsed = promql_parser::parser::parse(expression).unwrap_or_else(|error| panic!("{expression}: {error}"));
    let mut selected = Selected(BTreeSet::new());
    walk_expr(&mut selected, &parsed).unwrap();
    selected.0
}

fn chart_file(name: &str) -> String {
    std::fs::read_to_string(Path::new(CHART).join("files").join(name)).unwrap()
}

/// GitHub's anchor of a Markdown heading.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|character| character.is_alphanumeric() || matches!(character, ' ' | '-' | '_'))
        .map(|character| if character == ' ' { '-' } else { character })
        .collect()
}

/// A runbook named as `docs/<file>.md#<anchor>` exists: the file, and a heading of that anchor in it.
fn assert_runbook_exists(runbook: &str) {
    let (file, fragment) = runbook.split_once('#').map_or((runbook, None), |(file, anchor)| (file, Some(anchor)));
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap_or_else(|error| panic!("runbook {runbook}: {error}"));
    if let Some(fragment) = fragment {
        let headings: Vec<String> = text.lines().filter_map(|line| line.strip_prefix("## ")).map(anchor).collect();
        assert!(
            headings.iter().any(|heading| heading == fragment),
            "runbook {runbook}: no such heading in {headings:?}"
        );
    }
}

#[tokio::test]
async fn every_alert_and_panel_names_metrics_the_service_exports() {
    let exported = exported_metric_names().await;
    assert!(
        exported.contains("provisioner_orphans_found_total") && exported.contains("process_open_fds"),
        "{exported:?}"
    );

    let rules = &YamlLoader::load_from_str(&chart_file("alerts.yaml")).unwrap()[0];
    let mut alerts = BTreeSet::new();
    for rule in rules["groups"].as_vec().unwrap().iter().flat_map(|group| group["rules"].as_vec().unwrap()) {
        let alert = rule["alert"].as_str().expect("every rule is an alert");
        assert!(alerts.insert(alert.to_owned()), "{alert} twice");
        let expression = rule["expr"].as_str().unwrap();
        for metric in selected_metrics(expression) {
            assert!(exported.contains(&metric), "{alert}: {metric} is no metric of the service's");
        }
        if let Some(duration) = rule["for"].as_str() {
            parse_duration(duration).unwrap_or_else(|error| panic!("{alert}: for {duration}: {error}"));
        }
        let severity = rule["labels"]["severity"].as_str();
        assert!(matches!(severity, Some("critical" | "warning" | "info")), "{alert}: severity {severity:?}");
        assert!(rule["annotations"]["summary"].as_str().is_some_and(|summary| !summary.is_empty()), "{alert}");
        if let Some(runbook) = rule["annotations"]["runbook_url"].as_str() {
            assert_runbook_exists(runbook);
        }
    }
    assert!(alerts.len() >= 8, "{alerts:?}");

    let dashboard: Value = serde_json::from_str(&chart_file("dashboard.json")).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    for panel in panels {
        for target in panel["targets"].as_array().unwrap() {
            for metric in selected_metrics(target["expr"].as_str().unwrap()) {
                assert!(exported.contains(&metric), "panel {}: {metric} is no metric of the service's", panel["title"]);
            }
        }
    }
    assert!(panels.len() >= 10);
}

/// Neither is installed unless asked for (the Prometheus Operator's CRDs, Grafana's sidecar); asked for, the
/// PrometheusRule holds every alert and the ConfigMap the dashboard, with the sidecar's label.
#[test]
fn the_chart_renders_the_alerts_and_the_dashboard_when_asked() {
    let folder = tempfile::tempdir().unwrap();
    let template = |extra: &[&str]| {
        let mut arguments = vec!["template", "cluster-provisioner", CHART];
        arguments.extend_from_slice(extra);
        helm(&folder.path().join("kubeconfig"), &arguments)
    };
    let default = template(&[]);
    assert!(!default.contains("kind: PrometheusRule") && !default.contains("cluster-provisioner-dashboard"));
    let rendered = template(&["--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true"]);
    let documents: Vec<&str> = rendered.split("\n---\n").collect();
    let rule = documents.iter().find(|document| document.contains("kind: PrometheusRule")).expect("a PrometheusRule");
    let rule = &YamlLoader::load_from_str(rule).unwrap()[0];
    let file = &YamlLoader::load_from_str(&chart_file("alerts.yaml")).unwrap()[0];
    assert_eq!(rule["spec"]["groups"], file["groups"]);
    let config_map = documents.iter().find(|document| document.contains("cluster-provisioner-dashboard")).unwrap();
    let config_map = &YamlLoader::load_from_str(config_map).unwrap()[0];
    assert_eq!(config_map["metadata"]["labels"]["grafana_dashboard"].as_str(), Some("1"));
    let dashboard: Value =
        serde_json::from_str(config_map["data"]["cluster-provisioner.json"].as_str().unwrap()).unwrap();
    assert_eq!(dashboard, serde_json::from_str::<Value>(&chart_file("dashboard.json")).unwrap());
}
