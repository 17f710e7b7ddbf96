//! Chained minor upgrades: Kubernetes (kubeadm, EKS, GKE alike) moves one minor version at a time, so an upgrade
//! more than one minor ahead runs as one operation of several runs, one per minor, each planned, assessed and
//! applied like any upgrade (control plane first, then every pool). After each minor the runtime shows the
//! configuration at that minor, in the same transaction as the operation moves on: a failure leaves the runtime
//! at its last good minor and a retry starts from there. Pure rules; the worker and the store carry them out.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::policy::KubernetesVersion;
use super::run::Stage;
use super::{ClusterConfig, Operation, OperationType};

/// The minors an upgrade from `current` to `target` passes through, `target` last; empty when it does not go up
/// (or either is not `MAJOR.MINOR`, which validation reports).
pub fn minors_between(current: &str, target: &str) -> Vec<KubernetesVersion> {
    let (Ok(from), Ok(to)) = (current.parse::<KubernetesVersion>(), target.parse::<KubernetesVersion>()) else {
        return Vec::new();
    };
    if to.major != from.major {
        return Vec::new();
    }
    (from.minor + 1..=to.minor).map(|minor| KubernetesVersion { minor, ..from }).collect()
}

/// One minor of a chained upgrade: the version its run applies and when that run was queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MinorRun {
    #[serde(with = "as_text")]
    pub version: KubernetesVersion,
    pub started_at: DateTime<Utc>,
}

