//! Certificates watched on a real cluster: a second control plane plays the provisioned vanilla cluster, its API
//! server serving with a certificate that ends in 20 days. The watch (the engine's, at 600 reads a minute) reads
//! the serving certificate in a TLS handshake, the CA and the admin certificate of the kubeconfig the apply
//! published; the runtime shows each expiry as the certificates themselves say, `CertificatesExpiring` turns true
//! and the metrics show it. A kubeconfig whose CA did not sign what the server presents is refused, not recorded.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;
use test_control_plane::{ApiServerExtras, ControlPlane};
use test_support::clusters::kubeadm_admin_kubeconfig;
use test_support::engine::Engine;
use test_support::{Backend, call, provision_body};

/// Ten reads a second; a runtime read before its cluster existed is due again after a second.
const FAST_WATCH: &[(&str, &str)] =
    &[("APP_CERTIFICATE_READS_PER_MINUTE", "600"), ("APP_CERTIFICATE_REREAD_AFTER", "1s")];

/// The validity end of a PEM certificate, read by the test itself.
fn not_after(pem: &str) -> DateTime<Utc> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let certificate = pem.parse_x509().unwrap();
    DateTime::from_timestamp(certificate.validity().not_after.timestamp(), 0).unwrap()
}

/// The runtime once its certificates were read.
async fn read_runtime(engine: &Engine, runtime_id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let runtime = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
        if !runtime["certificates"].is_null() {
            return runtime;
        }
        assert!(tokio::time::Instant::now() < deadline, "not read within 20 s: {runtime}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn expiry(runtime: &Value, certificate: &str) -> Option<DateTime<Utc>> {
    let expiries = runtime["certificates"]["expiries"].as_array()?;
    let found = expiries.iter().find(|expiry| expiry["certificate"] == certificate)?;
    Some(DateTime::parse_from_rfc3339(found["notAfter"].as_str()?).ok()?.with_timezone(&Utc))
}

#[tokio::test]
async fn the_watch_reads_a_clusters_certificates_and_says_when_one_expires_soon() {
    let extras =
        ApiServerExtras { serving_valid_for: Some(Duration::from_secs(20 * 24 * 60 * 60)), ..Default::default() };
    let cluster = ControlPlane::start_with(extras).await.expect("the provisioned cluster");
    let (engine, process) = Engine::start(Backend::Postgres, FAST_WATCH).await;
    let runtime_id =
        engine.provisioned(&provision_body("watched"), &kubeadm_admin_kubeconfig(&cluster, cluster.server_url())).await;

    // Each expiry as the certificate says, the serving one from the handshake.
    let runtime = read_runtime(&engine, &runtime_id).await;
    let serving = not_after(cluster.serving_certificate_pem());
    assert!(serving - Utc::now() < TimeDelta::days(21), "the cluster serves with a certificate ending in 20 days");
    assert_eq!(expiry(&runtime, "ApiServerServing"), Some(serving), "{runtime}");
    assert_eq!(expiry(&runtime, "ClusterCa"), Some(not_after(cluster.ca_pem())));
    assert_eq!(expiry(&runtime, "AdminClient"), Some(not_after(cluster.admin_certificate_and_key().0)));
    assert_eq!(runtime["certificates"]["expiries"][0]["certificate"], "ApiServerServing", "soonest first");

    // The condition: true since 30 days before the end, naming the certificate.
    let conditions = runtime["conditions"].as_array().unwrap();
    let expiring =
        conditions.iter().find(|condition| condition["type"] == "CertificatesExpiring").expect("the condition");
    assert_eq!((&expiring["status"], &expiring["reason"]), (&"True".into(), &"CertificateExpiresSoon".into()));
    assert!(expiring["message"].as_str().unwrap().contains("ApiServerServing"), "{expiring}");
    let since = DateTime::parse_from_rfc3339(expiring["lastTransitionTime"].as_str().unwrap()).unwrap();
    assert_eq!(since, serving - TimeDelta::days(30));

    // The metrics: the expiry of each, in seconds since the epoch.
    let metrics = call(&engine.app.app.metrics_router, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    let series = format!(
        "provisioner_runtime_certificate_expiry_seconds{{runtime=\"{runtime_id}\",certificate=\"ApiServerServing\"}} {}",
        serving.timestamp()
    );
    assert!(metrics.text.contains(&series), "{series} in {}", metrics.text);

    // Another cluster's kubeconfig naming this cluster's server: what the server presents is not signed by the CA
    // the kubeconfig trusts, so it is refused and nothing is recorded.
    let stranger = ControlPlane::start().await.expect("another cluster");
    let untrusted = engine
        .provisioned(&provision_body("untrusting"), &kubeadm_admin_kubeconfig(&stranger, cluster.server_url()))
        .await;
    let failed = |text: &str| {
        text.lines()
            .find(|line| line.starts_with("provisioner_certificate_reads_total{outcome=\"failed\"}"))
            .and_then(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = call(&engine.app.app.metrics_router, Request::get("/metrics").body(Body::empty()).unwrap()).await;
        if failed(&metrics.text) >= 1.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no failed read within 20 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let runtime = engine.app.get(&format!("/api/v1/runtimes/{untrusted}")).await.json();
    assert!(runtime["certificates"].is_null(), "{runtime}");
    assert!(
        !runtime["conditions"].as_array().unwrap().iter().any(|condition| condition["type"] == "CertificatesExpiring")
    );
    process.stop().await;
}
