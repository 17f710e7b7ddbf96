//! provisionerctl's connection flags as kubectl's (issue #54 item 4): the server's certificate checked against
//! `--certificate-authority` or not at all with `--insecure-skip-tls-verify` (with a warning), `--context` of its
//! config file, and `--kubeconfig` for the file `--kubeconfig-user` reads (else every file of `KUBECONFIG`, the
//! first with the user winning). The app is served over TLS by the service's own listener, or on plain loopback
//! recording each request's token. A context of the config file gives its cluster's CA
//! (`certificate-authority-data` or `certificate-authority`, or `insecure-skip-tls-verify`) and its namespace as the
//! tenant, to its own server only.

use std::path::Path;
use std::time::Duration;

use provisioner::listener_tls::{TlsFiles, TlsListener};
use test_support::{Backend, spawn_app};

use crate::provisionerctl_support::{ctl, ctl_in, nowhere, recording, recording_server};

/// `router` served over TLS by the service's own listener with a certificate of a private CA; returns the folder
/// with the CA's certificate (`ca.crt`), the server's URL (`https://localhost:PORT`) and the CA's PEM.
async fn served_over_tls(router: axum::Router) -> (tempfile::TempDir, String, String) {
    provisioner::install_crypto_provider();
    let folder = tempfile::tempdir().unwrap();
    let pair = test_support::pki::server_certificates();
    let (cert, key, ca) = (folder.path().join("tls.crt"), folder.path().join("tls.key"), folder.path().join("ca.crt"));
    for (file, text) in [(&cert, &pair.cert), (&key, &pair.key), (&ca, &pair.ca)] {
        std::fs::write(file, text).unwrap();
    }
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let files = TlsFiles { cert, key, reload_interval: Duration::from_secs(60), max_handshakes: 8 };
    let listener = TlsListener::new(tcp, files).unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (folder, format!("https://localhost:{port}"), pair.ca)
}

#[tokio::test]
async fn provisionerctl_checks_the_servers_certificate_as_its_flags_say() {
    let app = spawn_app(Backend::Sqlite).await;
    let (folder, server, _) = served_over_tls(app.app.router.clone()).await;
    let ca = folder.path().join("ca.crt").display().to_string();

    let (code, _, refused) = ctl(&server, &["get", "runtimes", "-o", "name"]).await;
    assert_eq!(code, provisionerctl::exit::UNAVAILABLE, "a certificate no root of the machine signed: {refused}");
    assert!(refused.contains("certificate"), "the cause is told: {refused}");
    let (code, _, err) = ctl(&server, &["--certificate-authority", &ca, "get", "runtimes", "-o", "name"]).await;
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, _, warned) = ctl(&server, &["--insecure-skip-tls-verify", "get", "runtimes", "-o", "name"]).await;
    assert_eq!(code, 0, "{warned}");
    assert!(warned.starts_with("provisionerctl: warning: --insecure-skip-tls-verify: the server's certificate is not"));
    let both = ["--insecure-skip-tls-verify", "--certificate-authority", ca.as_str(), "get", "runtimes"];
    let (code, _, refused) = ctl(&server, &both).await;
    assert!(code == provisionerctl::exit::LOCAL && refused.contains("together"), "{refused}");
    let other = test_support::pki::server_certificates();
    std::fs::write(folder.path().join("other.crt"), &other.ca).unwrap();
    let other = folder.path().join("other.crt").display().to_string();
    let (code, _, refused) = ctl(&server, &["--certificate-authority", &other, "get", "runtimes"]).await;
    assert_eq!(code, provisionerctl::exit::UNAVAILABLE, "another CA: {refused}");
}

fn kubeconfig_with(folder: &Path, file: &str, users: &[(&str, &str)]) -> String {
    let users: String =
        users.iter().map(|(name, token)| format!("- name: {name}\n  user:\n    token: {token}\n")).collect();
    std::fs::write(folder.join(file), format!("apiVersion: v1\nkind: Config\nusers:\n{users}")).unwrap();
    folder.join(file).display().to_string()
}

