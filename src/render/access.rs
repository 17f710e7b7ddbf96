//! Sign-in as the modules take it: vanilla's structured authentication configuration for kube-apiserver, which
//! trusts several issuers, and EKS's one OIDC identity provider.

use serde::Serialize;
use serde_json::{Value, json};

use super::MapEntry;
use crate::domain::{KubernetesAccess, OidcProvider};

/// kube-apiserver's `AuthenticationConfiguration` as compact JSON (which is YAML, the file's format): one JWT
/// authenticator per issuer, none without. Every node writes it to a file the API server reloads when it changes.
pub(super) fn authentication_config(access: Option<&KubernetesAccess>) -> String {
    let providers = access.map(KubernetesAccess::oidc_providers).unwrap_or_default();
    let jwt: Vec<Value> = providers.iter().map(jwt_authenticator).collect();
    // v1beta1: served by every Kubernetes version the provisioner builds (1.30 and later).
    json!({ "apiVersion": "apiserver.config.k8s.io/v1beta1", "kind": "AuthenticationConfiguration", "jwt": jwt })
        .to_string()
}

fn jwt_authenticator(provider: &OidcProvider) -> Value {
    let mut issuer = json!({ "url": provider.issuer_url, "audiences": [provider.client_id] });
    if let Some(bundle) = &provider.ca_bundle {
        issuer["certificateAuthority"] = json!(bundle);
    }
    let mut claims = json!({ "username": { "claim": provider.user_claim(), "prefix": provider.user_prefix() } });
    if let Some(groups) = &provider.groups_claim {
        claims["groups"] = json!({ "claim": groups, "prefix": provider.group_prefix() });
    }
    let rules: Vec<Value> = (provider.required_claims.iter().flatten())
        .map(|required| json!({ "claim": required.claim, "requiredValue": required.value }))
        .collect();
    let mut authenticator = json!({ "issuer": issuer, "claimMappings": claims });
    if !rules.is_empty() {
        authenticator["claimValidationRules"] = json!(rules);
    }
    authenticator
}

/// The eks module's `oidc_identity_provider`.
#[derive(Serialize)]
pub(super) struct EksIdentityProvider {
    issuer_url: String,
    client_id: String,
    username_claim: String,
    username_prefix: String,
    /// Empty: no groups.
    groups_claim: String,
    groups_prefix: String,
    required_claims: Vec<MapEntry>,
}

impl EksIdentityProvider {
    /// The one provider validation lets an EKS runtime have.
    pub(super) fn of(access: Option<&KubernetesAccess>) -> Option<Self> {
        let provider = access?.oidc_providers().first()?;
        let required = provider.required_claims.iter().flatten();
        Some(EksIdentityProvider {
            issuer_url: provider.issuer_url.clone(),
            client_id: provider.client_id.clone(),
            username_claim: provider.user_claim().to_owned(),
            username_prefix: provider.user_prefix().to_owned(),
            groups_claim: provider.groups_claim.clone().unwrap_or_default(),
            groups_prefix: provider.group_prefix().to_owned(),
            required_claims: MapEntry::aligned(
                required.map(|claim| (claim.claim.clone(), claim.value.clone())).collect(),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::RequiredClaim;

    fn provider() -> OidcProvider {
        OidcProvider {
            issuer_url: "https://login.example.com".into(),
            client_id: "kubeopera".into(),
            username_claim: Some("email".into()),
            username_prefix: None,
            groups_claim: Some("groups".into()),
            groups_prefix: Some(String::new()),
            required_claims: Some(vec![RequiredClaim { claim: "hd".into(), value: "example.com".into() }]),
            ca_bundle: Some("-----BEGIN CERTIFICATE-----\n".into()),
        }
    }

    #[test]
    fn each_issuer_is_a_jwt_authenticator_with_its_defaults() {
        let access = KubernetesAccess { oidc: Some(vec![provider()]), administrators: None };
        let config: Value = serde_json::from_str(&authentication_config(Some(&access))).unwrap();
        assert_eq!(config["kind"], "AuthenticationConfiguration");
        let jwt = &config["jwt"][0];
        assert_eq!(jwt["issuer"]["audiences"], json!(["kubeopera"]));
        assert_eq!(jwt["issuer"]["certificateAuthority"], "-----BEGIN CERTIFICATE-----\n");
        assert_eq!(jwt["claimMappings"]["username"], json!({ "claim": "email", "prefix": "oidc:" }));
        assert_eq!(jwt["claimMappings"]["groups"], json!({ "claim": "groups", "prefix": "" }));
        assert_eq!(jwt["claimValidationRules"], json!([{ "claim": "hd", "requiredValue": "example.com" }]));
    }

    #[test]
    fn without_issuers_the_configuration_has_no_authenticator() {
        let config: Value = serde_json::from_str(&authentication_config(None)).unwrap();
        assert_eq!(config["jwt"], json!([]));
        assert!(EksIdentityProvider::of(None).is_none());
    }
}
