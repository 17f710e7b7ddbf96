//! Throwaway certificates for servers the tests start: a CA, and a server certificate for `localhost` and
//! 127.0.0.1 it signed.

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// PEM texts.
pub struct ServerCertificates {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

pub fn server_certificates() -> ServerCertificates {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let ca = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("parameters");
    let cert = params.signed_by(&key, &ca).expect("server certificate");
    ServerCertificates { ca: ca_cert.pem(), cert: cert.pem(), key: key.serialize_pem() }
}
