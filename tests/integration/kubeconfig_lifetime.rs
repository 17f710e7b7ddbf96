//! Kubeconfigs with a lifetime on a real cluster: a second control plane plays the provisioned vanilla cluster, its
//! kube-controller-manager signing client certificates for at most 30 seconds (`--cluster-signing-duration`), so
//! that expiry is seen within the test. The service (the engine, the test playing terraform-runner) is given the
//! kubeadm admin kubeconfig of that cluster and never hands it out: readers get a certificate the cluster issued,
//! the same one until 60 % of its life has passed, a new one on rotation, and the API server refuses each once it
//! expired.

use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::ListParams;
use provisioner::api::audit::AuditEvent;
use test_control_plane::{ApiServerExtras, ControlPlane};
use test_support::clusters::kubeadm_admin_kubeconfig;
use test_support::engine::Engine;
use test_support::{Backend, eks_body, provision_body};

const SIGNING_LIMIT: &str = "--cluster-signing-duration=30s";

/// The kubeconfig a reader gets, and until when it signs in.
async fn read(engine: &Engine, runtime_id: &str) -> (String, DateTime<Utc>) {
    let answer = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/kubeconfig")).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    (answer.text.clone(), expiry(&answer.headers))
}

fn expiry(headers: &axum::http::HeaderMap) -> DateTime<Utc> {
    let value = headers.get("kubeconfig-expires-at").expect("a kubeconfig with a lifetime says until when");
    DateTime::parse_from_rfc3339(value.to_str().unwrap()).unwrap().with_timezone(&Utc)
}

/// Lists namespaces with `kubeconfig`: Ok, or the API server's status code.
async fn sign_in(kubeconfig: &str) -> Result<(), u16> {
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("a valid kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(parsed, &Default::default()).await.expect("a usable kubeconfig");
    let client = kube::Client::try_from(config).unwrap();
    match Api::<Namespace>::all(client).list(&ListParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.code),
        Err(error) => panic!("the cluster did not answer: {error}"),
    }
}

/// The subject of the kubeconfig's client certificate.
fn subject(kubeconfig: &str) -> String {
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let data = parsed.auth_infos[0].auth_info.as_ref().unwrap().client_certificate_data.clone().expect("a certificate");
    let pem = BASE64.decode(data).unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
    pem.parse_x509().unwrap().subject().to_string()
}

async fn wait_until(moment: DateTime<Utc>) {
    let left = (moment - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(left).await;
}

#[tokio::test]
async fn readers_get_certificates_the_cluster_issued_which_rotate_and_expire() {
    let extras = ApiServerExtras { controller_manager_args: vec![SIGNING_LIMIT.to_owned()], ..Default::default() };
    let cluster = ControlPlane::start_with(extras).await.expect("the provisioned cluster");
    let (engine, process) = Engine::start(Backend::Sqlite, &[]).await;
    let admin = kubeadm_admin_kubeconfig(&cluster, cluster.server_url());
    let runtime_id = engine.provisioned(&provision_body("lifetime"), &admin).await;

    // Not the admin certificate: one for kubeopera:admin, bound to cluster-admin in the cluster, valid 30 seconds
    // (the signer's limit, below the 24 hours asked for) and read from the certificate itself.
    let (first, first_expiry) = read(&engine, &runtime_id).await;
    let admin_certificate = BASE64.encode(cluster.admin_certificate_and_key().0);
    assert!(!first.contains(&admin_certificate), "the admin certificate was handed out");
    assert_eq!(subject(&first), "O=kubeopera:admin, CN=kubeopera:runtime-admin");
    let life = first_expiry - Utc::now();
    assert!(life > chrono::TimeDelta::seconds(20) && life <= chrono::TimeDelta::seconds(31), "{life}");
    assert_eq!(sign_in(&first).await, Ok(()), "it signs in as a cluster admin");
    // The runtime says until when; every reader gets the same one meanwhile.
    let runtime = engine.app.get(&format!("/api/v1/runtimes/{runtime_id}")).await.json();
    let shown = DateTime::parse_from_rfc3339(runtime["kubeconfigExpiresAt"].as_str().unwrap()).unwrap();
    assert_eq!(shown, first_expiry);
    assert_eq!(read(&engine, &runtime_id).await.0, first, "not yet due for a new one");

    // A rotation mints a new one at once; the old one still signs in until it expires.
    let rotated =
        engine.app.request("POST", &format!("/api/v1/runtimes/{runtime_id}/kubeconfig/rotation"), None, &[]).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let (second, second_expiry) = (rotated.text.clone(), expiry(&rotated.headers));
    assert_ne!(second, first);
    assert_eq!(read(&engine, &runtime_id).await.0, second, "readers get the rotated one");
    assert_eq!(sign_in(&second).await, Ok(()));
    assert_eq!(sign_in(&first).await, Ok(()));

    // Past its expiry the cluster refuses the first; past 60 % of its life a reader gets a third one.
    wait_until(first_expiry + chrono::TimeDelta::seconds(2)).await;
    assert_eq!(sign_in(&first).await, Err(401), "an expired kubeconfig is refused by the API server");
    let (third, third_expiry) = read(&engine, &runtime_id).await;
    assert_ne!(third, second, "the second was due for rotation");
    assert!(third_expiry > second_expiry);
    assert_eq!(sign_in(&third).await, Ok(()));

    // Each read and the rotation are audited with the expiry handed out.
    let audited: Vec<(AuditEvent, Option<DateTime<Utc>>)> = engine
        .app
        .audit
        .entries()
        .into_iter()
        .filter(|entry| matches!(entry.event, AuditEvent::KubeconfigRead | AuditEvent::KubeconfigRotated))
        .map(|entry| (entry.event, entry.kubeconfig_expires_at))
        .collect();
    assert!(audited.contains(&(AuditEvent::KubeconfigRotated, Some(second_expiry))), "{audited:?}");
    assert!(audited.contains(&(AuditEvent::KubeconfigRead, Some(third_expiry))), "{audited:?}");

    // An EKS kubeconfig holds no credential: handed out as published, nothing to rotate.
    let eks_kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n";
    let eks = engine.provisioned(&eks_body("lifetime-eks"), eks_kubeconfig).await;
    let answer = engine.app.get(&format!("/api/v1/provisions/{eks}/kubeconfig")).await;
    assert_eq!((answer.status, answer.text.as_str()), (StatusCode::OK, eks_kubeconfig));
    assert!(answer.headers.get("kubeconfig-expires-at").is_none());
    let refused = engine.app.request("POST", &format!("/api/v1/runtimes/{eks}/kubeconfig/rotation"), None, &[]).await;
    assert_eq!((refused.status, refused.json()["code"].clone()), (StatusCode::CONFLICT, "nothing_to_rotate".into()));
    // Nor has a runtime without a cluster yet.
    let (queued, _) = engine.provision(&provision_body("lifetime-queued")).await;
    let refused =
        engine.app.request("POST", &format!("/api/v1/runtimes/{queued}/kubeconfig/rotation"), None, &[]).await;
    assert_eq!((refused.status, refused.json()["code"].clone()), (StatusCode::CONFLICT, "not_ready".into()));
    process.stop().await;
}
