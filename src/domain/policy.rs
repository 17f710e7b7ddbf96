//! The request rules operators can tune (from the settings), as plain types: the settings build them, the
//! service's validation applies them.

use ipnet::Ipv4Net;

use super::ClusterConfig;

/// A Kubernetes `MAJOR.MINOR` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubernetesVersion {
    pub major: u32,
    pub minor: u32,
}

impl std::str::FromStr for KubernetesVersion {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let (major, minor) = value.split_once('.').ok_or_else(|| format!("{value:?} is not MAJOR.MINOR"))?;
        let number = |part: &str| -> Result<u32, String> {
            if part.is_empty() || !part.bytes().all(|byte| byte.is_ascii_digit()) || part.len() > 4 {
                return Err(format!("{value:?} is not MAJOR.MINOR"));
            }
            part.parse().map_err(|_| format!("{value:?} is not MAJOR.MINOR"))
        };
        Ok(KubernetesVersion { major: number(major)?, minor: number(minor)? })
    }
}

impl std::fmt::Display for KubernetesVersion {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}.{}", self.major, self.minor)
    }
}

/// The request rules that operators can tune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationPolicy {
    pub min_kubernetes_version: KubernetesVersion,
    pub max_kubernetes_version: KubernetesVersion,
    /// The ranges that may reach a cluster's API when its request names none (`APP_API_ALLOWED_CIDRS`); without
    /// them such a request is refused.
    pub api_allowed_cidrs: Option<Vec<Ipv4Net>>,
}

impl ValidationPolicy {
    /// What the service accepts unless the operator says otherwise: no list of API ranges, so every provisioning
    /// must name its own.
    pub const DEFAULT: ValidationPolicy = ValidationPolicy {
        min_kubernetes_version: KubernetesVersion { major: 1, minor: 32 },
        max_kubernetes_version: KubernetesVersion { major: 1, minor: 37 },
        api_allowed_cidrs: None,
    };

    /// The ranges a cluster built from `config` may be reached from: the request's own, else the operator's.
    pub fn api_allowed_cidrs_for(&self, config: &ClusterConfig) -> Option<Vec<String>> {
        config
            .api_allowed_cidrs
            .clone()
            .or_else(|| self.api_allowed_cidrs.as_ref().map(|cidrs| cidrs.iter().map(ToString::to_string).collect()))
    }
}
