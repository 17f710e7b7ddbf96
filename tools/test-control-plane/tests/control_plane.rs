//! Proves the harness against the real control plane, as the service's restricted ServiceAccount.
//! Needs TEST_CONTROL_PLANE_BIN_DIR (see `make control-plane`).

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, Pod, PodSpec, PodTemplateSpec, Secret, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, Config};
use test_control_plane::{ControlPlane, Result, shared};

const ACCOUNT: &str = "provisioner";
const CONTAINER: &str = "runner";

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |items: &[&str]| Some(items.iter().map(ToString::to_string).collect());
    PolicyRule {
        api_groups: strings(&[group]),
        resources: strings(resources),
        verbs: verbs.iter().map(ToString::to_string).collect(),
        ..PolicyRule::default()
    }
}

/// A fresh namespace with the service's production Role bound to a ServiceAccount, and a client
/// acting as that ServiceAccount.
async fn restricted(cp: &ControlPlane, prefix: &str) -> Result<(String, Client)> {
    let namespace = cp.new_namespace(prefix).await?;
    let admin = cp.admin_client()?;
    let create = PostParams::default();
    Api::<ServiceAccount>::namespaced(admin.clone(), &namespace)
        .create(&create, &ServiceAccount { metadata: meta(ACCOUNT), ..ServiceAccount::default() })
        .await?;
    let role = Role {
        metadata: meta(ACCOUNT),
        rules: Some(vec![
            rule("batch", &["jobs"], &["get", "list", "watch", "create", "delete"]),
            rule("", &["pods", "pods/log"], &["get", "list", "watch"]),
            rule("", &["secrets", "configmaps"], &["get", "list", "create", "update", "delete"]),
        ]),
    };
    Api::<Role>::namespaced(admin.clone(), &namespace).create(&create, &role).await?;
    let binding = RoleBinding {
        metadata: meta(ACCOUNT),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: ACCOUNT.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: ACCOUNT.into(),
            namespace: Some(namespace.clone()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin, &namespace).create(&create, &binding).await?;
    let client = cp.client_for_service_account(&namespace, ACCOUNT).await?;
    Ok((namespace, client))
}

fn job(name: &str, containers: Vec<Container>) -> Job {
    Job {
        metadata: meta(name),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                spec: Some(PodSpec { containers, restart_policy: Some("Never".into()), ..PodSpec::default() }),
                ..PodTemplateSpec::default()
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

fn runner_job(name: &str) -> Job {
    job(
        name,
        vec![Container {
            name: CONTAINER.into(),
            image: Some("registry.invalid/runner:1".into()),
            ..Container::default()
        }],
    )
}

fn api_error_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[tokio::test]
async fn service_account_client_has_exactly_that_identity() -> Result<()> {
    let cp = shared().await;
    let (namespace, client) = restricted(cp, "identity").await?;
    let review =
        Api::<SelfSubjectReview>::all(client).create(&PostParams::default(), &SelfSubjectReview::default()).await?;
    let user = review.status.and_then(|status| status.user_info).unwrap_or_default();
    assert_eq!(user.username.as_deref(), Some(format!("system:serviceaccount:{namespace}:{ACCOUNT}").as_str()));
    Ok(())
}

#[tokio::test]
async fn job_completes_after_its_pod_succeeds() -> Result<()> {
    let cp = shared().await;
    let (namespace, client) = restricted(cp, "complete").await?;
    let create = PostParams::default();
    Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .create(&create, &ConfigMap { metadata: meta("inputs"), ..ConfigMap::default() })
        .await?;
    Api::<Secret>::namespaced(client.clone(), &namespace)
        .create(&create, &Secret { metadata: meta("credentials"), ..Secret::default() })
        .await?;
    let jobs = Api::<Job>::namespaced(client.clone(), &namespace);
    jobs.create(&create, &runner_job("apply")).await?;

    let pod = cp.wait_for_job_pod(&namespace, "apply").await?;
    let pod_name = pod.metadata.name.as_deref().expect("pods have names");
    // The restricted account sees the pod the real Job controller created.
    let visible = Api::<Pod>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=apply"))
        .await?;
    assert_eq!(visible.items.len(), 1);

    cp.terminate_pod(&namespace, pod_name, CONTAINER, 0, "applied").await?;
    let finished = cp.wait_for_job_condition(&namespace, "apply", "Complete").await?;
    assert_eq!(finished.status.and_then(|status| status.succeeded), Some(1));

    jobs.delete("apply", &DeleteParams::background()).await?;
    Ok(())
}

#[tokio::test]
async fn job_fails_after_its_pod_fails_with_the_termination_message() -> Result<()> {
    let cp = shared().await;
    let (namespace, client) = restricted(cp, "fail").await?;
    Api::<Job>::namespaced(client.clone(), &namespace).create(&PostParams::default(), &runner_job("destroy")).await?;

    let pod = cp.wait_for_job_pod(&namespace, "destroy").await?;
    let pod_name = pod.metadata.name.expect("pods have names");
    cp.terminate_pod(&namespace, &pod_name, CONTAINER, 3, "tofu destroy failed").await?;
    let failed = cp.wait_for_job_condition(&namespace, "destroy", "Failed").await?;
    let conditions = failed.status.and_then(|status| status.conditions).unwrap_or_default();
    let reason = conditions.iter().find(|c| c.type_ == "Failed").and_then(|c| c.reason.as_deref());
    assert_eq!(reason, Some("BackoffLimitExceeded"));

    let pod = Api::<Pod>::namespaced(client, &namespace).get(&pod_name).await?;
    let status = pod.status.expect("the pod has a status");
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let terminated = status
        .container_statuses
        .unwrap_or_default()
        .into_iter()
        .find(|container| container.name == CONTAINER)
        .and_then(|container| container.state?.terminated)
        .expect("the container has terminated");
    assert_eq!(terminated.exit_code, 3);
    assert_eq!(terminated.message.as_deref(), Some("tofu destroy failed"));
    Ok(())
}

#[tokio::test]
async fn verbs_outside_the_role_are_forbidden() -> Result<()> {
    let cp = shared().await;
    let (namespace, client) = restricted(cp, "forbidden").await?;
    let secrets = Api::<Secret>::namespaced(client.clone(), &namespace);
    secrets.create(&PostParams::default(), &Secret { metadata: meta("credentials"), ..Secret::default() }).await?;

    let patch = serde_json::json!({"metadata": {"labels": {"patched": "yes"}}});
    let error = secrets
        .patch("credentials", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect_err("patch is not in the Role");
    assert_eq!(api_error_code(&error), Some(403), "{error}");

    let error =
        Api::<Namespace>::all(client.clone()).list(&ListParams::default()).await.expect_err("the Role is namespaced");
    assert_eq!(api_error_code(&error), Some(403), "{error}");

    let other = cp.new_namespace("forbidden-other").await?;
    let error = Api::<Job>::namespaced(client, &other)
        .create(&PostParams::default(), &runner_job("elsewhere"))
        .await
        .expect_err("the Role is bound in its own namespace only");
    assert_eq!(api_error_code(&error), Some(403), "{error}");
    Ok(())
}

#[tokio::test]
async fn invalid_job_is_rejected() -> Result<()> {
    let cp = shared().await;
    let (namespace, client) = restricted(cp, "invalid").await?;
    let error = Api::<Job>::namespaced(client, &namespace)
        .create(&PostParams::default(), &job("no-containers", Vec::new()))
        .await
        .expect_err("a Job needs containers");
    assert_eq!(api_error_code(&error), Some(422), "{error}");
    Ok(())
}

#[tokio::test]
async fn token_for_another_audience_is_rejected() -> Result<()> {
    let cp = shared().await;
    let (namespace, _) = restricted(cp, "audience").await?;
    let token = cp.service_account_token(&namespace, ACCOUNT, &["not-the-api-server"]).await?;
    let error = Api::<ConfigMap>::namespaced(cp.client_with_token(token)?, &namespace)
        .list(&ListParams::default())
        .await
        .expect_err("the API server accepts only its own audience");
    assert_eq!(api_error_code(&error), Some(401), "{error}");
    Ok(())
}

#[tokio::test]
async fn written_kubeconfig_authenticates_as_admin() -> Result<()> {
    let cp = shared().await;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("kubeconfig");
    cp.write_kubeconfig(&path)?;
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let namespaces = Api::<Namespace>::all(Client::try_from(config)?).list(&ListParams::default()).await?;
    assert!(namespaces.items.iter().any(|ns| ns.metadata.name.as_deref() == Some("default")));
    Ok(())
}
