//! How the server's certificate is checked over https, as kubectl's flags say: against the machine's roots (the
//! default), against the CA of `--certificate-authority` only, or not at all with `--insecure-skip-tls-verify`,
//! which says on standard error what that gives away. Without either flag, the cluster of the config file's context
//! may say the same (`certificate-authority`, `certificate-authority-data`, `insecure-skip-tls-verify`) for its own
//! server; a flag wins over the whole of it, as kubectl's do.

use std::io::Write;
use std::path::PathBuf;

use reqwest::{Certificate, ClientBuilder};

use crate::{Connection, Error};

/// How the server's certificate is checked, and who said so.
#[derive(Debug, Default, Clone)]
pub struct Tls {
    pub certificate_authority: Option<Authority>,
    pub insecure_skip_verify: bool,
    /// Who said so, in messages: the flags (`None`), or a config file's cluster (`FILE: its cluster NAME`).
    pub set_by: Option<String>,
}

/// A CA's certificates (PEM, a bundle too).
#[derive(Debug, Clone)]
pub enum Authority {
    /// A file: `--certificate-authority`'s, or a cluster's `certificate-authority`.
    File(PathBuf),
    /// A cluster's `certificate-authority-data`, decoded.
    Data(Vec<u8>),
}

impl Tls {
    /// What `--certificate-authority` and `--insecure-skip-tls-verify` say.
    pub fn of_flags(connection: &Connection) -> Tls {
        Tls {
            certificate_authority: connection.certificate_authority.clone().map(Authority::File),
            insecure_skip_verify: connection.insecure_skip_tls_verify,
            set_by: None,
        }
    }

    /// Whether it says anything: a CA, or not to check.
    pub fn is_set(&self) -> bool {
        self.certificate_authority.is_some() || self.insecure_skip_verify
    }

    /// Refused when both are given, as kubectl refuses them; the warning of an unchecked server goes to `err`.
    pub fn check(&self, err: &mut dyn Write) -> Result<(), Error> {
        if self.insecure_skip_verify && self.certificate_authority.is_some() {
            return Err(Error::Local(match &self.set_by {
                None => "--certificate-authority and --insecure-skip-tls-verify together: the CA would not be checked"
                    .into(),
                Some(cluster) => format!(
                    "{cluster} has a certificate-authority and insecure-skip-tls-verify together: the CA would not be \
                     checked"
                ),
            }));
        }
        if self.insecure_skip_verify {
            let said = match &self.set_by {
                None => "--insecure-skip-tls-verify".to_owned(),
                Some(cluster) => format!("insecure-skip-tls-verify of {cluster}"),
            };
            let _ = writeln!(
                err,
                "provisionerctl: warning: {said}: the server's certificate is not checked, so anyone on the way can \
                 read and change the requests, the token too"
            );
        }
        Ok(())
    }

    /// `builder`, checking the server's certificate as these settings say.
    pub fn apply(&self, builder: ClientBuilder) -> Result<ClientBuilder, Error> {
        let Some(authority) = &self.certificate_authority else {
            return Ok(builder.tls_danger_accept_invalid_certs(self.insecure_skip_verify));
        };
        let named = match (&self.set_by, authority) {
            (None, Authority::File(file)) => format!("--certificate-authority {}", file.display()),
            (Some(cluster), Authority::File(file)) => format!("{cluster}'s certificate-authority {}", file.display()),
            (set_by, Authority::Data(_)) => {
                format!("{}'s certificate-authority-data", set_by.as_deref().unwrap_or("the config file"))
            }
        };
        let unreadable = |why: String| Error::Local(format!("{named}: {why}"));
        let pem = match authority {
            Authority::File(file) => std::fs::read(file).map_err(|error| unreadable(error.to_string()))?,
            Authority::Data(pem) => pem.clone(),
        };
        let certificates = Certificate::from_pem_bundle(&pem).map_err(|error| unreadable(error.to_string()))?;
        if certificates.is_empty() {
            return Err(unreadable("no PEM certificate in it".into()));
        }
        Ok(builder.tls_certs_only(certificates))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_settings_are_checked_as_the_flags_are_naming_the_cluster() {
        let set_by = Some("/home/me/config: its cluster prod".to_owned());
        let unchecked = Tls { insecure_skip_verify: true, set_by: set_by.clone(), ..Tls::default() };
        let mut err = Vec::new();
        unchecked.check(&mut err).unwrap();
        let warned = String::from_utf8(err).unwrap();
        assert!(
            warned.starts_with(
                "provisionerctl: warning: insecure-skip-tls-verify of /home/me/config: its cluster prod: the server's"
            ),
            "{warned}"
        );
        let both = Tls { certificate_authority: Some(Authority::Data(b"PEM".to_vec())), ..unchecked };
        let refused = both.check(&mut Vec::new()).unwrap_err().to_string();
        assert!(refused.starts_with("/home/me/config: its cluster prod has a certificate-authority and"), "{refused}");
        let empty = Tls { insecure_skip_verify: false, ..both };
        let refused = empty.apply(reqwest::Client::builder()).err().unwrap().to_string();
        assert_eq!(refused, "/home/me/config: its cluster prod's certificate-authority-data: no PEM certificate in it");
    }
}
