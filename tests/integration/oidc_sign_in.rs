//! OIDC sign-in on a real kube-apiserver: the structured authentication configuration the renderer writes for a
//! vanilla runtime (trusting an issuer on loopback through its CA bundle) is loaded, and a token from the issuer
//! signs in with the mapped username and groups; an expired token, one for another audience and one without the
//! required claim do not. The runtime's administrator is bound to cluster-admin by terraform-runner's binding, and
//! unbound when taken off the list. Runs a control plane of its own, as the flag is fixed at the API server's start.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hcl::{Body, Expression};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, UserInfo};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;
use provisioner::domain::{
    Administrator, KubernetesAccess, OidcProvider, RequiredClaim, Runtime, SubjectKind, Topology,
};
use provisioner::render::RunAction;
use serde_json::json;
use test_control_plane::{ApiServerExtras, ControlPlane};
use test_support::oidc_issuer::OidcIssuer;

const AUDIENCE: &str = "kubeopera";
/// Enough for the API server's second try at the issuer's discovery document, 10 s after the first.
const AUTHENTICATOR_READY_TIMEOUT: Duration = Duration::from_secs(30);
const ALICE: &str = "oidc:alice@example.com";

/// A vanilla runtime signing in through `issuer` (its CA in the bundle, tokens of the example.com domain only),
/// with alice as its administrator.
fn runtime(issuer: &OidcIssuer) -> Runtime {
    let mut runtime = Runtime::example(Topology::VanillaKubeadm);
    runtime.cluster_config.kubernetes = Some(KubernetesAccess {
        oidc: Some(vec![OidcProvider {
            issuer_url: issuer.issuer_url(),
            client_id: AUDIENCE.into(),
            username_claim: Some("email".into()),
            username_prefix: None,
            groups_claim: Some("groups".into()),
            groups_prefix: None,
            required_claims: Some(vec![RequiredClaim { claim: "hd".into(), value: "example.com".into() }]),
            ca_bundle: Some(issuer.ca_pem().to_owned()),
        }]),
        administrators: Some(vec![Administrator { kind: SubjectKind::User, name: ALICE.into() }]),
    });
    runtime
}

/// The API server's configuration as the renderer writes it into the compute module's call.
fn authentication_config(runtime: &Runtime) -> String {
    let rendered = test_support::render(runtime, RunAction::Apply);
    let body: Body = hcl::from_str(&rendered.files["main.tf"]).expect("main.tf parses");
    let compute = body
        .blocks()
        .find(|block| block.identifier() == "module" && block.labels()[0].as_str() == "compute")
        .expect("the compute module");
    let value = compute.body().attributes().find(|attribute| attribute.key() == "authentication_config");
    match value.map(|attribute| attribute.expr()) {
        Some(Expression::String(config)) => config.clone(),
        other => panic!("authentication_config is not a string: {other:?}"),
    }
}

#[tokio::test]
async fn a_token_from_the_issuer_signs_in_to_a_real_api_server() {
    let issuer = OidcIssuer::start().await;
    let runtime = runtime(&issuer);
    let extras = ApiServerExtras {
        files: vec![("authentication.json".to_owned(), authentication_config(&runtime))],
        args: vec!["--authentication-config={dir}/authentication.json".to_owned()],
        ..ApiServerExtras::default()
    };
    let control_plane = ControlPlane::start_with(extras).await.expect("a control plane trusting the issuer");

    let now = unix_now();
    let alice = |audience: &str, expires: u64, domain: &str| {
        issuer.token(json!({
            "sub": "alice",
            "aud": audience,
            "iat": now,
            "exp": expires,
            "email": "alice@example.com",
            "email_verified": true,
            "groups": ["admins"],
            "hd": domain,
        }))
    };

    let token = alice(AUDIENCE, now + 3600, "example.com");
    let user = sign_in_once_ready(&control_plane, &token).await;
    assert_eq!(user.username.as_deref(), Some(ALICE));
    assert!(user.groups.unwrap_or_default().iter().any(|group| group == "oidc:admins"));
    assert!(issuer.jwks_requests() > 0, "the API server verified the token with the issuer's published keys");

    for (what, token) in [
        ("expired", alice(AUDIENCE, now - 3600, "example.com")),
        ("for another audience", alice("other", now + 3600, "example.com")),
        ("of another domain", alice(AUDIENCE, now + 3600, "example.org")),
    ] {
        match sign_in(&control_plane, &token).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 401, "a token {what}: {status:?}"),
            other => panic!("a token {what} is refused with 401, got {other:?}"),
        }
    }

    // terraform-runner binds the runtime's administrators after an apply, and unbinds them when the list empties.
    assert!(!may_delete_nodes(&control_plane, &token).await, "signed in is not yet administrator");
    let admins = runtime.cluster_config.kubernetes.as_ref().unwrap().admins().to_vec();
    let admin = || control_plane.admin_client().expect("the admin's client");
    terraform_runner::administrators::bind(admin(), &admins).await.expect("bound");
    assert!(may_delete_nodes(&control_plane, &token).await, "the administrator is cluster-admin");
    terraform_runner::administrators::bind(admin(), &[]).await.expect("unbound");
    assert!(!may_delete_nodes(&control_plane, &token).await, "taken off the list, alice is no administrator");
    terraform_runner::administrators::bind(admin(), &[]).await.expect("unbinding nothing is no error");
}

/// Whether the bearer of `token` may delete nodes, as the API server's authorizer says.
async fn may_delete_nodes(control_plane: &ControlPlane, token: &str) -> bool {
    let client = control_plane.client_with_token(token).expect("a client with the token");
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("delete".into()),
                resource: Some("nodes".into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client).create(&PostParams::default(), &review).await;
    answer.expect("the review is answered").status.is_some_and(|status| status.allowed)
}

/// [`sign_in`], retried for a while: the API server is ready before its JWT authenticator has read the issuer's
/// discovery document (it does so in the background, again every 10 s after a failure), and refuses tokens until then.
async fn sign_in_once_ready(control_plane: &ControlPlane, token: &str) -> UserInfo {
    let deadline = Instant::now() + AUTHENTICATOR_READY_TIMEOUT;
    loop {
        match sign_in(control_plane, token).await {
            Ok(user) => return user,
            Err(error) if Instant::now() > deadline => {
                panic!("the issuer's token signs in: {error}\n{}", control_plane.log_tail())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Who the API server takes the bearer of `token` to be.
async fn sign_in(control_plane: &ControlPlane, token: &str) -> Result<UserInfo, kube::Error> {
    let client = control_plane.client_with_token(token).expect("a client with the token");
    let review =
        Api::<SelfSubjectReview>::all(client).create(&PostParams::default(), &SelfSubjectReview::default()).await?;
    Ok(review.status.and_then(|status| status.user_info).unwrap_or_default())
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs()
}
