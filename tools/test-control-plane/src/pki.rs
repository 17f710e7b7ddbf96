//! Throwaway certificates and keys, generated for every control plane.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use crate::Result;

pub(crate) struct CertifiedKey {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: Vec<u8>,
    /// PKCS#8.
    pub key_der: Vec<u8>,
}

pub(crate) struct KeyPem {
    pub private: String,
    pub public: String,
}

pub(crate) struct Pki {
    pub ca_pem: String,
    pub ca_der: Vec<u8>,
    /// The CA's key, which kube-controller-manager signs approved client-certificate requests with.
    pub ca_key_pem: String,
    pub serving: CertifiedKey,
    pub admin: CertifiedKey,
    /// Signs service-account tokens.
    pub service_account: KeyPem,
}

impl Pki {
    /// `serving_valid_for`: the API server's certificate ends that long from now (rcgen's far end otherwise).
    pub fn generate(serving_valid_for: Option<std::time::Duration>) -> Result<Self> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name.push(DnType::CommonName, "test-control-plane-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca_key_pem = ca_key.serialize_pem();
        let ca = Issuer::new(ca_params, ca_key);

        let leaf = |sans: &[&str], common_name: &str, organization: Option<&str>, usage, valid_for| {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(sans.iter().map(ToString::to_string).collect::<Vec<_>>())?;
            if let Some(valid_for) = valid_for {
                let now = time::OffsetDateTime::now_utc();
                (params.not_before, params.not_after) = (now - time::Duration::hours(1), now + valid_for);
            }
            params.distinguished_name.push(DnType::CommonName, common_name);
            if let Some(organization) = organization {
                params.distinguished_name.push(DnType::OrganizationName, organization);
            }
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &ca)?;
            Ok::<_, rcgen::Error>(CertifiedKey {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
                cert_der: cert.der().to_vec(),
                key_der: key.serialize_der(),
            })
        };

        let service_account = KeyPair::generate()?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            ca_key_pem,
            // Also the test node's kubelet certificate: both serve on 127.0.0.1.
            serving: leaf(
                &["127.0.0.1", "localhost"],
                "kube-apiserver",
                None,
                ExtendedKeyUsagePurpose::ServerAuth,
                serving_valid_for,
            )?,
            // The system:masters group is bound to cluster-admin and bypasses RBAC.
            admin: leaf(&[], "admin", Some("system:masters"), ExtendedKeyUsagePurpose::ClientAuth, None)?,
            service_account: KeyPem {
                private: service_account.serialize_pem(),
                public: service_account.public_key_pem(),
            },
        })
    }
}
