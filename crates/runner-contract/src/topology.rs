//! The kinds of cluster and their clouds. Spelled `vanilla_kubeadm`, `eks`, `gke` in storage, JSON and
//! `runner.json` (GraphQL: `VANILLA_KUBEADM`, ...), and `aws`, `gcp` for the clouds.

use serde::{Deserialize, Serialize};

/// The kind of cluster to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::Enum))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// AWS instances that bootstrap themselves with kubeadm.
    VanillaKubeadm,
    /// AWS EKS with a managed node group.
    Eks,
    /// GCP GKE with a node pool.
    Gke,
}

impl Topology {
    pub fn cloud(self) -> Cloud {
        match self {
            Topology::VanillaKubeadm | Topology::Eks => Cloud::Aws,
            Topology::Gke => Cloud::Gcp,
        }
    }

    /// Why a credential of `kind` for `cloud` cannot build this topology, or `None` when it can: one rule and one
    /// message for the service's request check and its worker's.
    pub fn credential_mismatch(self, credential_id: &str, kind: &str, cloud: Cloud) -> Option<String> {
        (cloud != self.cloud()).then(|| {
            format!(
                "credential {credential_id:?} is a {kind} credential, but topology {} runs on {}",
                self.as_str(),
                self.cloud().as_str()
            )
        })
    }

    /// The spelling used in storage and in the REST API.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::VanillaKubeadm => "vanilla_kubeadm",
            Topology::Eks => "eks",
            Topology::Gke => "gke",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cloud {
    Aws,
    Gcp,
}

impl Cloud {
    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_maps_to_its_cloud() {
        assert_eq!(Topology::VanillaKubeadm.cloud(), Cloud::Aws);
        assert_eq!(Topology::Eks.cloud(), Cloud::Aws);
        assert_eq!(Topology::Gke.cloud(), Cloud::Gcp);
    }

    #[test]
    fn only_a_credential_of_the_topologys_cloud_fits() {
        assert_eq!(Topology::Eks.credential_mismatch("a", "aws_access_key", Cloud::Aws), None);
        let message = Topology::Gke.credential_mismatch("a", "aws_access_key", Cloud::Aws).unwrap();
        assert_eq!(message, "credential \"a\" is a aws_access_key credential, but topology gke runs on gcp");
    }

    #[test]
    fn topology_is_spelled_like_the_seed_in_json() {
        let json = serde_json::to_string(&Topology::VanillaKubeadm).unwrap();
        assert_eq!(json, "\"vanilla_kubeadm\"");
        let parsed: Topology = serde_json::from_str("\"gke\"").unwrap();
        assert_eq!(parsed, Topology::Gke);
        assert_eq!(Topology::Eks.as_str(), "eks");
    }

    #[test]
    fn clouds_are_spelled_as_in_json() {
        for cloud in [Cloud::Aws, Cloud::Gcp] {
            assert_eq!(serde_json::to_string(&cloud).unwrap(), format!("\"{}\"", cloud.as_str()));
        }
    }
}
