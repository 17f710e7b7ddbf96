//! The kubeconfig format as kubectl reads it, for the parts provisionerctl uses: the clusters' servers, the users'
//! credentials (a token, a token file, an exec plugin), the clusters' CAs and the contexts joining them with their
//! namespace. provisionerctl's own config file has the same shape. Paths in a file are relative to its folder, as
//! kubectl resolves them.

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

use crate::Error;
use crate::exec_plugin::ExecPlugin;
use crate::tls::{Authority, Tls};

/// A kubeconfig-shaped file, read.
pub struct KubeconfigFile {
    path: PathBuf,
    config: Kubeconfig,
}

/// kubectl writes `null` for an empty list, so every list may be missing or null.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    clusters: Option<Vec<NamedCluster>>,
    users: Option<Vec<NamedUser>>,
    contexts: Option<Vec<NamedContext>>,
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

/// A cluster's server and how its certificate is checked; `certificate-authority-data` (base64 PEM) wins over
/// `certificate-authority` (a file), as in kubectl.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    user: User,
}

/// A user's credential, as kubectl would send it; a client certificate is not one provisionerctl sends.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct User {
    token: Option<SecretString>,
    token_file: Option<PathBuf>,
    exec: Option<ExecPlugin>,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    context: Context,
}

#[derive(Deserialize)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
    namespace: Option<String>,
}

/// What the current context joins: the server of its cluster and how its certificate is checked, the name of its
/// user if it has one, and its namespace (the tenant).
#[derive(Debug)]
pub struct CurrentContext {
    pub server: Url,
    pub user: Option<String>,
    pub namespace: Option<String>,
    pub tls: Tls,
}

