//! Authentication against the real test control plane: the service runs as the `cluster-provisioner`
//! ServiceAccount with the manifest's permissions and reviews real ServiceAccount tokens with TokenReview.

use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use provisioner::api::audit::{ApiKind, AuditEvent};
use serde_json::{Value, json};
use test_control_plane::ControlPlane;
use test_support::auth_service::aws_credential;
use test_support::documents;
use test_support::engine::apply_production_rbac;
use test_support::subscriber::Subscriber;
use test_support::{Answer, Backend, TestApp, provision_body, provision_input, spawn_app_with};

pub(crate) const AUDIENCE: &str = "cluster-provisioner";

/// The app in a fresh namespace with the production RBAC, allowing only `host-cluster-controller`; `identity`
/// is the ServiceAccount the service itself runs as.
pub(crate) struct Setup {
    pub(crate) app: TestApp,
    control_plane: &'static ControlPlane,
    namespace: String,
}

impl Setup {
    async fn start(identity: &str) -> Setup {
        Setup::start_with(identity, &[]).await
    }

    /// With `extra` settings too.
    pub(crate) async fn start_with(identity: &str, extra: &[(&str, &str)]) -> Setup {
        provisioner::install_crypto_provider();
        let control_plane = test_control_plane::shared().await;
        let namespace = control_plane.new_namespace("authn").await.expect("namespace");
        let admin = control_plane.admin_client().expect("admin client");
        apply_production_rbac(control_plane, &namespace).await;
        for name in ["host-cluster-controller", "intruder", "stranger"] {
            let account = ServiceAccount {
                metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
                ..ServiceAccount::default()
            };
            Api::<ServiceAccount>::namespaced(admin.clone(), &namespace)
                .create(&PostParams::default(), &account)
                .await
                .expect("create ServiceAccount");
        }

        let allowed = format!("system:serviceaccount:{namespace}:host-cluster-controller");
        let mut settings =
            vec![("APP_AUTH_ENABLED", "true"), ("APP_AUTH_ALLOWED_USERS", &allowed), ("JOB_NAMESPACE", &namespace)];
        settings.extend_from_slice(extra);
        let client = control_plane.client_for_service_account(&namespace, identity).await.expect("service client");
        let app = spawn_app_with(Backend::Sqlite, &settings, Some(client)).await;
        Setup { app, control_plane, namespace }
    }

    pub(crate) async fn token(&self, account: &str, audience: &str) -> String {
        self.control_plane.service_account_token(&self.namespace, account, &[audience]).await.expect("token")
    }

    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<&Value>, token: Option<&str>) -> Answer {
        let authorization = token.map(|token| format!("Bearer {token}"));
        let headers: Vec<_> = authorization.iter().map(|value| ("authorization", value.as_str())).collect();
        self.app.request(method, path, body, &headers).await
    }

    async fn graphql(&self, query: &str, variables: Value, token: Option<&str>) -> Answer {
        self.call("POST", "/graphql", Some(&json!({ "query": query, "variables": variables })), token).await
    }
}

fn assert_refused(answer: &Answer, status: StatusCode, code: &str) {
    assert_eq!(answer.status, status, "{}", answer.text);
    assert_eq!(answer.json()["error"]["code"], code, "{}", answer.text);
}