#[tokio::test]
async fn provisionerctl_takes_the_context_and_kubeconfig_it_is_told() {
    let (_app, server, seen) = recording_server().await;
    let folder = tempfile::tempdir().unwrap();
    let config = format!(
        "current-context: prod\nclusters:\n- name: prod\n  cluster:\n    server: http://127.0.0.1:1\n- name: test\n  \
         cluster:\n    server: {server}\ncontexts:\n- name: prod\n  context:\n    cluster: prod\n    user: prod\n- \
         name: test\n  context:\n    cluster: test\n    user: test\nusers:\n- name: prod\n  user:\n    token: \
         prod-token\n- name: test\n  user:\n    token: test-token\n"
    );
    std::fs::write(folder.path().join("config"), config).unwrap();
    let first = kubeconfig_with(folder.path(), "first", &[("ops", "first-ops")]);
    let second = kubeconfig_with(folder.path(), "second", &[("ops", "second-ops"), ("dev", "second-dev")]);
    let named = kubeconfig_with(folder.path(), "named", &[("ops", "named-ops")]);
    let locations = provisionerctl::Locations {
        kubeconfig: Some(std::env::join_paths([&first, &second]).unwrap()),
        config: Some(folder.path().join("config")),
        ..nowhere()
    };

    let (code, _, err) = ctl_in(&locations, &["get", "runtimes", "-o", "name"]).await;
    assert_eq!(code, provisionerctl::exit::UNAVAILABLE, "the current context's server: {err}");
    let (code, _, err) = ctl_in(&locations, &["--context", "test", "get", "runtimes", "-o", "name"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = ctl_in(&locations, &["--context", "nope", "get", "runtimes"]).await;
    assert!(code == provisionerctl::exit::LOCAL && err.ends_with("it has no context nope\n"), "{err}");
    for (user, kubeconfig) in [("ops", None), ("dev", None), ("ops", Some(named.as_str()))] {
        let mut args = vec!["--server", server.as_str(), "--kubeconfig-user", user];
        args.extend(kubeconfig.map(|file| ["--kubeconfig", file]).into_iter().flatten());
        let (code, _, err) = ctl_in(&locations, &[&args[..], &["get", "runtimes"]].concat()).await;
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) =
        ctl_in(&locations, &["--kubeconfig", &named, "--kubeconfig-user", "dev", "get", "runtimes"]).await;
    assert!(code == provisionerctl::exit::LOCAL && err.contains("no kubeconfig has this user"), "{err}");
    let tokens: Vec<Option<String>> = seen.lock().unwrap().clone();
    let bearer = |token: &str| Some(format!("Bearer {token}"));
    assert_eq!(tokens, [bearer("test-token"), bearer("first-ops"), bearer("second-dev"), bearer("named-ops")]);
}

/// A config file whose contexts name the TLS server with its CA as data, as a file relative to the config file, or
/// unchecked, and a namespace.
fn config_for(server: &str, ca_pem: &str) -> String {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let cluster = |name: &str, tls: &str| format!("- name: {name}\n  cluster:\n    server: {server}\n    {tls}\n");
    let clusters = [
        cluster("data", &format!("certificate-authority-data: {data}")),
        cluster("file", "certificate-authority: ca.crt"),
        cluster("unchecked", "insecure-skip-tls-verify: true"),
    ]
    .concat();
    format!(
        "current-context: data\nclusters:\n{clusters}contexts:\n- name: data\n  context:\n    cluster: data\n    \
         namespace: team-a\n- name: file\n  context:\n    cluster: file\n    namespace: team-b\n- name: unchecked\n  \
         context:\n    cluster: unchecked\n"
    )
}

#[tokio::test]
async fn provisionerctl_takes_the_ca_and_tenant_of_its_config_files_context_to_its_server() {
    let app = spawn_app(Backend::Sqlite).await;
    let (router, tenants) = recording(app.app.router.clone(), axum::http::HeaderName::from_static("tenant"));
    let (folder, server, ca_pem) = served_over_tls(router).await;
    let config = folder.path().join("config");
    std::fs::write(&config, config_for(&server, &ca_pem)).unwrap();
    let locations = provisionerctl::Locations { config: Some(config.clone()), ..nowhere() };
    let list = ["get", "runtimes", "-o", "name"];

    let (code, _, err) = ctl_in(&locations, &list).await;
    assert_eq!((code, err.as_str()), (0, ""), "the context's certificate-authority-data, no flag");
    let (code, _, err) = ctl_in(&locations, &[&["--context", "file"][..], &list].concat()).await;
    assert_eq!((code, err.as_str()), (0, ""), "its certificate-authority, relative to the config file");
    let (code, _, err) = ctl_in(&locations, &[&["--tenant", "team-c"][..], &list].concat()).await;
    assert_eq!((code, err.as_str()), (0, ""), "--tenant wins over the namespace");
    let (code, _, warned) = ctl_in(&locations, &[&["--context", "unchecked"][..], &list].concat()).await;
    assert_eq!(code, 0, "{warned}");
    let unchecked =
        format!("provisionerctl: warning: insecure-skip-tls-verify of {}: its cluster unchecked: ", config.display());
    assert!(warned.starts_with(&unchecked), "{warned}");
    let other = test_support::pki::server_certificates();
    std::fs::write(folder.path().join("other.crt"), &other.ca).unwrap();
    let other = folder.path().join("other.crt").display().to_string();
    let flag = ["--certificate-authority", other.as_str()];
    let (code, _, refused) = ctl_in(&locations, &[&flag[..], &list].concat()).await;
    assert_eq!(code, provisionerctl::exit::UNAVAILABLE, "--certificate-authority wins over the file: {refused}");

    let elsewhere = server.replace("localhost", "127.0.0.1");
    let (code, _, refused) = ctl_in(&locations, &[&["--server", elsewhere.as_str()][..], &list].concat()).await;
    assert_eq!(code, provisionerctl::exit::UNAVAILABLE, "another server: not the context's CA: {refused}");
    assert!(
        refused.starts_with("provisionerctl: namespace (tenant) and certificate-authority of the current context"),
        "{refused}"
    );
    let tenants: Vec<Option<String>> = tenants.lock().unwrap().clone();
    let tenant = |name: &str| Some(name.to_owned());
    assert_eq!(tenants, [tenant("team-a"), tenant("team-b"), tenant("team-c"), None]);
}
