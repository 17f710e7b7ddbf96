//! The admin kubeconfig a vanilla cluster's first control-plane node publishes to SSM comes from inside the
//! tenant's cluster, which its cluster-admins control: it is never passed on as it is. Only its API server, CA
//! and client certificate and key are read, `server` must be the endpoint Terraform created, and the kubeconfig
//! is written anew from these four values. Anything that would make a client run a command, read a file, send a
//! token or go elsewhere (`exec`, `auth-provider`, `token`, `tokenFile`, `proxy-url`,
//! `insecure-skip-tls-verify`, further clusters, users or contexts) is refused, naming the field.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use runner_contract::kubeconfig::{self, ClientCertificate, Names};
use serde::Deserialize;

/// The shape kubeadm writes (`admin.conf`); every other field is an error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Published {
    #[serde(rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(rename = "kind")]
    _kind: Option<String>,
    #[serde(rename = "preferences")]
    _preferences: Option<Empty>,
    #[serde(rename = "current-context")]
    _current_context: Option<String>,
    clusters: Vec<Named<PublishedCluster>>,
    users: Vec<Named<PublishedUser>>,
    #[serde(rename = "contexts")]
    _contexts: Vec<Named<PublishedContext>>,
}

/// `preferences: {}`, as kubeadm writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Named<T> {
    #[serde(rename = "name")]
    _name: String,
    /// `cluster`, `user` or `context`, by the list it is in.
    #[serde(rename = "cluster", alias = "user", alias = "context")]
    entry: T,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PublishedCluster {
    server: String,
    certificate_authority_data: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PublishedUser {
    client_certificate_data: String,
    client_key_data: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishedContext {
    #[serde(rename = "cluster")]
    _cluster: String,
    #[serde(rename = "user")]
    _user: String,
    #[serde(rename = "namespace")]
    _namespace: Option<String>,
}

/// Why a published kubeconfig was refused; the text names the field.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(String);

/// The kubeconfig to publish, rebuilt from the node's `published` one, whose `server` must be `api_endpoint`.
pub fn rebuild(published: &str, api_endpoint: &str) -> Result<String, Refused> {
    let parsed: Published = serde_saphyr::from_str(published).map_err(|error| Refused(first_line(&error)))?;
    let [cluster] = one("clusters", parsed.clusters)?;
    let [user] = one("users", parsed.users)?;
    one("contexts", parsed._contexts)?;
    let (cluster, user) = (cluster.entry, user.entry);
    if cluster.server.trim_end_matches('/') != api_endpoint.trim_end_matches('/') {
        return Err(Refused(format!("its server {:?} is not the cluster's endpoint {api_endpoint:?}", cluster.server)));
    }
    for (field, value, label) in [
        ("certificate-authority-data", &cluster.certificate_authority_data, "CERTIFICATE"),
        ("client-certificate-data", &user.client_certificate_data, "CERTIFICATE"),
        ("client-key-data", &user.client_key_data, "PRIVATE KEY"),
    ] {
        check_pem(field, value, label)?;
    }
    Ok(render(api_endpoint, &cluster.certificate_authority_data, &user.client_certificate_data, &user.client_key_data))
}

fn one<T>(field: &str, items: Vec<T>) -> Result<[T; 1], Refused> {
    let count = items.len();
    <[T; 1]>::try_from(items).map_err(|_| Refused(format!("it has {count} {field}; exactly one is accepted")))
}

/// The value must be base64 of PEM with the expected block (a key's label may say which algorithm).
fn check_pem(field: &str, value: &str, label: &str) -> Result<(), Refused> {
    let decoded = BASE64.decode(value.trim()).map_err(|_| Refused(format!("its {field} is not base64")))?;
    let text = String::from_utf8(decoded).map_err(|_| Refused(format!("its {field} is not PEM")))?;
    let begins = text.trim_start().starts_with("-----BEGIN ") && text.contains(&format!("{label}-----"));
    if begins { Ok(()) } else { Err(Refused(format!("its {field} is not a PEM {label}"))) }
}

/// serde's message without the YAML excerpt it may quote (the refused value itself could be a secret).
fn first_line(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let line = text.lines().next().unwrap_or_default();
    format!("it does not have kubeadm's shape: {line}")
}

fn render(server: &str, ca_data: &str, certificate_data: &str, key_data: &str) -> String {
    let user = ClientCertificate {
        client_certificate_data: certificate_data.trim().to_owned(),
        client_key_data: key_data.trim().to_owned(),
    };
    // kubeadm's own names.
    let names = Names { cluster: "kubernetes", user: "kubernetes-admin", context: "kubernetes-admin@kubernetes" };
    kubeconfig::write(names, server.to_owned(), ca_data, user)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENDPOINT: &str = "https://203.0.113.10:6443";

    fn pem(label: &str) -> String {
        BASE64.encode(format!("-----BEGIN {label}-----\nMIIB\n-----END {label}-----\n"))
    }

    /// What kubeadm writes, with `extra_user` lines added to the user.
    fn published(server: &str, extra_user: &str) -> String {
        format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  \
             name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: kubernetes-admin\n  \
             name: kubernetes-admin@kubernetes\ncurrent-context: kubernetes-admin@kubernetes\nkind: Config\n\
             preferences: {{}}\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: {cert}\n    \
             client-key-data: {key}\n{extra_user}",
            ca = pem("CERTIFICATE"),
            cert = pem("CERTIFICATE"),
            key = pem("RSA PRIVATE KEY"),
        )
    }

    #[test]
    fn kubeadms_admin_kubeconfig_is_rebuilt_from_its_four_values() {
        let rebuilt = rebuild(&published(ENDPOINT, ""), ENDPOINT).expect("kubeadm's shape is accepted");
        let parsed = kube::config::Kubeconfig::from_yaml(&rebuilt).expect("kube reads it");
        let user = parsed.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.client_key_data.is_some() && user.client_certificate_data.is_some());
        assert!(user.exec.is_none() && user.token.is_none() && user.token_file.is_none());
        assert_eq!(parsed.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some(ENDPOINT));
    }

    #[test]
    fn anything_that_runs_reads_or_redirects_is_refused_by_name() {
        for (extra, field) in [
            ("    exec:\n      command: /bin/sh\n      apiVersion: client.authentication.k8s.io/v1\n", "exec"),
            ("    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", "tokenFile"),
            ("    token: abc\n", "token"),
            ("    auth-provider:\n      name: oidc\n", "auth-provider"),
        ] {
            let refused = rebuild(&published(ENDPOINT, extra), ENDPOINT).unwrap_err();
            assert!(refused.0.contains(field), "{field}: {refused}");
        }
        let proxied = published(ENDPOINT, "").replace("    server:", "    proxy-url: http://evil:8080\n    server:");
        assert!(rebuild(&proxied, ENDPOINT).unwrap_err().0.contains("proxy-url"));
        let insecure =
            published(ENDPOINT, "").replace("    server:", "    insecure-skip-tls-verify: true\n    server:");
        assert!(rebuild(&insecure, ENDPOINT).unwrap_err().0.contains("insecure-skip-tls-verify"));
    }

    #[test]
    fn another_server_more_users_and_non_pem_values_are_refused() {
        let elsewhere = rebuild(&published("https://198.51.100.7:6443", ""), ENDPOINT).unwrap_err();
        assert!(elsewhere.0.contains("is not the cluster's endpoint"), "{elsewhere}");
        let second = format!(
            "- name: other\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            pem("CERTIFICATE"),
            pem("PRIVATE KEY")
        );
        let two_users = published(ENDPOINT, "").replace("users:\n", &format!("users:\n{second}"));
        let refused = rebuild(&two_users, ENDPOINT).unwrap_err();
        assert!(refused.0.contains("users"), "{refused}");
        let not_pem = published(ENDPOINT, "").replace(&pem("RSA PRIVATE KEY"), &BASE64.encode("hello"));
        assert!(rebuild(&not_pem, ENDPOINT).unwrap_err().0.contains("client-key-data"));
        assert!(rebuild("apiVersion: v1\nkind: Config\nclusters: []\n", ENDPOINT).is_err());
    }
}