#[tokio::test]
async fn an_allowed_service_account_gets_in_and_its_changes_are_audited() {
    let setup = Setup::start("cluster-provisioner").await;
    let user = format!("system:serviceaccount:{}:host-cluster-controller", setup.namespace);
    let token = setup.token("host-cluster-controller", AUDIENCE).await;

    let accepted = setup.call("POST", "/api/v1/provisions", Some(&provision_body("authn-rest")), Some(&token)).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let accepted = accepted.json();
    let runtime_id = accepted["id"].as_str().unwrap();
    let status = setup.call("GET", &format!("/api/v1/provisions/{runtime_id}"), None, Some(&token)).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.text);
    assert_eq!(setup.call("GET", "/api/v1/openapi.json", None, Some(&token)).await.status, StatusCode::OK);

    let mutation = "mutation($config: ProvisionRuntimeInput!) { provisionRuntime(config: $config) { id runtimeID } }";
    let answer = setup.graphql(mutation, json!({ "config": provision_input("authn-graphql") }), Some(&token)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let operation = answer.json()["data"]["provisionRuntime"].clone();
    assert!(operation.is_object(), "{}", answer.text);

    // A retry with the same Idempotency-Key changes nothing, so it is not audited again.
    let bearer = format!("Bearer {token}");
    let headers = [("authorization", bearer.as_str()), ("idempotency-key", "authn-replay")];
    let body = provision_body("authn-replay");
    let first = setup.app.request("POST", "/api/v1/provisions", Some(&body), &headers).await;
    let replayed = setup.app.request("POST", "/api/v1/provisions", Some(&body), &headers).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    assert_eq!(replayed.json()["operationId"], first.json()["operationId"], "{}", replayed.text);

    let audit = setup.app.audit.entries();
    assert_eq!(audit.len(), 3, "{audit:?}");
    assert_eq!(audit[2].operation_id.unwrap().to_string(), first.json()["operationId"], "{audit:?}");
    for (entry, api, runtime_id, operation_id) in [
        (&audit[0], ApiKind::Rest, &accepted["id"], &accepted["operationId"]),
        (&audit[1], ApiKind::Graphql, &operation["runtimeID"], &operation["id"]),
    ] {
        assert_eq!(entry.user, user, "{entry:?}");
        assert_eq!(entry.api, api, "{entry:?}");
        assert_eq!(entry.event, AuditEvent::OperationAccepted, "{entry:?}");
        assert_eq!(entry.runtime_id.unwrap().to_string(), *runtime_id, "{entry:?}");
        assert_eq!(entry.operation_id.unwrap().to_string(), *operation_id, "{entry:?}");
    }
}

