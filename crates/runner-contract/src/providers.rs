//! The Terraform providers a run uses, pinned to exact versions. The service renders the pin of the run's cloud
//! into `main.tf` and names it in `runner.json`; the runner installs it with the lock file the image ships for
//! that version (`<lock dir>/<lock_file_name>`), read-only, from the image's filesystem mirror: a Job never reaches
//! a provider registry, and a destroy runs the provider version that the cluster's apply used (the operation
//! records it).

use serde::{Deserialize, Serialize};

use crate::Cloud;

/// The AWS provider every AWS topology runs (`hashicorp/aws`).
pub const AWS_VERSION: &str = "6.47.0";
/// The Google provider GKE runs (`hashicorp/google`).
pub const GOOGLE_VERSION: &str = "8.0.0";

/// Where the image keeps one lock file per provider version it carries ([`ProviderVersion::lock_file_name`]),
/// written at image build from the mirrored release packages (Dockerfile).
pub const IMAGE_LOCK_DIR: &str = "/usr/local/share/kubeopera/terraform/locks";
/// The name Terraform reads the lock file under, in the root configuration's folder.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";

/// A provider at one exact version, as `main.tf` requires it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderVersion {
    /// The registry address without its host, `hashicorp/aws`.
    pub source: String,
    /// An exact version, `6.47.0`.
    pub version: String,
}

impl ProviderVersion {
    /// What this release of the service installs for `cloud`.
    pub fn pinned(cloud: Cloud) -> ProviderVersion {
        let (source, version) = match cloud {
            Cloud::Aws => ("hashicorp/aws", AWS_VERSION),
            Cloud::Gcp => ("hashicorp/google", GOOGLE_VERSION),
        };
        ProviderVersion { source: source.to_owned(), version: version.to_owned() }
    }

    /// The local name `main.tf` gives the provider (`aws`, `google`).
    pub fn name(&self) -> &str {
        self.source.rsplit('/').next().unwrap_or(&self.source)
    }

    /// The image's lock file for exactly this version: `hashicorp-aws-6.47.0.terraform.lock.hcl`.
    pub fn lock_file_name(&self) -> String {
        format!("{}-{}.terraform.lock.hcl", self.source.replace('/', "-"), self.version)
    }

    /// Whether `version` is an exact release version (digits and dots, optionally a pre-release), so that it can
    /// be written into `main.tf` and a file name.
    pub fn is_exact(&self) -> bool {
        let (release, pre_release) = self.version.split_once('-').unwrap_or((&self.version, ""));
        let parts: Vec<&str> = release.split('.').collect();
        parts.len() == 3
            && parts.iter().all(|part| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit()))
            && pre_release.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'.')
            && self.source.split('/').count() == 2
            && self
                .source
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"/-".contains(&byte))
    }
}

impl std::fmt::Display for ProviderVersion {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} {}", self.source, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cloud_has_an_exact_pin_and_a_lock_file_name() {
        let aws = ProviderVersion::pinned(Cloud::Aws);
        assert_eq!(aws.name(), "aws");
        assert!(aws.is_exact(), "{aws}");
        assert_eq!(aws.lock_file_name(), format!("hashicorp-aws-{AWS_VERSION}.terraform.lock.hcl"));
        let google = ProviderVersion::pinned(Cloud::Gcp);
        assert_eq!(google.name(), "google");
        assert!(google.is_exact(), "{google}");
    }

    #[test]
    fn only_exact_versions_are_exact() {
        let version = |version: &str| ProviderVersion { source: "hashicorp/aws".into(), version: version.into() };
        for exact in ["6.47.0", "10.0.1", "7.0.0-beta1"] {
            assert!(version(exact).is_exact(), "{exact}");
        }
        for loose in ["~> 6.0", "6.47", ">= 6.0", "6.47.0\"", "", "6..0", "6.47.0-x\n"] {
            assert!(!version(loose).is_exact(), "{loose}");
        }
        let foreign = ProviderVersion { source: "../../etc".into(), version: "1.0.0".into() };
        assert!(!foreign.is_exact());
    }
}
