//! The users and groups a runtime's request makes administrators of its cluster: terraform-runner binds them to
//! `cluster-admin` after each apply that names them, and unbinds whoever was taken off the list.

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A user or a group that administers the cluster, as its authenticator names it (prefix included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::InputObject, async_graphql::SimpleObject))]
#[cfg_attr(feature = "graphql", graphql(input_name = "AdministratorInput"))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Administrator {
    pub kind: SubjectKind,
    pub name: String,
}

/// RBAC's spelling of a subject's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::Enum))]
#[cfg_attr(feature = "graphql", graphql(rename_items = "PascalCase"))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum SubjectKind {
    User,
    Group,
}

/// The ClusterRoleBinding `name` giving `cluster-admin` to exactly `administrators`, as the provisioner writes it
/// into a cluster (terraform-runner for the runtime's administrators, the service for the group of the kubeconfigs
/// it mints).
pub fn cluster_admin_binding(name: &str, administrators: &[Administrator]) -> ClusterRoleBinding {
    let subjects = administrators
        .iter()
        .map(|administrator| Subject {
            api_group: Some(RBAC_GROUP.to_owned()),
            kind: administrator.kind.as_str().to_owned(),
            name: administrator.name.clone(),
            namespace: None,
        })
        .collect();
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("app.kubernetes.io/managed-by".to_owned(), "cluster-provisioner".to_owned())].into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some(RBAC_GROUP.to_owned()),
            kind: "ClusterRole".to_owned(),
            name: "cluster-admin".to_owned(),
        },
        subjects: Some(subjects),
    }
}

impl SubjectKind {
    /// What an RBAC subject's `kind` says.
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::User => "User",
            SubjectKind::Group => "Group",
        }
    }
}
