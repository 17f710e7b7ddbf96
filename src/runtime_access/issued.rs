//! What the cluster answers a certificate signing request with is checked before it is handed out: a provisioned
//! cluster is not trusted to issue what was asked. Pure: PEM in, validity out.

use chrono::{DateTime, Utc};
use x509_parser::pem::parse_x509_pem;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The validity of an issued certificate that passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: DateTime<Utc>,
    pub not_after: DateTime<Utc>,
}

/// What was asked for: the key the certificate must certify, its subject, and the CA that must have signed it.
pub struct Expected<'a> {
    pub public_key_der: &'a [u8],
    pub common_name: &'a str,
    pub organization: &'a str,
    pub ca_pem: &'a [u8],
}

/// `issued_pem` when it certifies exactly the expected key and subject, signed by the expected CA; the reason
/// otherwise.
pub fn check(issued_pem: &[u8], expected: &Expected<'_>) -> Result<Validity, String> {
    let (_, issued) = parse_x509_pem(issued_pem).map_err(|error| format!("not a PEM certificate: {error}"))?;
    let (_, certificate) =
        X509Certificate::from_der(&issued.contents).map_err(|error| format!("not an X.509 certificate: {error}"))?;
    let (_, ca) = parse_x509_pem(expected.ca_pem).map_err(|error| format!("the CA is not PEM: {error}"))?;
    let (_, ca) = X509Certificate::from_der(&ca.contents).map_err(|error| format!("the CA is not X.509: {error}"))?;
    if certificate.public_key().raw != expected.public_key_der {
        return Err("it certifies another key than the one requested".to_owned());
    }
    let subject = certificate.subject();
    let common_names: Vec<&str> = subject.iter_common_name().filter_map(|name| name.as_str().ok()).collect();
    let organizations: Vec<&str> = subject.iter_organization().filter_map(|name| name.as_str().ok()).collect();
    if common_names != [expected.common_name] || organizations != [expected.organization] {
        return Err(format!("its subject is {subject}, not the one requested"));
    }
    certificate
        .verify_signature(Some(ca.public_key()))
        .map_err(|error| format!("it is not signed by the cluster's CA: {error}"))?;
    let time = |time: x509_parser::time::ASN1Time| {
        DateTime::from_timestamp(time.timestamp(), 0).ok_or_else(|| "its validity is out of range".to_owned())
    };
    let validity = certificate.validity();
    Ok(Validity { not_before: time(validity.not_before)?, not_after: time(validity.not_after)? })
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DnType, IsCa, Issuer, KeyPair, PublicKeyData};

    use super::*;

    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, "kubernetes");
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        Ca { pem, issuer: Issuer::new(params, key) }
    }

    fn issue(ca: &Ca, key: &KeyPair, common_name: &str, organization: &str) -> String {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.distinguished_name.push(DnType::OrganizationName, organization);
        params.signed_by(key, &ca.issuer).unwrap().pem()
    }

    #[test]
    fn only_the_requested_key_and_subject_signed_by_the_clusters_ca_pass() {
        let (cluster, other) = (ca(), ca());
        let (key, stranger) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
        let spki = key.subject_public_key_info();
        let expected = Expected {
            public_key_der: &spki,
            common_name: "kubeopera:runtime-admin",
            organization: "kubeopera:admin",
            ca_pem: cluster.pem.as_bytes(),
        };
        let good = issue(&cluster, &key, "kubeopera:runtime-admin", "kubeopera:admin");
        let validity = check(good.as_bytes(), &expected).expect("what was asked for");
        assert!(validity.not_before < validity.not_after);

        let cases = [
            (issue(&cluster, &stranger, "kubeopera:runtime-admin", "kubeopera:admin"), "another key"),
            (issue(&cluster, &key, "kubeopera:runtime-admin", "system:masters"), "its subject is"),
            (issue(&cluster, &key, "admin", "kubeopera:admin"), "its subject is"),
            (issue(&other, &key, "kubeopera:runtime-admin", "kubeopera:admin"), "not signed by the cluster's CA"),
            ("not a certificate".to_owned(), "not a PEM certificate"),
        ];
        for (issued, says) in cases {
            let refused = check(issued.as_bytes(), &expected).unwrap_err();
            assert!(refused.contains(says), "{refused}");
        }
    }
}
