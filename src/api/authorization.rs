//! Who may do what, by Kubernetes RBAC: with `APP_AUTHZ_MODE=rbac` every request is checked with a
//! SubjectAccessReview on the virtual resource `runtimes.provisioner.kubeopera.io` (subresources `kubeconfig` and
//! `logs`), as kube-rbac-proxy does, so that operators grant read-only access to people and full access to
//! host-cluster-controller with ordinary ClusterRoles. A request that names a tenant is asked about in the
//! tenant's namespace, so a RoleBinding there confines a caller to that tenant. Answers are cached briefly per
//! user, action and tenant.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

use crate::api::ttl_cache::TtlCache;
use crate::domain::OperationType;
use crate::domain::tenant::Tenant;

/// The API group of the virtual resource RBAC rules name.
pub const API_GROUP: &str = "provisioner.kubeopera.io";
pub const RESOURCE: &str = "runtimes";
/// How long an answer is reused: a revoked grant keeps working at most this long.
const CACHE_TTL: Duration = Duration::from_secs(30);
/// Bounds the memory of the cache.
const CACHE_CAPACITY: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Create,
    Update,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Delete => "delete",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subresource {
    Kubeconfig,
    Logs,
    /// Approving or rejecting plans, and choosing which plans wait (`update`): a grant of its own, so that the
    /// people who approve can be others than those who ask (as Kubernetes grants CSR approval).
    Approval,
}

impl Subresource {
    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Kubeconfig => "kubeconfig",
            Subresource::Logs => "logs",
            Subresource::Approval => "approval",
        }
    }
}

/// What a caller asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Action {
    pub verb: Verb,
    pub subresource: Option<Subresource>,
}

impl Action {
    pub const fn on_runtimes(verb: Verb) -> Action {
        Action { verb, subresource: None }
    }

    pub const fn on(subresource: Subresource) -> Action {
        Action { verb: Verb::Get, subresource: Some(subresource) }
    }

    /// Approving or rejecting a plan, or changing a runtime's approval policy: `update runtimes/approval`.
    pub const fn to_approve() -> Action {
        Action { verb: Verb::Update, subresource: Some(Subresource::Approval) }
    }

    /// What a retry of an operation of `operation_type` needs besides `update`: what asking for it needed (a
    /// deprovisioning `delete`, a provisioning `create`).
    pub fn to_retry(operation_type: OperationType) -> Action {
        match operation_type {
            OperationType::Provision => Action::on_runtimes(Verb::Create),
            OperationType::Deprovision => Action::on_runtimes(Verb::Delete),
            OperationType::Upgrade
            | OperationType::Hibernate
            | OperationType::WakeUp
            | OperationType::RenewCertificates => Action::on_runtimes(Verb::Update),
        }
    }

    /// As RBAC spells it: `get runtimes/kubeconfig`.
    pub fn describe(self) -> String {
        match self.subresource {
            None => format!("{} {RESOURCE}.{API_GROUP}", self.verb.as_str()),
            Some(subresource) => format!("{} {RESOURCE}/{}.{API_GROUP}", self.verb.as_str(), subresource.as_str()),
        }
    }
}

/// What a REST route does, by its method and path template; `None` for what any authenticated caller may read
/// (the OpenAPI document, the problem type pages). A route not listed reads runtimes, so a new route is never open to every caller.
/// GraphQL is checked field by field instead.
pub fn rest_action(method: &axum::http::Method, route: &str) -> Option<Action> {
    use axum::http::Method;
    let runtimes = Action::on_runtimes;
    match (method, route) {
        (&Method::GET, "/api/v1/provisions" | "/api/v1/runtimes") => Some(runtimes(Verb::List)),
        (&Method::POST, "/api/v1/provisions" | "/api/v1/runtimes") => Some(runtimes(Verb::Create)),
        (&Method::PATCH, "/api/v1/provisions/{id}" | "/api/v1/runtimes/{id}")
        | (
            &Method::POST,
            "/api/v1/provisions/{id}/hibernate"
            | "/api/v1/provisions/{id}/wake"
            | "/api/v1/runtimes/{id}/hibernate"
            | "/api/v1/runtimes/{id}/wake"
            | "/api/v1/runtimes/{id}/certificates/renewal"
            | "/api/v1/operations/{id}/cancel"
            | "/api/v1/operations/{id}/retry",
        ) => Some(runtimes(Verb::Update)),
        (&Method::POST, "/api/v1/operations/{id}/approve" | "/api/v1/operations/{id}/reject") => {
            Some(Action::to_approve())
        }
        (&Method::DELETE, "/api/v1/provisions/{id}" | "/api/v1/runtimes/{id}") => Some(runtimes(Verb::Delete)),
        // Whoever may read a kubeconfig may ask for a new one: it grants nothing more.
        (_, "/api/v1/provisions/{id}/kubeconfig" | "/api/v1/runtimes/{id}/kubeconfig/rotation") => {
            Some(Action::on(Subresource::Kubeconfig))
        }
        (_, "/api/v1/provisions/{id}/logs" | "/api/v1/operations/{id}/logs") => Some(Action::on(Subresource::Logs)),
        (_, "/api/v1/openapi.json" | "/api/v1/problems/{code}") => None,
        _ => Some(runtimes(Verb::Get)),
    }
}

/// The authenticated user as TokenReview described it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

/// What one answer is about: a user, an action, and the tenant the request named.
type Question = (User, Action, Option<Tenant>);

/// Asks Kubernetes with the service's own client.
pub struct Authorizer {
    api: Api<SubjectAccessReview>,
    cache: TtlCache<Question, bool>,
}

