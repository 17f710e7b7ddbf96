//! What the provisioner can see of a cluster's certificates from outside, read with the kubeconfig its apply
//! published: the CA the kubeconfig trusts, the admin client certificate it holds (if any) and the serving
//! certificate the API server presents in a TLS handshake. Nothing the cluster presents is taken unchecked: a
//! certificate not signed by the kubeconfig's CA is refused, not recorded.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use kube::config::Kubeconfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use x509_parser::pem::parse_x509_pem;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::mint::cluster_of;
use super::{Error, Result};
use crate::domain::certificates::{CertificateExpiry, ObservedCertificates, WatchedCertificate};

/// The TCP connection and TLS handshake with the API server.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the expiry of every certificate of the cluster `kubeconfig` (an admin kubeconfig as an apply published
/// it) lets the provisioner see, at `now`.
#[tracing::instrument(skip_all)]
pub async fn read_certificates(kubeconfig: &str, now: DateTime<Utc>) -> Result<ObservedCertificates> {
    let parsed = Kubeconfig::from_yaml(kubeconfig).map_err(|error| Error::Kubeconfig(error.to_string()))?;
    let (server, ca_data) = cluster_of(&parsed)?;
    let ca_pem = decoded(&ca_data, "its CA")?;
    let ca_der = der_of_pem(&ca_pem).map_err(|error| Error::Kubeconfig(format!("its CA: {error}")))?;
    let ca = parse(&ca_der).map_err(|error| Error::Kubeconfig(format!("its CA: {error}")))?;
    let ca_end = validity_end(&ca).map_err(|error| Error::Kubeconfig(format!("its CA {error}")))?;
    let mut expiries = vec![CertificateExpiry { certificate: WatchedCertificate::ClusterCa, not_after: ca_end }];
    let admin = (parsed.auth_infos.iter())
        .find_map(|user| user.auth_info.as_ref().and_then(|auth| auth.client_certificate_data.clone()));
    if let Some(admin) = admin {
        let admin_der = der_of_pem(&decoded(&admin, "its client certificate")?)
            .map_err(|error| Error::Kubeconfig(format!("its client certificate: {error}")))?;
        let not_after = signed_expiry(&admin_der, &ca)
            .map_err(|error| Error::Kubeconfig(format!("its client certificate {error}")))?;
        expiries.push(CertificateExpiry { certificate: WatchedCertificate::AdminClient, not_after });
    }
    let serving_der = serving_certificate(&server).await?;
    let not_after =
        signed_expiry(&serving_der, &ca).map_err(|error| Error::Refused(format!("the serving certificate {error}")))?;
    expiries.push(CertificateExpiry { certificate: WatchedCertificate::ApiServerServing, not_after });
    Ok(ObservedCertificates::new(now, expiries))
}

fn decoded(data: &str, what: &str) -> Result<Vec<u8>> {
    BASE64.decode(data.trim()).map_err(|error| Error::Kubeconfig(format!("{what} is not base64: {error}")))
}

fn der_of_pem(pem: &[u8]) -> Result<Vec<u8>, String> {
    let (_, pem) = parse_x509_pem(pem).map_err(|error| format!("not a PEM certificate: {error}"))?;
    Ok(pem.contents)
}

fn parse(der: &[u8]) -> Result<X509Certificate<'_>, String> {
    X509Certificate::from_der(der)
        .map(|(_, certificate)| certificate)
        .map_err(|error| format!("not an X.509 certificate: {error}"))
}

fn validity_end(certificate: &X509Certificate<'_>) -> Result<DateTime<Utc>, String> {
    let end = certificate.validity().not_after.timestamp();
    DateTime::from_timestamp(end, 0).ok_or_else(|| format!("ends out of range ({end})"))
}

/// Until when the certificate `der` is valid, if `ca` signed it.
fn signed_expiry(der: &[u8], ca: &X509Certificate<'_>) -> Result<DateTime<Utc>, String> {
    let certificate = parse(der)?;
    certificate
        .verify_signature(Some(ca.public_key()))
        .map_err(|error| format!("is not signed by the cluster's CA: {error}"))?;
    validity_end(&certificate)
}

/// The end-entity certificate the API server at `server` presents.
async fn serving_certificate(server: &str) -> Result<Vec<u8>> {
    let url =
        reqwest::Url::parse(server).map_err(|error| Error::Kubeconfig(format!("its server {server:?}: {error}")))?;
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Err(Error::Kubeconfig(format!("its server {server:?} names no host")));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let name =
        ServerName::try_from(host.clone()).map_err(|error| Error::Kubeconfig(format!("its server's host: {error}")))?;
    let presented = Arc::new(Presented::default());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Refused(error.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(presented.clone())
        .with_no_client_auth();
    let handshake = async {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream).await
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return Err(Error::Unreachable(error.to_string())),
        Err(_) => return Err(Error::Timeout(HANDSHAKE_TIMEOUT)),
    }
    let certificate = presented.certificate.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    certificate.ok_or_else(|| Error::Refused("the API server presented no certificate".to_owned()))
}

/// Keeps the certificate a server presents and lets the handshake go on (only to read it: nothing is sent over
/// the connection, and the certificate is checked against the cluster's CA after). The handshake's signatures are
/// still verified, so the server holds the key of what it presented.
#[derive(Debug, Default)]
struct Presented {
    certificate: Mutex<Option<Vec<u8>>>,
}

impl Presented {
    fn provider() -> CryptoProvider {
        rustls::crypto::ring::default_provider()
    }
}

impl ServerCertVerifier for Presented {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.certificate.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(end_entity.to_vec());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, certificate, signature, &Self::provider().signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, certificate, signature, &Self::provider().signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        Self::provider().signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

    use super::*;

    fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        (pem, Issuer::new(params, key))
    }

    #[test]
    fn only_a_certificate_the_clusters_ca_signed_gives_its_expiry() {
        let (cluster_pem, cluster) = ca("kubernetes");
        let (_, stranger) = ca("kubernetes");
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2027, 3, 1);
        let key = KeyPair::generate().unwrap();
        let signed = params.signed_by(&key, &cluster).unwrap();
        let forged = params.signed_by(&key, &stranger).unwrap();
        let ca_der = der_of_pem(cluster_pem.as_bytes()).unwrap();
        let ca = parse(&ca_der).unwrap();
        let expected = DateTime::parse_from_rfc3339("2027-03-01T00:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(signed_expiry(signed.der(), &ca), Ok(expected));
        let refused = signed_expiry(forged.der(), &ca).unwrap_err();
        assert!(refused.contains("not signed by the cluster's CA"), "{refused}");
        assert!(signed_expiry(b"garbage", &ca).is_err());
    }
}