#[tokio::test]
async fn missing_malformed_and_foreign_tokens_are_refused() {
    let setup = Setup::start("cluster-provisioner").await;

    let answer = setup.call("GET", "/api/v1/openapi.json", None, None).await;
    assert_refused(&answer, StatusCode::UNAUTHORIZED, "unauthenticated");
    assert_eq!(answer.headers["www-authenticate"], "Bearer");
    let answer = setup.app.request("GET", "/api/v1/openapi.json", None, &[("authorization", "Basic YTpi")]).await;
    assert_refused(&answer, StatusCode::UNAUTHORIZED, "unauthenticated");
    let answer = setup.call("POST", "/api/v1/provisions", Some(&provision_body("nope")), Some("not-a-token")).await;
    assert_refused(&answer, StatusCode::UNAUTHORIZED, "unauthenticated");
    let answer = setup.graphql("{ runtimes { edges { cursor } } }", json!({}), None).await;
    assert_refused(&answer, StatusCode::UNAUTHORIZED, "unauthenticated");

    // A real token of the allowed account, but minted for another service.
    let elsewhere = setup.token("host-cluster-controller", "some-other-service").await;
    let answer = setup.call("GET", "/api/v1/openapi.json", None, Some(&elsewhere)).await;
    assert_refused(&answer, StatusCode::UNAUTHORIZED, "unauthenticated");

    // A valid identity that is not in the list.
    let intruder = setup.token("intruder", AUDIENCE).await;
    let answer =
        setup.call("DELETE", &format!("/api/v1/provisions/{}", uuid::Uuid::now_v7()), None, Some(&intruder)).await;
    assert_refused(&answer, StatusCode::FORBIDDEN, "forbidden");
    assert!(answer.json()["error"]["message"].as_str().unwrap().contains(":intruder"), "{}", answer.text);
    let answer = setup.graphql("{ runtimes { edges { cursor } } }", json!({}), Some(&intruder)).await;
    assert_refused(&answer, StatusCode::FORBIDDEN, "forbidden");

    // Every API route refuses both, whatever the method.
    let id = uuid::Uuid::now_v7();
    let body = provision_body("every-route");
    let graphql = json!({ "query": "{ runtimes { edges { cursor } } }" });
    let routes: [(&str, String, Option<&Value>); 9] = [
        ("POST", "/api/v1/provisions".to_owned(), Some(&body)),
        ("GET", "/api/v1/runtimes".to_owned(), None),
        ("GET", format!("/api/v1/runtimes/{id}"), None),
        ("GET", format!("/api/v1/provisions/{id}"), None),
        ("GET", format!("/api/v1/provisions/{id}/logs"), None),
        ("GET", format!("/api/v1/provisions/{id}/kubeconfig"), None),
        ("DELETE", format!("/api/v1/provisions/{id}"), None),
        ("GET", "/api/v1/openapi.json".to_owned(), None),
        ("POST", "/graphql".to_owned(), Some(&graphql)),
    ];
    // ...and the OpenAPI document says so for every path it describes.
    let document: Value = serde_json::from_str(&provisioner::api::rest::openapi_json()).unwrap();
    for (method, path, body) in routes {
        let answer = setup.call(method, &path, body, None).await;
        assert_refused(&answer, StatusCode::UNAUTHORIZED, "unauthenticated");
        let answer = setup.call(method, &path, body, Some(&intruder)).await;
        assert_refused(&answer, StatusCode::FORBIDDEN, "forbidden");
        let template = path.replace(&id.to_string(), "{id}");
        if let Some(operation) = document["paths"][&template].get(method.to_lowercase()) {
            for status in ["401", "403"] {
                assert!(operation["responses"].get(status).is_some(), "{method} {template} does not document {status}");
            }
        }
    }

    // Health and the static playground page stay open.
    let health = setup.call("GET", "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK, "{}", health.text);
    assert_eq!(setup.call("GET", "/graphql", None, None).await.status, StatusCode::OK);
    assert!(
        setup
            .app
            .app
            .service
            .runtimes(provisioner::service::RuntimeQuery::everything(), None, Some(10))
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn a_token_is_reviewed_once_within_the_cache_time() {
    let setup = Setup::start("cluster-provisioner").await;
    let token = setup.token("host-cluster-controller", AUDIENCE).await;
    for _ in 0..3 {
        assert_eq!(setup.call("GET", "/api/v1/openapi.json", None, Some(&token)).await.status, StatusCode::OK);
    }
    let metrics = setup.app.metrics().await;
    assert!(metrics.contains(r#"provisioner_token_reviews_total{result="authenticated"} 1"#), "{metrics}");

    let other = setup.token("host-cluster-controller", AUDIENCE).await;
    assert_eq!(setup.call("GET", "/api/v1/openapi.json", None, Some(&other)).await.status, StatusCode::OK);
    let metrics = setup.app.metrics().await;
    assert!(metrics.contains(r#"provisioner_token_reviews_total{result="authenticated"} 2"#), "{metrics}");
}

#[tokio::test]
async fn without_the_token_review_role_the_service_refuses_rather_than_opens() {
    // `intruder` has none of the manifest's permissions, so its TokenReviews are forbidden.
    let setup = Setup::start("intruder").await;
    let token = setup.token("host-cluster-controller", AUDIENCE).await;
    let answer = setup.call("GET", "/api/v1/openapi.json", None, Some(&token)).await;
    assert_refused(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
}

#[tokio::test]
async fn enabled_without_a_cluster_refuses_everything_but_health() {
    let app = spawn_app_with(Backend::Sqlite, &[("APP_AUTH_ENABLED", "true")], None).await;
    let answer = app.post_provision(&provision_body("no-cluster")).await;
    assert_refused(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert!(answer.json()["error"]["message"].as_str().unwrap().contains("Kubernetes cluster"), "{}", answer.text);
    let answer =
        app.request("POST", "/graphql", Some(&json!({ "query": "{ runtimes { edges { cursor } } }" })), &[]).await;
    assert_refused(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_subscription_authenticates_in_connection_init_and_follows_an_operation_to_its_end() {
    let setup = Setup::start("cluster-provisioner").await;
    let token = setup.token("host-cluster-controller", AUDIENCE).await;

    // No token in connection_init: the connection is refused with the reason.
    let mut anonymous = Subscriber::connect(&setup.app).await;
    anonymous.send(json!({ "type": "connection_init", "payload": {} })).await;
    let refused = anonymous.next().await;
    assert!(refused["close"].as_str().is_some_and(|reason| reason.contains("Bearer")), "{refused}");
    let mut intruder = Subscriber::connect(&setup.app).await;
    let foreign = setup.token("intruder", AUDIENCE).await;
    intruder
        .send(json!({ "type": "connection_init", "payload": { "Authorization": format!("Bearer {foreign}") } }))
        .await;
    let refused = intruder.next().await;
    assert!(refused["close"].as_str().is_some_and(|reason| reason.contains("may not use")), "{refused}");

    let accepted = setup.call("POST", "/api/v1/provisions", Some(&provision_body("authn-events")), Some(&token)).await;
    let operation_id = accepted.json()["operationId"].as_str().unwrap().to_owned();
    let query = "subscription($id: String!) { operationEvents(id: $id, logs: true) { status { state stage lastError { reason } } logLine } }";
    let payload = json!({ "Authorization": format!("Bearer {token}") });
    // Two subscribers of one operation (they share its watch).
    let mut subscribers = Vec::new();
    for _ in 0..2 {
        let mut subscriber =
            Subscriber::subscribed(&setup.app, payload.clone(), query, json!({ "id": operation_id })).await;
        let first = subscriber.next().await;
        assert_eq!(first["payload"]["data"]["operationEvents"]["status"]["state"], "Pending", "{first}");
        subscribers.push(subscriber);
    }

    // The operation ends (cancelled while queued): the last event is its final state, then the subscription ends.
    let cancel = setup.call("POST", &format!("/api/v1/operations/{operation_id}/cancel"), None, Some(&token)).await;
    assert_eq!(cancel.status, StatusCode::ACCEPTED, "{}", cancel.text);
    for mut subscriber in subscribers {
        let last = subscriber.next().await;
        let status = &last["payload"]["data"]["operationEvents"]["status"];
        assert_eq!(
            (status["state"].as_str(), status["lastError"]["reason"].as_str()),
            (Some("Failed"), Some("cancelled")),
            "{last}"
        );
        assert_eq!(subscriber.next().await, json!({ "id": "1", "type": "complete" }));
    }
}

/// 300 callers without a token that send a body slowly hold nothing: each is refused before its body is read, the
/// probes answer, and an allowed caller is served.
#[tokio::test]
async fn strangers_sending_slow_bodies_cannot_stall_the_service() {
    let setup = Setup::start("cluster-provisioner").await;
    let stalled: Vec<_> = (0..300)
        .map(|_| {
            let router = setup.app.app.router.clone();
            tokio::spawn(async move {
                let body = axum::body::Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>());
                let request = axum::http::Request::post("/api/v1/provisions")
                    .header("content-type", "application/json")
                    .body(body)
                    .unwrap();
                test_support::call(&router, request).await
            })
        })
        .collect();
    let refused = tokio::time::timeout(std::time::Duration::from_secs(20), futures::future::join_all(stalled))
        .await
        .expect("every stranger is answered without its body");
    for answer in refused {
        assert_refused(&answer.unwrap(), StatusCode::UNAUTHORIZED, "unauthenticated");
    }
    for probe in ["/livez", "/readyz"] {
        assert_eq!(setup.call("GET", probe, None, None).await.status, StatusCode::OK, "{probe}");
    }
    let token = setup.token("host-cluster-controller", AUDIENCE).await;
    let served = setup.call("POST", "/api/v1/provisions", Some(&provision_body("authn-slow")), Some(&token)).await;
    assert_eq!(served.status, StatusCode::ACCEPTED, "{}", served.text);
}

/// A WebSocket outlives the token it was opened with: the token is reviewed again while the socket is open, and
/// once it is revoked (its ServiceAccount deleted) the socket is closed.
#[tokio::test]
async fn a_websocket_is_closed_once_its_token_is_revoked() {
    let setup = Setup::start_with("cluster-provisioner", &[("APP_WEBSOCKET_REAUTHENTICATION_INTERVAL", "1s")]).await;
    let token = setup.token("host-cluster-controller", AUDIENCE).await;
    let accepted = setup.call("POST", "/api/v1/provisions", Some(&provision_body("authn-revoked")), Some(&token)).await;
    let operation_id = accepted.json()["operationId"].as_str().unwrap().to_owned();
    let query = "subscription($id: String!) { operationEvents(id: $id) { status { state } } }";
    let payload = json!({ "Authorization": format!("Bearer {token}") });
    let mut subscriber = Subscriber::subscribed(&setup.app, payload, query, json!({ "id": operation_id })).await;
    let first = subscriber.next().await;
    assert_eq!(first["payload"]["data"]["operationEvents"]["status"]["state"], "Pending", "{first}");
    assert!(!subscriber.ended_within(Duration::from_secs(3)).await, "re-reviews of a valid token keep the socket");

    let admin = setup.control_plane.admin_client().unwrap();
    Api::<ServiceAccount>::namespaced(admin, &setup.namespace)
        .delete("host-cluster-controller", &Default::default())
        .await
        .unwrap();
    // A review is cached for 30 s; the next one after that refuses the token.
    assert!(subscriber.ended_within(Duration::from_secs(45)).await, "the socket of a revoked token stays open");
}

/// Gives `account` of the setup's namespace `verbs` on `resources` of `runtimes.provisioner.kubeopera.io`, with a
/// ClusterRole and its binding, and waits until the API server's RBAC says so.
async fn grant(setup: &Setup, account: &str, verbs: &[&str], resources: &[&str]) {
    grant_in(setup, account, verbs, resources, None).await;
}

/// [`grant`] within one tenant's namespace (a RoleBinding of the ClusterRole there), or cluster-wide.
async fn grant_in(setup: &Setup, account: &str, verbs: &[&str], resources: &[&str], tenant: Option<&str>) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject};
    let admin = setup.control_plane.admin_client().unwrap();
    let name = format!("{account}-{}-{}", setup.namespace, tenant.unwrap_or("all"));
    let strings = |values: &[&str]| Some(values.iter().map(|value| value.to_string()).collect::<Vec<_>>());
    let role = ClusterRole {
        metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            api_groups: strings(&["provisioner.kubeopera.io"]),
            resources: strings(resources),
            verbs: verbs.iter().map(|verb| verb.to_string()).collect(),
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.unwrap();
    let metadata = ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() };
    let role_ref = RoleRef { api_group: Some("rbac.authorization.k8s.io".into()), kind: "ClusterRole".into(), name };
    let subjects = Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: account.into(),
        namespace: Some(setup.namespace.clone()),
        ..Subject::default()
    }]);
    match tenant {
        None => {
            let binding = ClusterRoleBinding { metadata, role_ref, subjects };
            Api::<ClusterRoleBinding>::all(admin.clone()).create(&PostParams::default(), &binding).await.unwrap();
        }
        Some(tenant) => {
            let binding = RoleBinding { metadata, role_ref, subjects };
            Api::<RoleBinding>::namespaced(admin.clone(), tenant)
                .create(&PostParams::default(), &binding)
                .await
                .unwrap();
        }
    }
    let resource = resources[0].split_once('/').map_or(resources[0], |(resource, _)| resource);
    let verb = if verbs[0] == "*" { "get" } else { verbs[0] };
    wait_until_allowed(setup, account, verb, resource, tenant).await;
}

async fn wait_until_allowed(setup: &Setup, account: &str, verb: &str, resource: &str, tenant: Option<&str>) {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let admin = setup.control_plane.admin_client().unwrap();
    let user = format!("system:serviceaccount:{}:{account}", setup.namespace);
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user),
            resource_attributes: Some(ResourceAttributes {
                group: Some("provisioner.kubeopera.io".into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                namespace: tenant.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    for _ in 0..100 {
        let answer =
            Api::<SubjectAccessReview>::all(admin.clone()).create(&PostParams::default(), &review).await.unwrap();
        if answer.status.is_some_and(|status| status.allowed) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("RBAC never allowed {account} what was granted");
}

/// A tenant is a namespace to RBAC: a caller bound in tenant A's namespace only acts on tenant A's runtimes,
/// and is refused for another tenant and for a request that names none (which asks for cluster-wide rights).
#[tokio::test]
async fn a_role_binding_in_a_tenants_namespace_confines_a_caller_to_that_tenant() {
    let setup = Setup::start_with("cluster-provisioner", &[("APP_AUTHZ_MODE", "rbac")]).await;
    let tenant_a = setup.control_plane.new_namespace("tenant").await.expect("namespace");
    let tenant_b = setup.control_plane.new_namespace("tenant").await.expect("namespace");
    for tenant in [&tenant_a, &tenant_b] {
        setup.app.auth.add_tenant_credential(tenant, &format!("cred-{tenant}"), aws_credential());
    }
    grant_in(&setup, "intruder", &["get", "list", "create"], &["runtimes"], Some(&tenant_a)).await;
    let token = setup.token("intruder", AUDIENCE).await;
    let bearer = format!("Bearer {token}");
    let call = async |method: &str, path: &str, body: Option<&Value>, tenant: Option<&str>| {
        let mut headers = vec![("authorization", bearer.as_str())];
        headers.extend(tenant.map(|tenant| ("Tenant", tenant)));
        setup.app.request(method, path, body, &headers).await
    };
    let body = |tenant: &str| {
        let mut body = provision_body("confined");
        body["clusterConfig"]["credentialId"] = json!(format!("cred-{tenant}"));
        body
    };

    let created = call("POST", "/api/v1/runtimes", Some(&body(&tenant_a)), Some(&tenant_a)).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text);
    assert_eq!(call("GET", "/api/v1/runtimes", None, Some(&tenant_a)).await.status, StatusCode::OK);
    let refused = call("POST", "/api/v1/runtimes", Some(&body(&tenant_b)), Some(&tenant_b)).await;
    assert_refused(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert_refused(&call("GET", "/api/v1/runtimes", None, Some(&tenant_b)).await, StatusCode::FORBIDDEN, "forbidden");
    assert_refused(&call("GET", "/api/v1/runtimes", None, None).await, StatusCode::FORBIDDEN, "forbidden");
    let query = json!({ "query": "{ runtimes { edges { node { id } } } }" });
    let over_graphql = call("POST", "/graphql", Some(&query), Some(&tenant_b)).await;
    assert_refused(&over_graphql, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(call("POST", "/graphql", Some(&query), Some(&tenant_a)).await.status, StatusCode::OK);
}

/// A retry runs under the failed run's own approval policy; when that holds back less than the runtime's, only a
/// caller who may approve plans may retry it, over REST and GraphQL, as asking for that policy on an upgrade.
#[tokio::test]
async fn a_retry_under_a_looser_approval_policy_needs_the_right_to_approve() {
    let setup = Setup::start_with("cluster-provisioner", &[("APP_AUTHZ_MODE", "rbac")]).await;
    grant(&setup, "intruder", &["get", "create", "update"], &["runtimes"]).await;
    grant(&setup, "host-cluster-controller", &["*"], &["runtimes", "runtimes/approval"]).await;
    let (full, retrier) =
        (setup.token("host-cluster-controller", AUDIENCE).await, setup.token("intruder", AUDIENCE).await);
    let mut body = provision_body("retry-manual");
    body["runtimeInput"]["approvalPolicy"] = json!("manual");
    let created = setup.call("POST", "/api/v1/provisions", Some(&body), Some(&full)).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text);
    let operation = created.json()["operationId"].as_str().unwrap().to_owned();
    setup.app.database.set_operation_columns(&operation, [("approval_policy", "auto".into())]).await;
    setup.app.fail_operation(&operation, "job_failed").await;

    let retry = format!("/api/v1/operations/{operation}/retry");
    let refused = setup.call("POST", &retry, None, Some(&retrier)).await;
    assert_refused(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert!(refused.text.contains("may not update runtimes/approval"), "{}", refused.text);
    let mutation = "mutation($id: String!) { retryOperation(id: $id) { id } }";
    let over_graphql = setup.graphql(mutation, json!({ "id": operation }), Some(&retrier)).await.json();
    assert_eq!(over_graphql["errors"][0]["extensions"]["code"], "FORBIDDEN", "{over_graphql}");
    // host-cluster-controller gets past authorization to the service (which, without a Job cache in this setup,
    // cannot tell whether the failed run's Job still runs).
    let retried = setup.call("POST", &retry, None, Some(&full)).await;
    assert_ne!(retried.status, StatusCode::FORBIDDEN, "{}", retried.text);
}

/// With `APP_AUTHZ_MODE=rbac` Kubernetes RBAC decides what each caller may do: a reader bound to get and list
/// reads runtimes but may not create, delete or read a kubeconfig; host-cluster-controller, bound to everything
/// including the subresources, may.
#[tokio::test]
async fn rbac_decides_what_each_caller_may_do() {
    let setup = Setup::start_with("cluster-provisioner", &[("APP_AUTHZ_MODE", "rbac")]).await;
    grant(&setup, "intruder", &["get", "list"], &["runtimes"]).await;
    grant(&setup, "host-cluster-controller", &["*"], &["runtimes", "runtimes/kubeconfig", "runtimes/logs"]).await;
    let full = setup.token("host-cluster-controller", AUDIENCE).await;
    let reader = setup.token("intruder", AUDIENCE).await;

    let created = setup.call("POST", "/api/v1/provisions", Some(&provision_body("rbac-a")), Some(&full)).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/provisions/{id}");
    assert_eq!(setup.call("GET", &path, None, Some(&reader)).await.status, StatusCode::OK);
    assert_eq!(setup.call("GET", "/api/v1/provisions", None, Some(&reader)).await.status, StatusCode::OK);
    let resource = format!("/api/v1/runtimes/{id}");
    assert_eq!(setup.call("GET", &resource, None, Some(&reader)).await.status, StatusCode::OK);
    // A caller bound to nothing reads nothing, on every route (a route added later included).
    let stranger = setup.token("stranger", AUDIENCE).await;
    for route in [&resource, "/api/v1/runtimes", &path, "/api/v1/provisions"] {
        let answer = setup.call("GET", route, None, Some(&stranger)).await;
        assert_refused(&answer, StatusCode::FORBIDDEN, "forbidden");
    }
    let body = provision_body("rbac-b");
    assert_refused(
        &setup.call("POST", "/api/v1/provisions", Some(&body), Some(&reader)).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    for path in [&path, &resource] {
        assert_refused(&setup.call("DELETE", path, None, Some(&reader)).await, StatusCode::FORBIDDEN, "forbidden");
    }
    let kubeconfig = format!("{path}/kubeconfig");
    assert_refused(&setup.call("GET", &kubeconfig, None, Some(&reader)).await, StatusCode::FORBIDDEN, "forbidden");
    let operation_id = created.json()["operationId"].as_str().unwrap().to_owned();
    let events_with_logs = format!("/api/v1/operations/{operation_id}/events?logs=true");
    let refused = setup.call("GET", &events_with_logs, None, Some(&reader)).await;
    assert_refused(&refused, StatusCode::FORBIDDEN, "forbidden");

    let query = documents::KUBECONFIG;
    let read = setup.graphql(query, json!({ "id": id }), Some(&reader)).await.json();
    assert_eq!(read["errors"][0]["extensions"]["code"], "FORBIDDEN", "{read}");
    let mutation = documents::DEPROVISION;
    let refused = setup.graphql(mutation, json!({ "id": id }), Some(&reader)).await.json();
    assert_eq!(refused["errors"][0]["extensions"]["code"], "FORBIDDEN", "{refused}");

    // Allowed, and only not ready: no cluster was built.
    assert_refused(&setup.call("GET", &kubeconfig, None, Some(&full)).await, StatusCode::CONFLICT, "not_ready");
    let cancel = format!("/api/v1/operations/{}/cancel", created.json()["operationId"].as_str().unwrap());
    assert_refused(&setup.call("POST", &cancel, None, Some(&reader)).await, StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(setup.call("POST", &cancel, None, Some(&full)).await.status, StatusCode::ACCEPTED);

    // A retry needs what asking for the operation needed: the cancelled provisioning's retry `create`, which
    // `update` alone does not give.
    grant(&setup, "stranger", &["update"], &["runtimes"]).await;
    let retry = format!("/api/v1/operations/{operation_id}/retry");
    let refused = setup.call("POST", &retry, None, Some(&stranger)).await;
    assert_refused(&refused, StatusCode::FORBIDDEN, "forbidden");
    assert!(refused.text.contains("may not create runtimes"), "{}", refused.text);
    // An upgrade whose own approval policy holds back less than its runtime's needs the right to approve plans;
    // a stricter one does not.
    let mut strict = provision_body("rbac-manual");
    strict["runtimeInput"]["approvalPolicy"] = json!("manual");
    let strict = setup.call("POST", "/api/v1/provisions", Some(&strict), Some(&full)).await.json();
    let upgrade = json!({ "workerPool": { "maxSize": 8 } });
    let with_policy =
        |policy: &str| format!("/api/v1/runtimes/{}?approvalPolicy={policy}", strict["id"].as_str().unwrap());
    let looser = setup.call("PATCH", &with_policy("auto"), Some(&upgrade), Some(&stranger)).await;
    assert_refused(&looser, StatusCode::FORBIDDEN, "forbidden");
    assert!(looser.text.contains("may not update runtimes/approval"), "{}", looser.text);
    let stricter = setup.call("PATCH", &with_policy("manual"), Some(&upgrade), Some(&stranger)).await;
    assert_ne!(stricter.status, StatusCode::FORBIDDEN, "{}", stricter.text);
    // host-cluster-controller gets past authorization to the service (which, without a Job cache in this setup,
    // cannot tell whether a Job still runs).
    let retried = setup.call("POST", &retry, None, Some(&full)).await;
    assert_refused(&retried, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
}
