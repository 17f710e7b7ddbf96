//! Who signs in to a cluster's Kubernetes API besides the provisioner: the organisation's identity providers
//! (OpenID Connect), and the users and groups that administer it.

use async_graphql::{InputObject, SimpleObject};
pub use runner_contract::administrators::{Administrator, SubjectKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The prefix both of an OIDC user's name and groups get when the request names none: nobody signing in through
/// an identity provider can pass for a Kubernetes user or group (`system:masters`) or a certificate's.
pub const DEFAULT_OIDC_PREFIX: &str = "oidc:";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "KubernetesAccessInput")]
pub struct KubernetesAccess {
    /// Identity providers whose ID tokens the API server accepts: up to 5 on vanilla_kubeadm, 1 on EKS; GKE
    /// refuses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<Vec<OidcProvider>>,
    /// Users and groups bound to `cluster-admin`, as the identity provider names them (prefix included); `[]`
    /// removes the binding. Left out, the provisioner leaves the cluster's bindings alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub administrators: Option<Vec<Administrator>>,
}

/// An OpenID Connect issuer the cluster's API server trusts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "OidcProviderInput")]
pub struct OidcProvider {
    /// `https://` URL of the issuer, exactly as its tokens' `iss` claim says.
    pub issuer_url: String,
    /// The audience (`aud`) tokens must be issued for.
    pub client_id: String,
    /// The claim naming the user; `sub` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_claim: Option<String>,
    /// Put before every user name; `oidc:` when left out, `""` for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_prefix: Option<String>,
    /// The claim listing the user's groups; no groups when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// Put before every group name; `oidc:` when left out, `""` for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_prefix: Option<String>,
    /// Claims a token must carry, each with exactly this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_claims: Option<Vec<RequiredClaim>>,
    /// PEM certificates of the issuer's CA when it is not publicly trusted (vanilla_kubeadm only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, InputObject, SimpleObject, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[graphql(input_name = "RequiredClaimInput")]
pub struct RequiredClaim {
    pub claim: String,
    pub value: String,
}

impl OidcProvider {
    pub fn user_claim(&self) -> &str {
        self.username_claim.as_deref().unwrap_or("sub")
    }

    pub fn user_prefix(&self) -> &str {
        self.username_prefix.as_deref().unwrap_or(DEFAULT_OIDC_PREFIX)
    }

    pub fn group_prefix(&self) -> &str {
        self.groups_prefix.as_deref().unwrap_or(DEFAULT_OIDC_PREFIX)
    }
}

impl KubernetesAccess {
    /// This access replacing `current` whole. Administrators it leaves out where `current` had some become an
    /// empty list: a list the next apply makes the binding say (that is, removes it); a runtime that never named
    /// administrators keeps none, and its runs leave the cluster's bindings alone.
    pub fn replacing(&self, current: Option<&KubernetesAccess>) -> KubernetesAccess {
        let had_administrators = current.is_some_and(|current| !current.admins().is_empty());
        let mut replacement = self.clone();
        if replacement.administrators.is_none() && had_administrators {
            replacement.administrators = Some(Vec::new());
        }
        replacement
    }

    pub fn oidc_providers(&self) -> &[OidcProvider] {
        self.oidc.as_deref().unwrap_or_default()
    }

    pub fn admins(&self) -> &[Administrator] {
        self.administrators.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admins(names: &[&str]) -> KubernetesAccess {
        let administrators =
            names.iter().map(|name| Administrator { kind: SubjectKind::User, name: (*name).to_owned() }).collect();
        KubernetesAccess { oidc: None, administrators: Some(administrators) }
    }

    #[test]
    fn administrators_left_out_of_a_replacement_are_removed_and_never_named_stay_untouched() {
        let removed = KubernetesAccess::default().replacing(Some(&admins(&["alice"])));
        assert_eq!(removed.administrators, Some(Vec::new()), "the binding goes");
        assert_eq!(KubernetesAccess::default().replacing(None).administrators, None, "nothing to remove");
        assert_eq!(KubernetesAccess::default().replacing(Some(&admins(&[]))).administrators, None);
        assert_eq!(admins(&["bob"]).replacing(Some(&admins(&["alice"]))), admins(&["bob"]));
    }
}
