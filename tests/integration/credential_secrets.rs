//! Credentials without auth-service (`APP_CREDENTIALS_SOURCE=secrets`), against the real control plane with the
//! production RBAC: a credential id names a labelled Secret of the tenant's namespace, which the service reads only
//! where a RoleBinding of its ClusterRole lets it. Another tenant's Secret, an unlabelled one and a missing one
//! answer alike; a malformed one names the key, never a value.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use test_support::Backend;
use test_support::auth_service::{AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY};
use test_support::engine::Engine;
use test_support::provision_body;

const LABEL: &str = "provisioner.kubeopera.io/credential";

async fn create_secret(engine: &Engine, namespace: &str, name: &str, labelled: bool, data: Value) {
    let labels = if labelled { json!({ LABEL: "true" }) } else { json!({}) };
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels }, "stringData": data,
    }))
    .unwrap();
    Api::<Secret>::namespaced(engine.admin.clone(), namespace).create(&PostParams::default(), &secret).await.unwrap();
}

/// A provisioning for `tenant` naming `credential`: the answer's status and body.
async fn provision(engine: &Engine, tenant: &str, name: &str, credential: &str) -> (u16, Value) {
    let mut body = provision_body(name);
    body["clusterConfig"]["credentialId"] = json!(credential);
    let answer = engine.app.request("POST", "/api/v1/provisions", Some(&body), &[("Tenant", tenant)]).await;
    (answer.status.as_u16(), answer.json())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_credential_is_its_own_labelled_secret() {
    let (engine, _process) = Engine::start(Backend::Sqlite, &[("APP_CREDENTIALS_SOURCE", "secrets")]).await;
    let team_a = engine.control_plane.new_namespace("creds-a").await.unwrap();
    let team_b = engine.control_plane.new_namespace("creds-b").await.unwrap();
    let ungranted = engine.control_plane.new_namespace("creds-c").await.unwrap();
    engine.grant_credentials(&team_a).await;
    engine.grant_credentials(&team_b).await;
    let aws =
        json!({"type": "aws_access_key", "accessKeyId": AWS_ACCESS_KEY_ID, "secretAccessKey": AWS_SECRET_ACCESS_KEY});
    create_secret(&engine, &team_a, "cloud", true, aws.clone()).await;
    create_secret(&engine, &team_a, "unlabelled", false, aws.clone()).await;
    create_secret(&engine, &ungranted, "cloud", true, aws).await;
    let broken = json!({"type": "aws_access_key", "accessKeyId": AWS_ACCESS_KEY_ID});
    create_secret(&engine, &team_a, "broken", true, broken).await;

    // The tenant's own: the run gets it (its Job exists only once the credential is resolved and written).
    let (status, accepted) = provision(&engine, &team_a, "shop", "cloud").await;
    assert_eq!(status, 202, "{accepted}");
    let runtime_id = accepted["id"].as_str().unwrap();
    let outputs = format!("provision-{runtime_id}-outputs");
    let kubeconfig = test_support::engine::KUBECONFIG_OUTPUT;
    engine.runner_succeeds(&format!("provision-{runtime_id}"), Some((&outputs, kubeconfig))).await;
    engine.wait_for_status(runtime_id, &["succeeded"], std::time::Duration::from_secs(60)).await;

    // Another tenant's, one not labelled, one that does not exist: the same answer, naming the field.
    for (tenant, credential) in [(&team_b, "cloud"), (&team_a, "unlabelled"), (&team_a, "absent")] {
        let (status, answer) = provision(&engine, tenant, "other", credential).await;
        assert_eq!(status, 400, "{tenant}/{credential}: {answer}");
        assert_eq!(answer["field"], "clusterConfig.credentialId", "{answer}");
        assert!(answer.to_string().contains("does not exist"), "{answer}");
    }
    let (status, answer) = provision(&engine, &team_a, "other", "broken").await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().contains("secretAccessKey"), "the missing key is named: {answer}");
    assert!(!answer.to_string().contains(AWS_ACCESS_KEY_ID), "no value is shown: {answer}");
    // Without the RoleBinding the service cannot read the namespace's Secrets, whatever they are.
    let (status, answer) = provision(&engine, &ungranted, "other", "cloud").await;
    assert_eq!(status, 503, "{answer}");
    assert!(answer.to_string().contains("may not read"), "{answer}");
}