impl Authorizer {
    pub fn new(client: kube::Client) -> Self {
        Authorizer { api: Api::all(client), cache: TtlCache::new(CACHE_TTL, CACHE_CAPACITY) }
    }

    /// Whether RBAC allows `user` the `action` on the runtimes of `tenant`, a namespace to RBAC (see [`review`]).
    /// Errors are the Kubernetes API failing; they are not cached.
    pub async fn allows(&self, user: &User, action: Action, tenant: Option<&Tenant>) -> Result<bool, kube::Error> {
        let key = (user.clone(), action, tenant.cloned());
        if let Some(allowed) = self.cache.get(&key) {
            return Ok(allowed);
        }
        let answer = self.api.create(&PostParams::default(), &review(user, action, tenant)).await?;
        let allowed = answer.status.is_some_and(|status| status.allowed && status.denied != Some(true));
        self.cache.insert(key, allowed);
        Ok(allowed)
    }
}

/// The SubjectAccessReview of `action` by `user`. A tenant is the namespace of its runtimes, so a RoleBinding in
/// the tenant's namespace grants that tenant's runtimes only; a request that names no tenant is asked about
/// cluster-wide, which only a ClusterRoleBinding grants.
fn review(user: &User, action: Action, tenant: Option<&Tenant>) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            groups: Some(user.groups.clone()),
            resource_attributes: Some(ResourceAttributes {
                group: Some(API_GROUP.to_owned()),
                resource: Some(RESOURCE.to_owned()),
                subresource: action.subresource.map(|subresource| subresource.as_str().to_owned()),
                verb: Some(action.verb.as_str().to_owned()),
                namespace: tenant.map(|tenant| tenant.as_str().to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_is_asked_about_as_the_namespace_of_its_runtimes() {
        let user = User { name: "alice".to_owned(), groups: vec!["team-a".to_owned()] };
        let tenant = Tenant::parse("tenant-a").unwrap();
        let asked = review(&user, Action::on_runtimes(Verb::Delete), Some(&tenant)).spec;
        let attributes = asked.resource_attributes.unwrap();
        assert_eq!(
            (attributes.namespace.as_deref(), attributes.verb.as_deref(), attributes.resource.as_deref()),
            (Some("tenant-a"), Some("delete"), Some(RESOURCE))
        );
        let cluster_wide = review(&user, Action::on(Subresource::Logs), None).spec.resource_attributes.unwrap();
        assert_eq!((cluster_wide.namespace, cluster_wide.subresource.as_deref()), (None, Some("logs")));
    }

    #[test]
    fn rest_routes_map_to_their_rbac_actions() {
        use axum::http::Method;
        let cases = [
            (Method::GET, "/api/v1/provisions", Some(Action::on_runtimes(Verb::List))),
            (Method::POST, "/api/v1/provisions", Some(Action::on_runtimes(Verb::Create))),
            (Method::GET, "/api/v1/provisions/{id}", Some(Action::on_runtimes(Verb::Get))),
            (Method::PATCH, "/api/v1/provisions/{id}", Some(Action::on_runtimes(Verb::Update))),
            (Method::DELETE, "/api/v1/provisions/{id}", Some(Action::on_runtimes(Verb::Delete))),
            (Method::POST, "/api/v1/operations/{id}/cancel", Some(Action::on_runtimes(Verb::Update))),
            (Method::POST, "/api/v1/operations/{id}/retry", Some(Action::on_runtimes(Verb::Update))),
            (Method::GET, "/api/v1/operations/{id}", Some(Action::on_runtimes(Verb::Get))),
            (Method::GET, "/api/v1/provisions/{id}/kubeconfig", Some(Action::on(Subresource::Kubeconfig))),
            (Method::GET, "/api/v1/operations/{id}/logs", Some(Action::on(Subresource::Logs))),
            (Method::GET, "/api/v1/runtimes", Some(Action::on_runtimes(Verb::List))),
            (Method::GET, "/api/v1/runtimes/{id}", Some(Action::on_runtimes(Verb::Get))),
            (Method::POST, "/api/v1/runtimes", Some(Action::on_runtimes(Verb::Create))),
            (Method::PATCH, "/api/v1/runtimes/{id}", Some(Action::on_runtimes(Verb::Update))),
            (Method::POST, "/api/v1/runtimes/{id}/hibernate", Some(Action::on_runtimes(Verb::Update))),
            (Method::POST, "/api/v1/runtimes/{id}/wake", Some(Action::on_runtimes(Verb::Update))),
            (Method::POST, "/api/v1/runtimes/{id}/certificates/renewal", Some(Action::on_runtimes(Verb::Update))),
            (Method::POST, "/api/v1/runtimes/{id}/kubeconfig/rotation", Some(Action::on(Subresource::Kubeconfig))),
            (Method::DELETE, "/api/v1/runtimes/{id}", Some(Action::on_runtimes(Verb::Delete))),
            (Method::GET, "/api/v1/openapi.json", None),
            (Method::GET, "/api/v1/a-route-added-later", Some(Action::on_runtimes(Verb::Get))),
        ];
        for (method, route, expected) in cases {
            assert_eq!(rest_action(&method, route), expected, "{method} {route}");
        }
    }

    #[test]
    fn actions_are_described_as_rbac_names_them() {
        assert_eq!(Action::on_runtimes(Verb::Delete).describe(), "delete runtimes.provisioner.kubeopera.io");
        assert_eq!(Action::on(Subresource::Kubeconfig).describe(), "get runtimes/kubeconfig.provisioner.kubeopera.io");
    }
}
