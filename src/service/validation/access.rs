//! Sign-in through OIDC and the cluster's administrators: what each topology can do, and values that end up in
//! the API server's configuration checked before anything is recorded.

use std::collections::BTreeSet;

use super::{Findings, Invalid, InvalidReason};
use crate::domain::{ClusterConfig, KubernetesAccess, OidcProvider, Topology};

const FIELD: &str = "clusterConfig.kubernetes";
/// kube-apiserver accepts any number of issuers; five covers an organisation's and a few partners'.
const MAX_VANILLA_ISSUERS: usize = 5;
/// EKS associates one OIDC identity provider with a cluster.
const MAX_EKS_ISSUERS: usize = 1;
const MAX_ADMINISTRATORS: usize = 20;
const MAX_REQUIRED_CLAIMS: usize = 10;
/// The configuration travels in an SSM parameter of at most 8 KB with everything else of an issuer.
const MAX_CA_BUNDLE_BYTES: usize = 6 * 1024;
const MAX_TEXT: usize = 256;

pub(super) fn check_access(config: &ClusterConfig, findings: &mut Findings) {
    let Some(access) = &config.kubernetes else { return };
    check_providers(config.topology, access, findings);
    let admins = access.admins();
    if config.topology == Topology::Gke && !admins.is_empty() {
        findings.check(Err(Invalid::new(
            InvalidReason::NotAllowed,
            format!("{FIELD}.administrators"),
            "GKE grants cluster-admin through IAM (roles/container.admin), which this provisioner does not manage: \
             leave administrators out for gke",
        )));
        return;
    }
    if admins.len() > MAX_ADMINISTRATORS {
        findings.check(Err(Invalid::new(
            InvalidReason::OutOfRange,
            format!("{FIELD}.administrators"),
            format!("at most {MAX_ADMINISTRATORS} administrators are allowed"),
        )));
    }
    for (index, admin) in admins.iter().enumerate() {
        let field = format!("{FIELD}.administrators[{index}].name");
        findings.check(check_name(&field, &admin.name));
    }
}

fn check_providers(topology: Topology, access: &KubernetesAccess, findings: &mut Findings) {
    let providers = access.oidc_providers();
    let field = format!("{FIELD}.oidc");
    let most = match topology {
        Topology::VanillaKubeadm => MAX_VANILLA_ISSUERS,
        Topology::Eks => MAX_EKS_ISSUERS,
        Topology::Gke if !providers.is_empty() => {
            findings.check(Err(Invalid::new(
                InvalidReason::NotAllowed,
                field,
                "GKE signs in through Google identities or Identity Service for GKE, which this provisioner does not \
                 configure: leave oidc out for gke",
            )));
            return;
        }
        Topology::Gke => return,
    };
    if providers.len() > most {
        findings.check(Err(Invalid::new(
            InvalidReason::OutOfRange,
            field.clone(),
            format!("{} takes at most {most} OIDC issuer(s), got {}", topology.as_str(), providers.len()),
        )));
    }
    let mut issuers = BTreeSet::new();
    for (index, provider) in providers.iter().enumerate() {
        let field = format!("{field}[{index}]");
        if !issuers.insert(&provider.issuer_url) {
            findings.check(Err(Invalid::new(
                InvalidReason::Conflict,
                format!("{field}.issuerUrl"),
                "names an issuer another entry names already",
            )));
        }
        check_provider(topology, &field, provider, findings);
    }
}

fn check_provider(topology: Topology, field: &str, provider: &OidcProvider, findings: &mut Findings) {
    findings.check(check_issuer_url(&format!("{field}.issuerUrl"), &provider.issuer_url));
    findings.check(check_text(&format!("{field}.clientId"), &provider.client_id));
    for (name, value) in [("usernameClaim", &provider.username_claim), ("groupsClaim", &provider.groups_claim)] {
        if let Some(value) = value {
            findings.check(check_text(&format!("{field}.{name}"), value));
        }
    }
    for (name, value) in [("usernamePrefix", &provider.username_prefix), ("groupsPrefix", &provider.groups_prefix)] {
        if let Some(value) = value {
            findings.check(check_prefix(&format!("{field}.{name}"), value));
        }
    }
    let claims = provider.required_claims.as_deref().unwrap_or_default();
    if claims.len() > MAX_REQUIRED_CLAIMS {
        findings.check(Err(Invalid::new(
            InvalidReason::OutOfRange,
            format!("{field}.requiredClaims"),
            format!("at most {MAX_REQUIRED_CLAIMS} required claims are allowed"),
        )));
    }
    for (index, claim) in claims.iter().enumerate() {
        findings.check(check_text(&format!("{field}.requiredClaims[{index}].claim"), &claim.claim));
        findings.check(check_printable(&format!("{field}.requiredClaims[{index}].value"), &claim.value));
    }
    if let Some(bundle) = &provider.ca_bundle {
        findings.check(check_ca_bundle(topology, &format!("{field}.caBundle"), bundle));
    }
}

