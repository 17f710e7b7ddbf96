//! Which server requests go to, and which token they carry. A token is sent only where the user said so, in this
//! order: `--token` (or `PROVISIONER_TOKEN`), `--token-file` (or `PROVISIONER_TOKEN_FILE`), `--kubeconfig-user NAME` (that user of the kubeconfig
//! kubectl reads), or the user of the current context of provisionerctl's own config file, whose token goes only to
//! that context's server. The kubeconfig's current context is never read on its own: its token belongs to its
//! cluster (a GKE or EKS token is a key to the cloud account), and kubectl sends it nowhere else. The context's
//! namespace (the tenant) and its cluster's CA (or `insecure-skip-tls-verify`) apply the same way: to that context's
//! server only, and where no flag (or variable) says otherwise.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};
use url::Url;

use crate::kubeconfig::{CurrentContext, KubeconfigFile, read_token_file};
use crate::tls::Tls;
use crate::{Connection, Error};

/// The server when neither the command line nor the config file names one.
const DEFAULT_SERVER: &str = "http://127.0.0.1:3000";

/// Where the files provisionerctl may read are: from `KUBECONFIG`, `PROVISIONERCTL_CONFIG` and `HOME` (a test gives
/// its own).
#[derive(Debug, Clone)]
pub struct Locations {
    /// `KUBECONFIG`: kubectl's list of kubeconfig files.
    pub kubeconfig: Option<OsString>,
    /// `PROVISIONERCTL_CONFIG`: provisionerctl's config file, which must then exist.
    pub config: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

impl Locations {
    pub fn of_process() -> Locations {
        let variable = |name| std::env::var_os(name).filter(|value| !value.is_empty());
        Locations {
            kubeconfig: variable("KUBECONFIG"),
            config: variable("PROVISIONERCTL_CONFIG").map(PathBuf::from),
            home: variable("HOME").map(PathBuf::from),
        }
    }

    /// kubectl's kubeconfig files in the order they win: `KUBECONFIG`'s, else `~/.kube/config`.
    fn kubeconfig_files(&self) -> Vec<PathBuf> {
        match &self.kubeconfig {
            Some(list) => std::env::split_paths(list).filter(|path| !path.as_os_str().is_empty()).collect(),
            None => self.home.iter().map(|home| home.join(".kube/config")).collect(),
        }
    }

    /// The config file: the one `PROVISIONERCTL_CONFIG` names, else `~/.config/provisionerctl/config` if it exists.
    fn config_file(&self) -> Option<PathBuf> {
        match &self.config {
            Some(named) => Some(named.clone()),
            None => {
                self.home.as_ref().map(|home| home.join(".config/provisionerctl/config")).filter(|path| path.exists())
            }
        }
    }
}

/// The server requests go to, the token they carry, the tenant they act for and how the server's certificate is
/// checked.
pub struct Target {
    pub server: Url,
    pub token: Option<SecretString>,
    /// `--tenant` (or `PROVISIONER_TENANT`), else the namespace of the config file's context on its own server.
    pub tenant: Option<String>,
    /// The TLS flags if any is given, else the config file's context's cluster's settings on its own server.
    pub tls: Tls,
}

/// Decides the server, the token, the tenant and the TLS settings from the command line, the environment and the
/// config file; says on `err` when the config file's token, namespace or CA stay home because `--server` names
/// another server.
pub fn resolve(connection: &Connection, locations: &Locations, err: &mut dyn Write) -> Result<Target, Error> {
    let requested = requested_token(connection, locations)?;
    let config = match (&connection.server, &requested) {
        // Both given: the config file has nothing to add, and a broken one stays out of the way.
        (Some(_), Some(_)) => None,
        _ => OwnConfig::read(locations, connection.context.as_deref())?,
    };
    let server = match (&connection.server, &config) {
        (Some(server), _) => server.clone(),
        (None, Some(config)) => config.context.server.clone(),
        (None, None) => Url::parse(DEFAULT_SERVER).expect("the default server is a URL"),
    };
    let flags = Tls::of_flags(connection);
    let own = config.as_ref().and_then(|config| config.context_for(&server, connection, &flags, err));
    let tenant = connection.tenant.clone().or_else(|| own.and_then(|context| context.namespace.clone()));
    let tls = match own {
        Some(context) if !flags.is_set() => context.tls.clone(),
        _ => flags,
    };
    let token = match (requested, &config) {
        (Some(token), _) => Some(token),
        (None, Some(config)) => config.token_for(&server, err)?,
        (None, None) => None,
    };
    Ok(Target { server, token, tenant, tls })
}

/// The token the command line or the environment asks for by itself: an empty `--token` is none. A token file is
/// read on each run, so a rotated one (a projected ServiceAccount token) is always the current one.
fn requested_token(connection: &Connection, locations: &Locations) -> Result<Option<SecretString>, Error> {
    if let Some(token) = connection.token.as_ref().filter(|token| !token.expose_secret().is_empty()) {
        return Ok(Some(token.clone()));
    }
    if let Some(file) = &connection.token_file {
        return read_token_file(file).map(Some);
    }
    match &connection.kubeconfig_user {
        Some(name) => kubeconfig_user_token(name, locations).map(Some),
        None => Ok(None),
    }
}

/// The token of the user `name` in the first of kubectl's kubeconfig files that has it, as kubectl merges them.
fn kubeconfig_user_token(name: &str, locations: &Locations) -> Result<SecretString, Error> {
    let files = locations.kubeconfig_files();
    for path in files.iter().filter(|path| path.is_file()) {
        let kubeconfig = KubeconfigFile::read(path)?;
        if kubeconfig.has_user(name) {
            return kubeconfig.token_of(name);
        }
    }
    let searched: Vec<String> = files.iter().map(|path| path.display().to_string()).collect();
    Err(Error::Local(format!("--kubeconfig-user {name}: no kubeconfig has this user (read: {})", searched.join(", "))))
}

/// provisionerctl's own config file and its current context.
struct OwnConfig {
    file: KubeconfigFile,
    context: CurrentContext,
}

impl OwnConfig {
    /// The config file and its context `named`, else its current one.
    fn read(locations: &Locations, named: Option<&str>) -> Result<Option<OwnConfig>, Error> {
        let Some(path) = locations.config_file() else {
            return match named {
                Some(name) => Err(Error::Local(format!(
                    "--context {name}: there is no config file (PROVISIONERCTL_CONFIG, ~/.config/provisionerctl/config)"
                ))),
                None => Ok(None),
            };
        };
        let file = KubeconfigFile::read(&path)?;
        let context = file.context(named)?;
        Ok(Some(OwnConfig { file, context }))
    }

