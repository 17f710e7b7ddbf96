//! Kubeconfigs of one cluster, one user and the context joining them, written the same way by terraform-runner
//! (what it publishes) and by the provisioner (the client certificates it hands out).

use serde::Serialize;

/// The names of a kubeconfig's one cluster, user and context.
pub struct Names<'a> {
    pub cluster: &'a str,
    pub user: &'a str,
    pub context: &'a str,
}

/// A kubeconfig of one cluster, one `user` and the context joining them.
pub fn write(names: Names<'_>, server: String, ca_data: &str, user: impl Serialize) -> String {
    let kubeconfig = Kubeconfig {
        api_version: "v1",
        kind: "Config",
        clusters: vec![NamedCluster {
            name: names.cluster,
            cluster: Cluster { server, certificate_authority_data: ca_data.trim().to_owned() },
        }],
        users: vec![NamedUser { name: names.user, user }],
        contexts: vec![NamedContext {
            name: names.context,
            context: Context { cluster: names.cluster, user: names.user },
        }],
        current_context: names.context,
    };
    serde_saphyr::to_string(&kubeconfig).expect("a kubeconfig of plain strings serializes")
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig<'a, U> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    clusters: Vec<NamedCluster<'a>>,
    users: Vec<NamedUser<'a, U>>,
    contexts: Vec<NamedContext<'a>>,
    current_context: &'a str,
}

#[derive(Serialize)]
struct NamedCluster<'a> {
    name: &'a str,
    cluster: Cluster,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority_data: String,
}

#[derive(Serialize)]
struct NamedUser<'a, U> {
    name: &'a str,
    user: U,
}

#[derive(Serialize)]
struct NamedContext<'a> {
    name: &'a str,
    context: Context<'a>,
}

#[derive(Serialize)]
struct Context<'a> {
    cluster: &'a str,
    user: &'a str,
}

/// A user signing in with a client certificate and its key (base64 PEM, as kubeconfigs carry them).
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClientCertificate {
    pub client_certificate_data: String,
    pub client_key_data: String,
}