impl KubeconfigFile {
    pub fn read(path: &Path) -> Result<KubeconfigFile, Error> {
        let unreadable = |why: String| Error::Local(format!("{}: {why}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|error| unreadable(error.to_string()))?;
        let config = serde_saphyr::from_str(&text).map_err(|error| unreadable(error.to_string()))?;
        Ok(KubeconfigFile { path: path.to_owned(), config })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn has_user(&self, name: &str) -> bool {
        self.user(name).is_some()
    }

    /// The token of the user `name`: its `token`, the content of its `tokenFile`, or what its exec plugin prints.
    pub fn token_of(&self, name: &str) -> Result<SecretString, Error> {
        let user = self.user(name).ok_or_else(|| self.problem(format!("it has no user {name}")))?;
        if let Some(token) = &user.token {
            return Ok(token.clone());
        }
        let folder = self.folder();
        if let Some(file) = &user.token_file {
            return read_token_file(&folder.join(file));
        }
        match &user.exec {
            Some(plugin) => plugin.token(folder).map_err(|why| self.problem(why)),
            None => Err(self.problem(format!("its user {name} has no token, tokenFile or exec plugin"))),
        }
    }

    /// The server and TLS settings (its cluster's), user and namespace of the context `named`, else of the current
    /// context.
    pub fn context(&self, named: Option<&str>) -> Result<CurrentContext, Error> {
        let current = self.config.current_context.as_deref().filter(|name| !name.is_empty());
        let name = named.or(current).ok_or_else(|| self.problem("it names no current-context"))?;
        let mut contexts = self.config.contexts.iter().flatten();
        let context = contexts.find(|context| context.name == name).map(|named| &named.context);
        let context = context.ok_or_else(|| self.problem(format!("it has no context {name}")))?;
        let cluster =
            context.cluster.as_deref().ok_or_else(|| self.problem(format!("its context {name} names no cluster")))?;
        let (server, tls) = self.cluster(cluster)?;
        let namespace = context.namespace.clone().filter(|namespace| !namespace.is_empty());
        Ok(CurrentContext { server, user: context.user.clone(), namespace, tls })
    }

    /// The server of the cluster `name`, and how its certificate is checked.
    fn cluster(&self, name: &str) -> Result<(Url, Tls), Error> {
        let mut clusters = self.config.clusters.iter().flatten();
        let found = clusters.find(|named| named.name == name).map(|named| &named.cluster);
        let found = found.and_then(|cluster| Some((cluster, cluster.server.as_deref()?)));
        let (cluster, server) = found.ok_or_else(|| self.problem(format!("its cluster {name} has no server")))?;
        let server = crate::client::server_url(server)
            .map_err(|why| self.problem(format!("the server of its cluster {name}: {why}")))?;
        Ok((server, self.tls_of(name, cluster)?))
    }

    /// How the certificate of the cluster `name` is checked: its CA's data, else its CA's file (relative to this
    /// file's folder), and whether not at all.
    fn tls_of(&self, name: &str, cluster: &Cluster) -> Result<Tls, Error> {
        let data = cluster.certificate_authority_data.as_deref().filter(|data| !data.trim().is_empty());
        let file = cluster.certificate_authority.as_ref().filter(|file| !file.as_os_str().is_empty());
        let certificate_authority = match (data, file) {
            (Some(data), _) => Some(Authority::Data(decode_base64(data).ok_or_else(|| {
                self.problem(format!("the certificate-authority-data of its cluster {name} is not base64"))
            })?)),
            (None, Some(file)) => Some(Authority::File(self.folder().join(file))),
            (None, None) => None,
        };
        let set_by = Some(format!("{}: its cluster {name}", self.path.display()));
        Ok(Tls { certificate_authority, insecure_skip_verify: cluster.insecure_skip_tls_verify, set_by })
    }

    /// The folder relative paths in the file start from.
    fn folder(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    fn user(&self, name: &str) -> Option<&User> {
        self.config.users.iter().flatten().find(|named| named.name == name).map(|named| &named.user)
    }

    fn problem(&self, why: impl std::fmt::Display) -> Error {
        Error::Local(format!("{}: {why}", self.path.display()))
    }
}

/// A file holding a token, as `--token-file` and a user's `tokenFile` name one: surrounding whitespace is not part of
/// it.
pub fn read_token_file(file: &Path) -> Result<SecretString, Error> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| Error::Local(format!("cannot read the token file {}: {error}", file.display())))?;
    Ok(SecretString::from(text.trim()))
}

/// Standard base64 (as Go encodes a kubeconfig's `[]byte`), padded or not, whitespace ignored; `None` if it is not.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const STANDARD_PADDED_OR_NOT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let text: String = text.chars().filter(|character| !character.is_ascii_whitespace()).collect();
    STANDARD_PADDED_OR_NOT.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncurrent-context: ops\nclusters:\n- name: prod\n  cluster:\n    server: https://prod.example:6443\ncontexts:\n- name: dev\n  context:\n    cluster: prod\n    user: dev\n- name: ops\n  context:\n    cluster: prod\n    user: operator\nusers:\n- name: dev\n  user:\n    tokenFile: dev-token\n- name: operator\n  user:\n    token: operator-token\n- name: certificate\n  user:\n    client-certificate-data: AAAA\npreferences: null\n";

    fn written(test: &str, text: &str) -> (PathBuf, KubeconfigFile) {
        let folder = std::env::temp_dir().join(format!("provisionerctl-kubeconfig-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("config"), text).unwrap();
        let file = KubeconfigFile::read(&folder.join("config")).unwrap();
        (folder, file)
    }

    #[test]
    fn a_named_user_gives_its_token_or_its_token_file_relative_to_the_file() {
        let (folder, file) = written("users", KUBECONFIG);
        std::fs::write(folder.join("dev-token"), "dev-token-from-file\n").unwrap();
        assert_eq!(file.token_of("operator").unwrap().expose_secret(), "operator-token");
        assert_eq!(file.token_of("dev").unwrap().expose_secret(), "dev-token-from-file");
        let certificate = file.token_of("certificate").unwrap_err().to_string();
        assert!(certificate.ends_with("its user certificate has no token, tokenFile or exec plugin"), "{certificate}");
        let missing = file.token_of("nobody").unwrap_err().to_string();
        assert!(missing.contains("config: it has no user nobody"), "{missing}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn the_current_context_names_its_clusters_server_and_its_user() {
        let (folder, file) = written("context", KUBECONFIG);
        let context = file.context(None).unwrap();
        assert_eq!(
            (context.server.as_str(), context.user.as_deref()),
            ("https://prod.example:6443/", Some("operator"))
        );
        let (_, no_cluster) = written(
            "context",
            &KUBECONFIG.replace("server: https://prod.example:6443", "insecure-skip-tls-verify: true"),
        );
        let refused = no_cluster.context(None).unwrap_err().to_string();
        assert!(refused.ends_with("its cluster prod has no server"), "{refused}");
        assert_eq!(file.context(Some("dev")).unwrap().user.as_deref(), Some("dev"));
        assert!(file.context(Some("nope")).unwrap_err().to_string().ends_with("it has no context nope"));
        let (_, no_current) = written("context", &KUBECONFIG.replace("current-context: ops\n", ""));
        assert!(no_current.context(None).unwrap_err().to_string().ends_with("it names no current-context"));
        std::fs::remove_dir_all(&folder).unwrap();
    }

    /// A context with a namespace, on a cluster with a CA file, one with its data, one with both, one unchecked.
    const TLS_CONFIG: &str = "current-context: file\nclusters:\n- name: file\n  cluster:\n    server: https://a.example\n    certificate-authority: certs/ca.crt\n- name: data\n  cluster:\n    server: https://b.example\n    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n- name: both\n  cluster:\n    server: https://c.example\n    certificate-authority: /etc/ca.crt\n    certificate-authority-data: QUJD\n- name: unchecked\n  cluster:\n    server: https://d.example\n    insecure-skip-tls-verify: true\n- name: absolute\n  cluster:\n    server: https://e.example\n    certificate-authority: /etc/ca.crt\n- name: broken\n  cluster:\n    server: https://f.example\n    certificate-authority-data: not*base64\ncontexts:\n- name: file\n  context:\n    cluster: file\n    namespace: team-a\n- name: data\n  context:\n    cluster: data\n    namespace: \"\"\n- name: both\n  context: {cluster: both}\n- name: unchecked\n  context: {cluster: unchecked}\n- name: absolute\n  context: {cluster: absolute}\n- name: broken\n  context: {cluster: broken}\n";

    #[test]
    fn a_context_gives_its_namespace_and_its_clusters_ca_relative_to_the_file() {
        let (folder, file) = written("tls", TLS_CONFIG);
        let context = file.context(None).unwrap();
        assert_eq!(context.namespace.as_deref(), Some("team-a"));
        let Some(Authority::File(ca)) = &context.tls.certificate_authority else { panic!("{context:?}") };
        assert_eq!(ca, &folder.join("certs/ca.crt"));
        assert!(!context.tls.insecure_skip_verify);
        assert_eq!(context.tls.set_by, Some(format!("{}: its cluster file", folder.join("config").display())));
        let Some(Authority::File(ca)) = file.context(Some("absolute")).unwrap().tls.certificate_authority else {
            panic!("absolute")
        };
        assert_eq!(ca, Path::new("/etc/ca.crt"));
        let unchecked = file.context(Some("unchecked")).unwrap();
        assert!(unchecked.tls.insecure_skip_verify && unchecked.tls.certificate_authority.is_none());
        assert_eq!(unchecked.namespace, None);
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_clusters_ca_data_is_decoded_and_wins_over_its_file() {
        let (folder, file) = written("data", TLS_CONFIG);
        let data = file.context(Some("data")).unwrap();
        assert_eq!(data.namespace, None, "an empty namespace is none");
        let Some(Authority::Data(pem)) = &data.tls.certificate_authority else { panic!("{data:?}") };
        assert_eq!(pem.as_slice(), b"-----BEGIN CERTIFICATE-----\n");
        let Some(Authority::Data(pem)) = &file.context(Some("both")).unwrap().tls.certificate_authority else {
            panic!("both")
        };
        assert_eq!(pem.as_slice(), b"ABC");
        let broken = file.context(Some("broken")).unwrap_err().to_string();
        assert!(broken.ends_with("the certificate-authority-data of its cluster broken is not base64"), "{broken}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn base64_is_decoded_padded_or_not_and_anything_else_refused() {
        let decoded = |text: &str| decode_base64(text).map(|bytes| String::from_utf8(bytes).unwrap());
        for (text, plain) in
            [("", ""), ("QQ==", "A"), ("QUI=", "AB"), ("QUJD", "ABC"), ("QQ", "A"), ("QU\nJD\n", "ABC")]
        {
            assert_eq!(decoded(text).as_deref(), Some(plain), "{text}");
        }
        assert_eq!(decode_base64("+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        for text in ["Q", "Q===", "QUJD=", "QU=D", "QUJ*"] {
            assert_eq!(decoded(text), None, "{text}");
        }
    }
}