/// A version as the `MAJOR.MINOR` text the APIs show.
mod as_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::KubernetesVersion;

    pub(super) fn serialize<S: Serializer>(version: &KubernetesVersion, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(version)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<KubernetesVersion, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// What a chained upgrade records when one minor's run ended well and another follows.
#[derive(Debug, Clone, PartialEq)]
pub struct MinorDone {
    /// The runtime's configuration from now on: the upgrade's target at the minor just applied.
    pub applied: ClusterConfig,
    /// The chain's minors with the next one, started now, last.
    pub minors: Vec<MinorRun>,
}

impl Operation {
    /// The operation `self` (an upgrade queued to `target_config`) becomes for a runtime that runs `current`: a
    /// chain when the target is more than one minor ahead, queued at [`Stage::NextMinor`] for its first minor
    /// (a replica of an earlier release, which would apply the target in one jump, does not know that stage and
    /// leaves it alone). A dry run plans the first minor only.
    pub fn chained_from(self, current: &ClusterConfig) -> Operation {
        let Some(target) = self.target_config.as_ref().filter(|_| self.operation_type == OperationType::Upgrade) else {
            return self;
        };
        let minors = minors_between(&current.kubernetes_version, &target.kubernetes_version);
        let [first, .., last] = minors.as_slice() else { return self };
        let message = format!(
            "Operation queued: waiting for a worker to start upgrading to {first}, the first of {} minor versions \
             to {last}",
            minors.len()
        );
        let minors = vec![MinorRun { version: *first, started_at: self.created_at }];
        Operation { stage: Stage::NextMinor, minors, message, ..self }
    }

    /// The minor this operation's current run applies, for a chained upgrade.
    pub fn minor_target(&self) -> Option<KubernetesVersion> {
        self.minors.last().map(|minor| minor.version)
    }

    /// The configuration this operation's current run applies: the target, at the chain's current minor.
    pub fn run_config(&self) -> Option<ClusterConfig> {
        let target = self.target_config.as_ref()?;
        Some(match self.minor_target() {
            Some(minor) => ClusterConfig { kubernetes_version: minor.to_string(), ..target.clone() },
            None => target.clone(),
        })
    }

    /// Once the current run ended well (`now`): what the chain records when another minor follows; `None` when
    /// this was the last (or only) run, or a dry run (which plans one minor).
    pub fn minor_done(&self, now: DateTime<Utc>) -> Option<MinorDone> {
        let minor = self.minor_target().filter(|_| !self.dry_run)?;
        let target = self.target_config.as_ref()?.kubernetes_version.parse::<KubernetesVersion>().ok()?;
        (minor < target).then(|| {
            let next = MinorRun { version: KubernetesVersion { minor: minor.minor + 1, ..minor }, started_at: now };
            let minors = self.minors.iter().cloned().chain([next]).collect();
            MinorDone { applied: self.run_config().expect("a chain has a target"), minors }
        })
    }

    /// What a status says of the chain's current run, after the stage's own message.
    pub fn chain_step(&self) -> Option<String> {
        let (minor, target) = (self.minor_target()?, &self.target_config.as_ref()?.kubernetes_version);
        Some(format!("(minor {minor} of the upgrade to {target})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ProviderVersion, ProvisionRequest, Topology};

    /// A cluster at 1.32.
    fn current() -> ClusterConfig {
        let example = ProvisionRequest::example(Topology::VanillaKubeadm).cluster_config;
        ClusterConfig { kubernetes_version: "1.32".to_owned(), ..example }
    }

    fn upgrade_to(version: &str) -> (ClusterConfig, Operation) {
        let current = current();
        let target = ClusterConfig { kubernetes_version: version.to_owned(), ..current.clone() };
        let provider = ProviderVersion::pinned(current.topology.cloud());
        let operation = Operation {
            target_config: Some(target),
            ..Operation::queued(uuid::Uuid::now_v7(), OperationType::Upgrade, provider, Utc::now())
        };
        (current, operation)
    }

    fn version(text: &str) -> KubernetesVersion {
        text.parse().unwrap()
    }

    #[test]
    fn an_upgrade_passes_through_every_minor_up_to_its_target() {
        assert_eq!(minors_between("1.32", "1.35"), [version("1.33"), version("1.34"), version("1.35")]);
        assert_eq!(minors_between("1.32", "1.33"), [version("1.33")]);
        assert!(minors_between("1.33", "1.33").is_empty());
        assert!(minors_between("1.34", "1.33").is_empty());
        assert!(minors_between("1.34", "2.0").is_empty());
        assert!(minors_between("latest", "1.33").is_empty());
    }

    #[test]
    fn only_an_upgrade_more_than_one_minor_ahead_is_chained() {
        let (current, operation) = upgrade_to("1.33");
        let single = operation.chained_from(&current);
        assert_eq!((single.stage, single.minor_target()), (Stage::Queued, None));
        assert_eq!(single.minor_done(Utc::now()), None);

        let (current, operation) = upgrade_to("1.34");
        let chained = operation.chained_from(&current);
        assert_eq!((chained.stage, chained.minor_target()), (Stage::NextMinor, Some(version("1.33"))));
        assert_eq!(chained.minors[0].started_at, chained.created_at, "the first minor is queued with it");
        assert!(chained.message.contains("upgrading to 1.33, the first of 2 minor versions to 1.34"));
        assert_eq!(chained.run_config().unwrap().kubernetes_version, "1.33");
        assert_eq!(chained.chain_step().as_deref(), Some("(minor 1.33 of the upgrade to 1.34)"));
    }

    #[test]
    fn each_minor_but_the_last_hands_over_to_the_next_with_the_target_at_that_minor() {
        let (current, operation) = upgrade_to("1.35");
        let mut chained = operation.chained_from(&current);
        let mut applied = Vec::new();
        while let Some(done) = chained.minor_done(Utc::now()) {
            assert_eq!(done.applied.worker_pool, chained.target_config.as_ref().unwrap().worker_pool);
            assert_eq!(done.minors[..done.minors.len() - 1], chained.minors, "the minors so far stay");
            applied.push(done.applied.kubernetes_version.clone());
            chained.minors = done.minors;
        }
        assert_eq!(applied, ["1.33", "1.34"]);
        let timeline: Vec<String> = chained.minors.iter().map(|minor| minor.version.to_string()).collect();
        assert_eq!(timeline, ["1.33", "1.34", "1.35"]);
        assert_eq!(chained.run_config().unwrap().kubernetes_version, "1.35", "the last run applies the target");

        // A dry run plans the first minor and ends there.
        let (current, operation) = upgrade_to("1.35");
        let preview = Operation { dry_run: true, ..operation }.chained_from(&current);
        assert_eq!(preview.run_config().unwrap().kubernetes_version, "1.33");
        assert_eq!(preview.minor_done(Utc::now()), None);
    }

    #[test]
    fn other_operations_are_never_chained() {
        let current = current();
        let provider = ProviderVersion::pinned(current.topology.cloud());
        let hibernate = Operation::queued(uuid::Uuid::now_v7(), OperationType::Hibernate, provider, Utc::now());
        let unchanged = hibernate.clone().chained_from(&current);
        assert_eq!(unchanged, hibernate);
        assert_eq!(unchanged.run_config(), None);
    }
}
