//! How the server's certificate is checked over https, as kubectl's flags say: against the machine's roots (the
//! default), against the CA of `--certificate-authority` only, or not at all with `--insecure-skip-tls-verify`,
//! which says on standard error what that gives away.

use std::io::Write;
use std::path::PathBuf;

use reqwest::{Certificate, ClientBuilder};

use crate::Error;

/// The TLS flags.
#[derive(Debug, Default, Clone)]
pub struct Tls {
    pub certificate_authority: Option<PathBuf>,
    pub insecure_skip_verify: bool,
}

impl Tls {
    /// Refused when both are given, as kubectl refuses them; the warning of an unchecked server goes to `err`.
    pub fn check(&self, err: &mut dyn Write) -> Result<(), Error> {
        if self.insecure_skip_verify && self.certificate_authority.is_some() {
            return Err(Error::Local(
                "--certificate-authority and --insecure-skip-tls-verify together: the CA would not be checked".into(),
            ));
        }
        if self.insecure_skip_verify {
            let _ = writeln!(
                err,
                "provisionerctl: warning: --insecure-skip-tls-verify: the server's certificate is not checked, so \
                 anyone on the way can read and change the requests, the token too"
            );
        }
        Ok(())
    }

    /// `builder`, checking the server's certificate as these flags say.
    pub fn apply(&self, builder: ClientBuilder) -> Result<ClientBuilder, Error> {
        let Some(file) = &self.certificate_authority else {
            return Ok(builder.tls_danger_accept_invalid_certs(self.insecure_skip_verify));
        };
        let unreadable = |why: String| Error::Local(format!("--certificate-authority {}: {why}", file.display()));
        let pem = std::fs::read(file).map_err(|error| unreadable(error.to_string()))?;
        let certificates = Certificate::from_pem_bundle(&pem).map_err(|error| unreadable(error.to_string()))?;
        if certificates.is_empty() {
            return Err(unreadable("no PEM certificate in it".into()));
        }
        Ok(builder.tls_certs_only(certificates))
    }
}
