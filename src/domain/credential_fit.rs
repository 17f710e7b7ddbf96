//! Whether a credential may build a cluster configuration: one rule for the service's check of a request and the
//! worker's ResolveCredential step, since the credential may change in auth-service between the two.

use std::fmt;

use runner_contract::credential::CloudCredential;

use super::ClusterConfig;

/// Why a credential cannot build a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialMismatch {
    /// The credential is for another cloud than the topology's (the message names both).
    Cloud(String),
    /// A GCP credential of another project than the request's, which does not list the request's either: the
    /// runner builds in the request's project, so an unchecked one would reach projects the credential's owner
    /// never offered.
    Project { credential_id: String, credential_project: String, requested_project: String },
}

impl fmt::Display for CredentialMismatch {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialMismatch::Cloud(message) => formatter.write_str(message),
            CredentialMismatch::Project { credential_id, credential_project, requested_project } => write!(
                formatter,
                "credential {credential_id:?} is for GCP project {credential_project:?} and does not list \
                 {requested_project:?} in its projectIds"
            ),
        }
    }
}

impl ClusterConfig {
    /// Why `credential` cannot build this configuration, or `None` when it can: its cloud must be the topology's,
    /// and a GCP credential's project the request's unless `other_projects` (auth-service's `projectIds`) lists it.
    pub fn credential_mismatch(
        &self,
        credential: &CloudCredential,
        other_projects: &[String],
    ) -> Option<CredentialMismatch> {
        let kind = credential.kind();
        if let Some(message) = self.topology.credential_mismatch(&self.credential_id, kind.as_str(), credential.cloud())
        {
            return Some(CredentialMismatch::Cloud(message));
        }
        let (CloudCredential::GcpServiceAccount { project_id, .. }, Some(gcp)) = (credential, &self.gcp) else {
            return None;
        };
        let allowed = *project_id == gcp.project_id || other_projects.contains(&gcp.project_id);
        (!allowed).then(|| CredentialMismatch::Project {
            credential_id: self.credential_id.clone(),
            credential_project: project_id.clone(),
            requested_project: gcp.project_id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use secrecy::SecretString;

    use super::*;
    use crate::domain::{ProvisionRequest, Topology};

    fn gcp_credential(project: &str) -> CloudCredential {
        CloudCredential::GcpServiceAccount {
            project_id: project.to_owned(),
            service_account_key: SecretString::from("{}"),
        }
    }

    fn gke_requesting(project: &str) -> ClusterConfig {
        let mut config = ProvisionRequest::example(Topology::Gke).cluster_config;
        config.gcp.as_mut().expect("the GKE example has a gcp section").project_id = project.to_owned();
        config
    }

    #[test]
    fn a_gcp_credential_builds_in_its_own_project_or_one_it_lists() {
        assert_eq!(gke_requesting("my-project-1").credential_mismatch(&gcp_credential("my-project-1"), &[]), None);
        let config = gke_requesting("their-project-2");
        let listed = ["spare-project-3".to_owned(), "their-project-2".to_owned()];
        assert_eq!(config.credential_mismatch(&gcp_credential("my-project-1"), &listed), None);

        let mismatch = config.credential_mismatch(&gcp_credential("my-project-1"), &listed[..1]);
        assert_eq!(
            mismatch,
            Some(CredentialMismatch::Project {
                credential_id: "cred-gcp-1".to_owned(),
                credential_project: "my-project-1".to_owned(),
                requested_project: "their-project-2".to_owned(),
            })
        );
        assert_eq!(
            mismatch.unwrap().to_string(),
            "credential \"cred-gcp-1\" is for GCP project \"my-project-1\" and does not list \"their-project-2\" in \
             its projectIds"
        );

        // The cloud comes first, whatever projects the credential lists.
        let aws = ProvisionRequest::example(Topology::Eks).cluster_config;
        let mismatch = aws.credential_mismatch(&gcp_credential("my-project-1"), &["my-project-1".to_owned()]);
        let Some(CredentialMismatch::Cloud(message)) = mismatch else { panic!("{mismatch:?}") };
        assert_eq!(
            message,
            "credential \"cred-aws-1\" is a gcp_service_account credential, but topology eks runs on aws"
        );
    }
}
