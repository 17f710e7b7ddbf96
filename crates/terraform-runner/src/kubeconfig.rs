//! Kubeconfigs for clusters whose API server takes short-lived cloud tokens: the cluster's endpoint and CA,
//! and an exec credential plugin that asks the cloud for a token on every use. No secret is written in.

use runner_contract::kubeconfig::{Names, write};
use serde::Serialize;

/// The apiVersion of the ExecCredential both plugins speak.
const EXEC_API_VERSION: &str = "client.authentication.k8s.io/v1beta1";

/// An EKS cluster. `role_arn` (an assume-role credential) makes every token come from that role.
pub fn eks(cluster_name: &str, endpoint: &str, ca_data: &str, region: &str, role_arn: Option<&str>) -> String {
    let mut args = vec!["--region", region, "eks", "get-token", "--cluster-name", cluster_name, "--output", "json"];
    if let Some(role_arn) = role_arn {
        args.extend(["--role-arn", role_arn]);
    }
    let exec = Exec {
        api_version: EXEC_API_VERSION,
        command: "aws",
        args: args.into_iter().map(str::to_owned).collect(),
        install_hint: "The AWS CLI v2 (`aws`) on PATH gets tokens for EKS: https://docs.aws.amazon.com/cli/",
        provide_cluster_info: false,
        interactive_mode: "Never",
    };
    render(cluster_name, endpoint, ca_data, exec)
}

/// A GKE cluster; the plugin uses the caller's application default credentials.
pub fn gke(project: &str, location: &str, cluster_name: &str, endpoint: &str, ca_data: &str) -> String {
    let exec = Exec {
        api_version: EXEC_API_VERSION,
        command: "gke-gcloud-auth-plugin",
        // Application default credentials (GOOGLE_APPLICATION_CREDENTIALS, workload identity) need no gcloud
        // installation on the caller's side.
        args: vec!["--use_application_default_credentials".to_owned()],
        install_hint: "gke-gcloud-auth-plugin on PATH gets tokens for GKE: \
                       https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl",
        provide_cluster_info: true,
        interactive_mode: "Never",
    };
    // gcloud's own naming, so the context looks familiar next to ones `gcloud container clusters
    // get-credentials` writes.
    let name = format!("gke_{project}_{location}_{cluster_name}");
    render(&name, endpoint, ca_data, exec)
}

fn render(name: &str, endpoint: &str, ca_data: &str, exec: Exec) -> String {
    let server = if endpoint.starts_with("https://") { endpoint.to_owned() } else { format!("https://{endpoint}") };
    write(Names { cluster: name, user: name, context: name }, server, ca_data, User { exec })
}

/// A user whose tokens come from an exec plugin.
#[derive(Serialize)]
struct User {
    exec: Exec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Exec {
    api_version: &'static str,
    command: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    install_hint: &'static str,
    provide_cluster_info: bool,
    interactive_mode: &'static str,
}

#[cfg(test)]
mod tests {
    use kube::config::Kubeconfig;

    use super::*;

    /// kube-rs reads what we write, and the exec plugin is what `aws eks update-kubeconfig` would set up.
    #[test]
    fn eks_kubeconfig_uses_aws_eks_get_token() {
        let text = eks(
            "demo",
            "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
            "Q0EK",
            "eu-west-1",
            Some("arn:aws:iam::1:role/r"),
        );
        let parsed = Kubeconfig::from_yaml(&text).expect("a valid kubeconfig");
        assert_eq!(parsed.current_context.as_deref(), Some("demo"));
        let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://ABC.gr7.eu-west-1.eks.amazonaws.com"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0EK"));
        let exec = parsed.auth_infos[0].auth_info.as_ref().unwrap().exec.as_ref().unwrap();
        assert_eq!(exec.command.as_deref(), Some("aws"));
        assert_eq!(
            exec.args.as_deref().unwrap(),
            [
                "--region",
                "eu-west-1",
                "eks",
                "get-token",
                "--cluster-name",
                "demo",
                "--output",
                "json",
                "--role-arn",
                "arn:aws:iam::1:role/r"
            ]
        );
        assert!(parsed.auth_infos[0].auth_info.as_ref().unwrap().token.is_none());
    }

    #[test]
    fn gke_kubeconfig_uses_the_gke_auth_plugin() {
        let text = gke("proj", "europe-west1", "demo", "34.1.2.3", "Q0EK");
        let parsed = Kubeconfig::from_yaml(&text).expect("a valid kubeconfig");
        assert_eq!(parsed.current_context.as_deref(), Some("gke_proj_europe-west1_demo"));
        assert_eq!(parsed.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("https://34.1.2.3"));
        let exec = parsed.auth_infos[0].auth_info.as_ref().unwrap().exec.as_ref().unwrap();
        assert_eq!(exec.command.as_deref(), Some("gke-gcloud-auth-plugin"));
        assert_eq!(exec.args.as_deref().unwrap(), ["--use_application_default_credentials"]);
        assert!(exec.provide_cluster_info);
    }
}
