//! The provisioned cluster's own API, reached with the admin kubeconfig its apply published, which never leaves
//! the provisioner: what callers get instead is a client certificate the cluster itself issues for a limited time
//! (its certificate signing request API, the signer kube-controller-manager runs), for the group
//! `kubeopera:admin` that a binding here gives cluster-admin; and the expiries of the certificates it can see
//! (`certificates`), for the certificate watch.

mod certificates;
mod issued;
mod mint;

pub use certificates::read_certificates;
pub use mint::{ADMIN_GROUP, Minted, holds_client_certificate, mint_kubeconfig};

/// Why a kubeconfig could not be minted.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the published admin kubeconfig cannot be used: {0}")]
    Kubeconfig(String),
    #[error("the cluster's API server: {0}")]
    Kube(#[from] kube::Error),
    #[error("the cluster's API server cannot be reached: {0}")]
    Unreachable(String),
    #[error("the cluster's API server did not answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("the cluster did not issue the certificate within {0:?}")]
    NotIssued(std::time::Duration),
    #[error("the certificate the cluster issued is refused: {0}")]
    Refused(String),
    #[error("making the key and its request: {0}")]
    Key(#[from] rcgen::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
