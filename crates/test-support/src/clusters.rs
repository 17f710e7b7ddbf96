//! A test control plane playing a provisioned vanilla cluster: the kubeconfig its apply would publish.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use runner_contract::kubeconfig::{self, ClientCertificate, Names};
use test_control_plane::ControlPlane;

/// kubeadm's admin kubeconfig of `cluster` (its CA and `system:masters` identity), as terraform-runner publishes it
/// for a vanilla cluster, naming `server` (the cluster's own, or another's to play a mismatch).
pub fn kubeadm_admin_kubeconfig(cluster: &ControlPlane, server: &str) -> String {
    let (certificate, key) = cluster.admin_certificate_and_key();
    let user =
        ClientCertificate { client_certificate_data: BASE64.encode(certificate), client_key_data: BASE64.encode(key) };
    let names = Names { cluster: "kubernetes", user: "kubernetes-admin", context: "kubernetes-admin@kubernetes" };
    kubeconfig::write(names, server.to_owned(), &BASE64.encode(cluster.ca_pem()), user)
}