    /// The context if `server` is its server; none otherwise, and `err` says which of its namespace and TLS settings
    /// are not used (those the command line does not replace anyway).
    fn context_for(
        &self,
        server: &Url,
        connection: &Connection,
        flags: &Tls,
        err: &mut dyn Write,
    ) -> Option<&CurrentContext> {
        if is_same_server(server, &self.context.server) {
            return Some(&self.context);
        }
        let mut unused = Vec::new();
        if connection.tenant.is_none() && self.context.namespace.is_some() {
            unused.push("namespace (tenant)");
        }
        if !flags.is_set() && self.context.tls.certificate_authority.is_some() {
            unused.push("certificate-authority");
        } else if !flags.is_set() && self.context.tls.insecure_skip_verify {
            unused.push("insecure-skip-tls-verify");
        }
        if !unused.is_empty() {
            let _ = writeln!(
                err,
                "provisionerctl: {} of the current context of {} not used: --server (or PROVISIONER_SERVER) {} is not \
                 its server ({})",
                unused.join(" and "),
                self.file.path().display(),
                server.origin().ascii_serialization(),
                self.context.server.origin().ascii_serialization()
            );
        }
        None
    }

    /// The context user's token if `server` is the context's server; none otherwise, and `err` says why.
    fn token_for(&self, server: &Url, err: &mut dyn Write) -> Result<Option<SecretString>, Error> {
        if !is_same_server(server, &self.context.server) {
            let _ = writeln!(
                err,
                "provisionerctl: no token sent: --server (or PROVISIONER_SERVER) {} is not the server of the current \
                 context of {} ({})",
                server.origin().ascii_serialization(),
                self.file.path().display(),
                self.context.server.origin().ascii_serialization()
            );
            return Ok(None);
        }
        self.context.user.as_deref().map(|user| self.file.token_of(user)).transpose()
    }
}

/// Two URLs name the same server when scheme, host and port are the same: requests replace the path.
fn is_same_server(one: &Url, other: &Url) -> bool {
    one.origin() == other.origin()
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    /// A kubeconfig whose current context's user has a token, beside a user named `ops`.
    const KUBECONFIG: &str = "current-context: gke\nclusters:\n- name: gke\n  cluster:\n    server: https://gke.example\ncontexts:\n- name: gke\n  context:\n    cluster: gke\n    user: gke\nusers:\n- name: gke\n  user:\n    token: cloud-token\n- name: ops\n  user:\n    token: ops-token\n";
    /// provisionerctl's config file: its current context's server and user.
    const CONFIG: &str = "current-context: prod\nclusters:\n- name: prod\n  cluster:\n    server: https://provisioner.example:8443\ncontexts:\n- name: prod\n  context:\n    cluster: prod\n    user: operator\nusers:\n- name: operator\n  user:\n    token: provisioner-token\n";

    /// A folder of its own for each test, with a kubeconfig and a config file in it; no home files.
    fn folder(test: &str) -> (PathBuf, Locations) {
        let folder = std::env::temp_dir().join(format!("provisionerctl-token-{test}-{}", std::process::id()));
        std::fs::create_dir_all(folder.join("home")).unwrap();
        std::fs::write(folder.join("kubeconfig"), KUBECONFIG).unwrap();
        std::fs::write(folder.join("config"), CONFIG).unwrap();
        let kubeconfig = Some(folder.join("kubeconfig").into_os_string());
        (folder.clone(), Locations { kubeconfig, config: None, home: Some(folder.join("home")) })
    }

    fn connection() -> Connection {
        Connection::default()
    }

    fn resolved(connection: &Connection, locations: &Locations) -> (String, Option<String>, String) {
        let mut err = Vec::new();
        let target = resolve(connection, locations, &mut err).unwrap();
        let token = target.token.map(|token| token.expose_secret().to_owned());
        (target.server.to_string(), token, String::from_utf8(err).unwrap())
    }

    #[test]
    fn the_kubeconfigs_current_context_gives_no_token_by_itself() {
        let (folder, locations) = folder("implicit");
        assert_eq!(resolved(&connection(), &locations), ("http://127.0.0.1:3000/".into(), None, String::new()));
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_kubeconfig_user_gives_its_token_from_the_first_file_that_has_it() {
        let (folder, mut locations) = folder("user");
        std::fs::write(folder.join("other"), "users:\n- name: someone\n  user:\n    token: someone-token\n").unwrap();
        let list = [folder.join("missing"), folder.join("other"), folder.join("kubeconfig")];
        locations.kubeconfig = Some(std::env::join_paths(list).unwrap());
        let named = Connection { kubeconfig_user: Some("ops".into()), ..connection() };
        assert_eq!(resolved(&named, &locations).1.as_deref(), Some("ops-token"));
        let unknown = Connection { kubeconfig_user: Some("nobody".into()), ..connection() };
        let refused = resolve(&unknown, &locations, &mut Vec::new()).err().unwrap().to_string();
        assert!(refused.starts_with("--kubeconfig-user nobody: no kubeconfig has this user (read: "), "{refused}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn the_token_the_user_names_wins_in_their_order_and_an_empty_token_is_none() {
        let (folder, locations) = folder("order");
        std::fs::write(folder.join("token"), "file-token\n").unwrap();
        let all = Connection {
            token: Some(SecretString::from("given")),
            token_file: Some(folder.join("token")),
            kubeconfig_user: Some("ops".into()),
            ..connection()
        };
        assert_eq!(resolved(&all, &locations).1.as_deref(), Some("given"));
        let empty = Connection { token: Some(SecretString::from("")), ..all };
        assert_eq!(resolved(&empty, &locations).1.as_deref(), Some("file-token"));
        let user = Connection { token_file: None, ..empty };
        assert_eq!(resolved(&user, &locations).1.as_deref(), Some("ops-token"));
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn the_config_files_token_goes_only_to_its_server() {
        let (folder, mut locations) = folder("config");
        locations.config = Some(folder.join("config"));
        let own = ("https://provisioner.example:8443/".to_owned(), Some("provisioner-token".to_owned()), String::new());
        assert_eq!(resolved(&connection(), &locations), own);
        let same =
            Connection { server: Some(Url::parse("https://PROVISIONER.example:8443/api").unwrap()), ..connection() };
        assert_eq!(resolved(&same, &locations).1.as_deref(), Some("provisioner-token"));

        let elsewhere =
            Connection { server: Some(Url::parse("https://provisioner.example:9443").unwrap()), ..connection() };
        let (server, token, said) = resolved(&elsewhere, &locations);
        assert_eq!((server.as_str(), token), ("https://provisioner.example:9443/", None));
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(
            said.contains("no token sent: --server (or PROVISIONER_SERVER) https://provisioner.example:9443"),
            "{said}"
        );
        assert!(!said.contains("provisioner-token"), "{said}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_config_file_is_read_from_home_and_must_exist_where_named() {
        let (folder, mut locations) = folder("home");
        std::fs::create_dir_all(folder.join("home/.config/provisionerctl")).unwrap();
        std::fs::write(folder.join("home/.config/provisionerctl/config"), CONFIG).unwrap();
        assert_eq!(resolved(&connection(), &locations).1.as_deref(), Some("provisioner-token"));
        locations.config = Some(folder.join("missing"));
        let missing = resolve(&connection(), &locations, &mut Vec::new()).err().unwrap().to_string();
        assert!(missing.contains("missing"), "{missing}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_server_is_its_scheme_host_and_port() {
        let same = |one: &str, other: &str| is_same_server(&Url::parse(one).unwrap(), &Url::parse(other).unwrap());
        assert!(same("https://Provisioner.example/", "https://provisioner.example:443/api/v1"));
        assert!(same("http://127.0.0.1:3000", "http://127.0.0.1:3000/"));
        assert!(!same("http://provisioner.example", "https://provisioner.example"));
        assert!(!same("https://provisioner.example", "https://provisioner.example:8443"));
        assert!(!same("https://provisioner.example", "https://provisioner.example.evil"));
    }

    /// The config file with its context's namespace and its cluster's CA (data).
    fn with_namespace_and_ca(folder: &std::path::Path) -> Locations {
        let config = CONFIG.replace("    user: operator\n", "    user: operator\n    namespace: team-a\n").replace(
            "    server: https://provisioner.example:8443\n",
            "    server: https://provisioner.example:8443\n    certificate-authority-data: QUJD\n",
        );
        std::fs::write(folder.join("config"), config).unwrap();
        Locations { config: Some(folder.join("config")), kubeconfig: None, home: None }
    }

    fn ca_data(tls: &Tls) -> Option<Vec<u8>> {
        match &tls.certificate_authority {
            Some(crate::tls::Authority::Data(pem)) => Some(pem.clone()),
            _ => None,
        }
    }

    #[test]
    fn the_contexts_namespace_and_ca_apply_unless_a_flag_says_otherwise() {
        let (folder, _) = folder("defaults");
        let locations = with_namespace_and_ca(&folder);
        let target = resolve(&connection(), &locations, &mut Vec::new()).unwrap();
        assert_eq!(target.tenant.as_deref(), Some("team-a"));
        assert_eq!(ca_data(&target.tls).as_deref(), Some(&b"ABC"[..]));
        assert!(target.tls.set_by.unwrap().ends_with("config: its cluster prod"));

        let flags = Connection {
            tenant: Some("team-b".into()),
            certificate_authority: Some(folder.join("ca.crt")),
            ..connection()
        };
        let target = resolve(&flags, &locations, &mut Vec::new()).unwrap();
        assert_eq!(target.tenant.as_deref(), Some("team-b"));
        assert!(
            matches!(&target.tls.certificate_authority, Some(crate::tls::Authority::File(file)) if file == &folder.join("ca.crt"))
        );
        assert_eq!(target.tls.set_by, None);
        let insecure = Connection { insecure_skip_tls_verify: true, ..connection() };
        let target = resolve(&insecure, &locations, &mut Vec::new()).unwrap();
        assert!(target.tls.insecure_skip_verify && target.tls.certificate_authority.is_none(), "the flag wins whole");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn the_contexts_namespace_and_ca_stay_home_from_another_server() {
        let (folder, _) = folder("elsewhere");
        let locations = with_namespace_and_ca(&folder);
        let same =
            Connection { server: Some(Url::parse("https://provisioner.example:8443/x").unwrap()), ..connection() };
        let target = resolve(&same, &locations, &mut Vec::new()).unwrap();
        assert_eq!((target.tenant.as_deref(), ca_data(&target.tls).is_some()), (Some("team-a"), true));

        let elsewhere = Connection { server: Some(Url::parse("https://other.example").unwrap()), ..connection() };
        let mut err = Vec::new();
        let target = resolve(&elsewhere, &locations, &mut err).unwrap();
        assert_eq!((target.tenant, target.tls.is_set()), (None, false));
        let said = String::from_utf8(err).unwrap();
        assert!(
            said.starts_with("provisionerctl: namespace (tenant) and certificate-authority of the current context of ")
                && said.contains("not used: --server (or PROVISIONER_SERVER) https://other.example is not its server"),
            "{said}"
        );
        let given = Connection { tenant: Some("team-b".into()), insecure_skip_tls_verify: true, ..elsewhere };
        let mut err = Vec::new();
        let target = resolve(&given, &locations, &mut err).unwrap();
        assert_eq!(target.tenant.as_deref(), Some("team-b"));
        let said = String::from_utf8(err).unwrap();
        assert!(!said.contains("not used"), "nothing of the context would be used anyway: {said}");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
