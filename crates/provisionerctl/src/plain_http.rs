//! A token crosses plain HTTP only to this machine: on any other way it can be read and replayed, and a token from
//! a kubeconfig may be a key to a cloud account (a GKE or EKS token).

use url::{Host, Url};

use crate::Error;

/// Whether a bearer token may go to `server`: over https anywhere; over plain http to a loopback host
/// (`localhost`, 127.0.0.0/8, `::1`), or anywhere when the user allowed it (`--allow-plain-http`).
pub fn check_token_transport(server: &Url, plain_http_allowed: bool) -> Result<(), Error> {
    if server.scheme() != "http" || plain_http_allowed || is_loopback(server) {
        return Ok(());
    }
    Err(Error::TokenOverPlainHttp { server: server.origin() })
}

fn is_loopback(server: &Url) -> bool {
    match server.host() {
        Some(Host::Domain(name)) => name == "localhost",
        Some(Host::Ipv4(address)) => address.is_loopback(),
        Some(Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(server: &str, plain_http_allowed: bool) -> Result<(), Error> {
        check_token_transport(&Url::parse(server).unwrap(), plain_http_allowed)
    }

    #[test]
    fn a_token_goes_over_plain_http_only_to_loopback_unless_allowed() {
        for server in [
            "http://localhost:3000",
            "http://LocalHost",
            "http://127.0.0.1:3000",
            "http://127.8.9.1",
            "http://[::1]:3000",
        ] {
            assert!(check(server, false).is_ok(), "{server}");
        }
        for server in [
            "http://provisioner.invalid:3000",
            "http://10.0.0.1",
            "http://localhost.example.com",
            "http://128.0.0.1",
            "http://[::2]",
        ] {
            assert!(matches!(check(server, false), Err(Error::TokenOverPlainHttp { .. })), "{server}");
            assert!(check(server, true).is_ok(), "allowed: {server}");
            assert!(check(&server.replacen("http:", "https:", 1), false).is_ok(), "over https: {server}");
        }
    }

    /// The refusal names the flag that allows the call and the server's origin, never credentials in its URL.
    #[test]
    fn the_refusal_names_the_flag_and_not_the_urls_credentials() {
        let refused = check("http://someone:password@provisioner.invalid:3000/base", false).unwrap_err().to_string();
        assert!(
            refused.contains("--allow-plain-http") && refused.contains("http://provisioner.invalid:3000"),
            "{refused}"
        );
        assert!(!refused.contains("password"), "{refused}");
    }
}
