//! The kubeconfig format as kubectl reads it, for the parts provisionerctl uses: the clusters' servers, the users'
//! credentials (a token, a token file, an exec plugin) and the contexts joining them. provisionerctl's own config
//! file has the same shape. Paths in a file are relative to its folder, as kubectl resolves them.

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

use crate::Error;
use crate::exec_plugin::ExecPlugin;

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

#[derive(Deserialize)]
struct Cluster {
    server: Option<String>,
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
}

/// What the current context joins: the server of its cluster, and the name of its user if it has one.
#[derive(Debug)]
pub struct CurrentContext {
    pub server: Url,
    pub user: Option<String>,
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
        let folder = self.path.parent().unwrap_or(Path::new("."));
        if let Some(file) = &user.token_file {
            return read_token_file(&folder.join(file));
        }
        match &user.exec {
            Some(plugin) => plugin.token(folder).map_err(|why| self.problem(why)),
            None => Err(self.problem(format!("its user {name} has no token, tokenFile or exec plugin"))),
        }
    }

    /// The server (its cluster's) and user of the context `named`, else of the current context.
    pub fn context(&self, named: Option<&str>) -> Result<CurrentContext, Error> {
        let current = self.config.current_context.as_deref().filter(|name| !name.is_empty());
        let name = named.or(current).ok_or_else(|| self.problem("it names no current-context"))?;
        let mut contexts = self.config.contexts.iter().flatten();
        let context = contexts.find(|context| context.name == name).map(|named| &named.context);
        let context = context.ok_or_else(|| self.problem(format!("it has no context {name}")))?;
        let cluster =
            context.cluster.as_deref().ok_or_else(|| self.problem(format!("its context {name} names no cluster")))?;
        let server = self.server_of(cluster)?;
        Ok(CurrentContext { server, user: context.user.clone() })
    }

    fn server_of(&self, cluster: &str) -> Result<Url, Error> {
        let mut clusters = self.config.clusters.iter().flatten();
        let found = clusters.find(|named| named.name == cluster).map(|named| &named.cluster);
        let server = found.and_then(|cluster| cluster.server.as_deref());
        let server = server.ok_or_else(|| self.problem(format!("its cluster {cluster} has no server")))?;
        crate::client::server_url(server)
            .map_err(|why| self.problem(format!("the server of its cluster {cluster}: {why}")))
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
}
