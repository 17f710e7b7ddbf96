//! A kubeconfig minted from the admin one: a new key, a certificate signing request for the API server's client
//! signer with the lifetime asked for, approved with the admin identity, and the issued certificate checked
//! before it is written into a kubeconfig of the same cluster.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use rcgen::{CertificateParams, DnType, KeyPair, PublicKeyData};
use runner_contract::administrators::{Administrator, SubjectKind, cluster_admin_binding};
use runner_contract::kubeconfig::{self, ClientCertificate, Names};

use super::issued::{self, Expected};
use super::{Error, Result};

/// The group of every minted kubeconfig, bound to cluster-admin (never `system:masters`, which no binding can take
/// back).
pub const ADMIN_GROUP: &str = "kubeopera:admin";
/// The user of every minted kubeconfig.
const USER: &str = "kubeopera:runtime-admin";
const SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// Each call to the cluster's API server.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// From the approval to the issued certificate (kube-controller-manager signs within a second or two).
const ISSUE_TIMEOUT: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// A kubeconfig with a lifetime: when it was minted and when its certificate expires, as the cluster issued it
/// (the signer may cap the lifetime asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minted {
    pub kubeconfig: String,
    pub issued_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Whether `kubeconfig` signs in with a client certificate (kubeadm's admin.conf): only such a kubeconfig is
/// exchanged for minted ones. One whose user runs a cloud's token plugin (EKS, GKE) carries no secret and gets
/// short-lived tokens already.
pub fn holds_client_certificate(kubeconfig: &str) -> bool {
    Kubeconfig::from_yaml(kubeconfig).is_ok_and(|parsed| {
        parsed
            .auth_infos
            .iter()
            .any(|user| user.auth_info.as_ref().is_some_and(|auth| auth.client_certificate_data.is_some()))
    })
}

/// Mints a kubeconfig valid for `lifetime` (at least 10 minutes: the API's minimum) from `admin`.
#[tracing::instrument(skip_all, fields(lifetime = ?lifetime))]
pub async fn mint_kubeconfig(admin: &str, lifetime: Duration) -> Result<Minted> {
    let parsed = Kubeconfig::from_yaml(admin).map_err(|error| Error::Kubeconfig(error.to_string()))?;
    let (server, ca_data) = cluster_of(&parsed)?;
    let ca_pem = BASE64.decode(&ca_data).map_err(|_| Error::Kubeconfig("its CA is not base64".to_owned()))?;
    let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|error| Error::Kubeconfig(error.to_string()))?;
    let client = Client::try_from(config)?;
    bind_admin_group(&client).await?;

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, USER);
    params.distinguished_name.push(DnType::OrganizationName, ADMIN_GROUP);
    let request = params.serialize_request(&key)?.pem()?;
    let certificate = issue(&client, request, lifetime).await?;
    let spki = key.subject_public_key_info();
    let expected = Expected { public_key_der: &spki, common_name: USER, organization: ADMIN_GROUP, ca_pem: &ca_pem };
    let validity = issued::check(&certificate, &expected).map_err(Error::Refused)?;
    let user = ClientCertificate {
        client_certificate_data: BASE64.encode(&certificate),
        client_key_data: BASE64.encode(key.serialize_pem()),
    };
    let names = Names { cluster: "kubernetes", user: "kubeopera-admin", context: "kubeopera-admin@kubernetes" };
    // The signer backdates a certificate's start by minutes: its life for rotation starts now.
    Ok(Minted {
        kubeconfig: kubeconfig::write(names, server, &ca_data, user),
        issued_at: Utc::now().max(validity.not_before),
        expires_at: validity.not_after,
    })
}

/// The server and base64 CA of the kubeconfig's one cluster.
pub(super) fn cluster_of(parsed: &Kubeconfig) -> Result<(String, String)> {
    let cluster = parsed.clusters.first().and_then(|named| named.cluster.as_ref());
    let server = cluster.and_then(|cluster| cluster.server.clone());
    let ca_data = cluster.and_then(|cluster| cluster.certificate_authority_data.clone());
    match (server, ca_data) {
        (Some(server), Some(ca_data)) => Ok((server, ca_data)),
        _ => Err(Error::Kubeconfig("it names no server with its CA".to_owned())),
    }
}

/// `kubeopera:admin` bound to cluster-admin, applied whole each time.
async fn bind_admin_group(client: &Client) -> Result<()> {
    let group = Administrator { kind: SubjectKind::Group, name: ADMIN_GROUP.to_owned() };
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let apply = PatchParams::apply("kubeopera-provisioner").force();
    timed(api.patch(ADMIN_GROUP, &apply, &Patch::Apply(cluster_admin_binding(ADMIN_GROUP, &[group])))).await?;
    Ok(())
}

/// The certificate the cluster issues for `request` (PEM), once approved; the request is deleted afterwards.
async fn issue(client: &Client, request: String, lifetime: Duration) -> Result<Vec<u8>> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let name = format!("kubeopera-kubeconfig-{}", uuid::Uuid::now_v7());
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta { name: Some(name.clone()), ..ObjectMeta::default() },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.into_bytes()),
            signer_name: SIGNER.to_owned(),
            usages: Some(vec!["client auth".to_owned(), "digital signature".to_owned()]),
            expiration_seconds: Some(i32::try_from(lifetime.as_secs()).unwrap_or(i32::MAX)),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    let mut created = timed(api.create(&PostParams::default(), &csr)).await?;
    created.status = Some(CertificateSigningRequestStatus {
        conditions: Some(vec![CertificateSigningRequestCondition {
            type_: "Approved".to_owned(),
            status: "True".to_owned(),
            reason: Some("KubeoperaKubeconfig".to_owned()),
            message: Some("a kubeconfig the provisioner hands out".to_owned()),
            ..CertificateSigningRequestCondition::default()
        }]),
        certificate: None,
    });
    timed(api.replace_subresource("approval", &name, &PostParams::default(), &created)).await?;
    let certificate = wait_for_certificate(&api, &name).await;
    if let Err(error) = timed(api.delete(&name, &DeleteParams::default())).await {
        tracing::warn!(%error, name, "the certificate signing request stays until the cluster removes it");
    }
    certificate
}

async fn wait_for_certificate(api: &Api<CertificateSigningRequest>, name: &str) -> Result<Vec<u8>> {
    let deadline = tokio::time::Instant::now() + ISSUE_TIMEOUT;
    loop {
        let csr = timed(api.get(name)).await?;
        if let Some(certificate) = csr.status.and_then(|status| status.certificate).filter(|bytes| !bytes.0.is_empty())
        {
            return Ok(certificate.0);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::NotIssued(ISSUE_TIMEOUT));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn timed<T>(call: impl Future<Output = Result<T, kube::Error>>) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(Error::Timeout(CALL_TIMEOUT)),
    }
}
