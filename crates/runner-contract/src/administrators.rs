//! The users and groups a runtime's request makes administrators of its cluster: terraform-runner binds them to
//! `cluster-admin` after each apply that names them, and unbinds whoever was taken off the list.

use serde::{Deserialize, Serialize};

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

impl SubjectKind {
    /// What an RBAC subject's `kind` says.
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::User => "User",
            SubjectKind::Group => "Group",
        }
    }
}