type Check = Result<(), Invalid>;

/// `https://host[:port][/path]`, no query or fragment: the API server fetches discovery from it and compares it
/// with the tokens' `iss` character for character.
fn check_issuer_url(field: &str, value: &str) -> Check {
    let refuse = |message: &str| Err(Invalid::new(InvalidReason::Format, field, message.to_owned()));
    let Ok(url) = reqwest::Url::parse(value) else { return refuse("is not a URL") };
    if url.scheme() != "https" {
        return refuse("must be an https:// URL: the API server fetches the issuer's keys from it");
    }
    if url.host_str().is_none_or(str::is_empty) || url.query().is_some() || url.fragment().is_some() {
        return refuse("must be https://host[:port][/path], without a query or a fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return refuse("must not carry credentials");
    }
    check_printable(field, value)
}

fn check_text(field: &str, value: &str) -> Check {
    if value.is_empty() {
        return Err(Invalid::new(InvalidReason::Required, field, "must not be empty"));
    }
    if value.chars().any(char::is_whitespace) {
        return Err(Invalid::new(InvalidReason::Format, field, "must not contain spaces"));
    }
    check_printable(field, value)
}

fn check_printable(field: &str, value: &str) -> Check {
    if value.chars().count() > MAX_TEXT {
        return Err(Invalid::new(InvalidReason::OutOfRange, field, format!("must be at most {MAX_TEXT} characters")));
    }
    if value.chars().any(char::is_control) {
        return Err(Invalid::new(InvalidReason::Format, field, "must not contain control characters"));
    }
    Ok(())
}

/// Kubernetes' own users and groups begin with `system:`; nobody signing in may pass for one.
fn check_prefix(field: &str, value: &str) -> Check {
    if value.starts_with("system:") {
        return Err(Invalid::new(InvalidReason::NotAllowed, field, "must not begin with system:, Kubernetes' own"));
    }
    if value.chars().any(char::is_whitespace) {
        return Err(Invalid::new(InvalidReason::Format, field, "must not contain spaces"));
    }
    check_printable(field, value)
}

fn check_name(field: &str, value: &str) -> Check {
    check_text(field, value)?;
    if value.starts_with("system:") {
        return Err(Invalid::new(
            InvalidReason::NotAllowed,
            field,
            "must not name one of Kubernetes' own users or groups (system:...)",
        ));
    }
    Ok(())
}

fn check_ca_bundle(topology: Topology, field: &str, bundle: &str) -> Check {
    if topology != Topology::VanillaKubeadm {
        return Err(Invalid::new(
            InvalidReason::NotAllowed,
            field,
            "EKS trusts only issuers with a publicly trusted certificate: leave caBundle out",
        ));
    }
    if bundle.len() > MAX_CA_BUNDLE_BYTES {
        return Err(Invalid::new(
            InvalidReason::OutOfRange,
            field,
            format!("must be at most {MAX_CA_BUNDLE_BYTES} bytes"),
        ));
    }
    let certificates = bundle.matches("-----BEGIN CERTIFICATE-----").count();
    if certificates == 0 || certificates != bundle.matches("-----END CERTIFICATE-----").count() {
        return Err(Invalid::new(InvalidReason::Format, field, "must be PEM certificates (BEGIN CERTIFICATE)"));
    }
    if bundle.contains("PRIVATE KEY") {
        return Err(Invalid::new(InvalidReason::Format, field, "must hold certificates only, never a private key"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::domain::{
        Administrator, KubernetesAccess, OidcProvider, ProvisionRequest, RequiredClaim, SubjectKind, Topology,
    };
    use crate::service::validation::tests::policy;

    fn provider(issuer: &str) -> OidcProvider {
        OidcProvider {
            issuer_url: issuer.to_owned(),
            client_id: "kubeopera".into(),
            username_claim: Some("email".into()),
            username_prefix: None,
            groups_claim: Some("groups".into()),
            groups_prefix: Some("".into()),
            required_claims: Some(vec![RequiredClaim { claim: "hd".into(), value: "example.com".into() }]),
            ca_bundle: None,
        }
    }

    fn with_access(topology: Topology, access: KubernetesAccess) -> ProvisionRequest {
        let mut request = ProvisionRequest::example(topology);
        request.cluster_config.kubernetes = Some(access);
        request
    }

    fn first_refused(request: &ProvisionRequest) -> Option<String> {
        policy().validate(request).err().map(|rejected| rejected.first.field)
    }

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn issuers_and_administrators_pass_where_the_cloud_takes_them() {
        let admins = Some(vec![
            Administrator { kind: SubjectKind::User, name: "oidc:alice@example.com".into() },
            Administrator { kind: SubjectKind::Group, name: "platform-admins".into() },
        ]);
        let two = vec![
            provider("https://login.example.com"),
            OidcProvider { ca_bundle: Some(CA.into()), ..provider("https://dex.internal:5556/dex") },
        ];
        let vanilla = KubernetesAccess { oidc: Some(two), administrators: admins.clone() };
        assert_eq!(first_refused(&with_access(Topology::VanillaKubeadm, vanilla)), None);
        let eks = KubernetesAccess { oidc: Some(vec![provider("https://login.example.com")]), administrators: admins };
        assert_eq!(first_refused(&with_access(Topology::Eks, eks)), None);
        let gke = KubernetesAccess { oidc: None, administrators: None };
        assert_eq!(first_refused(&with_access(Topology::Gke, gke)), None);
    }

    #[test]
    fn bad_sign_in_is_refused_naming_the_field() {
        let one = |provider: OidcProvider| KubernetesAccess { oidc: Some(vec![provider]), administrators: None };
        let base = provider("https://login.example.com");
        let cases: Vec<(Topology, KubernetesAccess, &str)> = vec![
            (
                Topology::VanillaKubeadm,
                one(provider("http://login.example.com")),
                "clusterConfig.kubernetes.oidc[0].issuerUrl",
            ),
            (
                Topology::VanillaKubeadm,
                one(provider("https://login.example.com/?tenant=a")),
                "clusterConfig.kubernetes.oidc[0].issuerUrl",
            ),
            (Topology::VanillaKubeadm, one(provider("not a url")), "clusterConfig.kubernetes.oidc[0].issuerUrl"),
            (
                Topology::VanillaKubeadm,
                one(OidcProvider { client_id: "".into(), ..base.clone() }),
                "clusterConfig.kubernetes.oidc[0].clientId",
            ),
            (
                Topology::VanillaKubeadm,
                one(OidcProvider { username_prefix: Some("system:".into()), ..base.clone() }),
                "clusterConfig.kubernetes.oidc[0].usernamePrefix",
            ),
            (
                Topology::VanillaKubeadm,
                one(OidcProvider { ca_bundle: Some("not pem".into()), ..base.clone() }),
                "clusterConfig.kubernetes.oidc[0].caBundle",
            ),
            (
                Topology::Eks,
                one(OidcProvider { ca_bundle: Some(CA.into()), ..base.clone() }),
                "clusterConfig.kubernetes.oidc[0].caBundle",
            ),
            (
                Topology::Eks,
                KubernetesAccess {
                    oidc: Some(vec![base.clone(), provider("https://other.example.com")]),
                    administrators: None,
                },
                "clusterConfig.kubernetes.oidc",
            ),
            (Topology::Gke, one(base.clone()), "clusterConfig.kubernetes.oidc"),
            (
                Topology::Gke,
                KubernetesAccess {
                    oidc: None,
                    administrators: Some(vec![Administrator { kind: SubjectKind::User, name: "alice".into() }]),
                },
                "clusterConfig.kubernetes.administrators",
            ),
            (
                Topology::VanillaKubeadm,
                KubernetesAccess { oidc: Some(vec![base.clone(), base.clone()]), administrators: None },
                "clusterConfig.kubernetes.oidc[1].issuerUrl",
            ),
            (
                Topology::VanillaKubeadm,
                KubernetesAccess {
                    oidc: None,
                    administrators: Some(vec![Administrator {
                        kind: SubjectKind::Group,
                        name: "system:masters".into(),
                    }]),
                },
                "clusterConfig.kubernetes.administrators[0].name",
            ),
        ];
        for (topology, access, field) in cases {
            let request = with_access(topology, access.clone());
            assert_eq!(first_refused(&request).as_deref(), Some(field), "{topology:?} {access:?}");
        }
    }
}
