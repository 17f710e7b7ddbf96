//! A REST PATCH of a runtime: an upgrade (a merge patch of its cluster configuration), a change of its deletion
//! protection, or a change of its approval policy; each alone (an upgrade queues an operation, the others change
//! only the record).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::ToSchema;

use super::{Findings, Invalid, InvalidReason, Rejected, upgrade_from_json};
use crate::domain::UpgradeClusterInput;
use crate::domain::approval::ApprovalPolicy;

const DELETION_PROTECTION: &str = "deletionProtection";
const APPROVAL_POLICY: &str = "approvalPolicy";

/// The body of a PATCH that turns the runtime's deletion protection on or off: that field alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletionProtectionChange {
    /// While true, deprovisionings are refused (409 `deletion_protected`).
    pub deletion_protection: bool,
}

/// The body of a PATCH that changes which plans of the runtime's runs wait for approval: that field alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalPolicyChange {
    /// `auto` (no plan waits; a destructive one is refused), `safeOnly` (risky and destructive ones wait) or
    /// `manual` (every plan that changes something waits). Needs `update` on `runtimes/approval`.
    pub approval_policy: ApprovalPolicy,
}

/// What a PATCH asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimePatch {
    Upgrade(UpgradeClusterInput),
    DeletionProtection(bool),
    ApprovalPolicy(ApprovalPolicy),
}

/// The PATCH `body` (with `?dryRun`), every refused field named at once.
pub fn runtime_patch_from_json(body: &Value, dry_run: bool) -> Result<RuntimePatch, Rejected> {
    if body.get(DELETION_PROTECTION).is_some() {
        let enabled = record_change(body, DELETION_PROTECTION, dry_run, "true or false")?;
        return Ok(RuntimePatch::DeletionProtection(enabled));
    }
    if body.get(APPROVAL_POLICY).is_some() {
        let policy = record_change(body, APPROVAL_POLICY, dry_run, "auto, safeOnly or manual")?;
        return Ok(RuntimePatch::ApprovalPolicy(policy));
    }
    upgrade_from_json(body).map(RuntimePatch::Upgrade)
}

/// The value of a change of the runtime's record alone: `field` by itself in the body (`expected`: its values),
/// no dry run.
fn record_change<T: DeserializeOwned>(body: &Value, field: &str, dry_run: bool, expected: &str) -> Result<T, Rejected> {
    let parsed = serde_json::from_value::<T>(body[field].clone());
    let mut findings = Findings::default();
    if body.as_object().is_some_and(|fields| fields.len() > 1) {
        findings.check(Err(Invalid::new(
            InvalidReason::NotAllowed,
            field,
            "change it in a PATCH of its own: it changes only the runtime's record",
        )));
    }
    if parsed.is_err() {
        findings.check(Err(Invalid::new(InvalidReason::Format, field, format!("must be {expected}"))));
    }
    if dry_run {
        findings.check(Err(Invalid::new(
            InvalidReason::NotAllowed,
            "dryRun",
            format!("{field} changes no cluster: there is nothing to plan"),
        )));
    }
    findings.into_result()?;
    parsed.map_err(|_| Invalid::new(InvalidReason::Format, field, format!("must be {expected}")).into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused_fields(body: Value, dry_run: bool) -> Vec<(String, InvalidReason)> {
        let refused = runtime_patch_from_json(&body, dry_run).expect_err("refused");
        refused.all().map(|invalid| (invalid.field.clone(), invalid.reason)).collect()
    }

    #[test]
    fn deletion_protection_is_changed_alone_and_without_a_dry_run() {
        assert_eq!(
            runtime_patch_from_json(&json!({ "deletionProtection": false }), false),
            Ok(RuntimePatch::DeletionProtection(false))
        );
        assert_eq!(
            refused_fields(json!({ "deletionProtection": "no", "kubernetesVersion": "1.35" }), true),
            [
                ("deletionProtection".to_owned(), InvalidReason::NotAllowed),
                ("deletionProtection".to_owned(), InvalidReason::Format),
                ("dryRun".to_owned(), InvalidReason::NotAllowed)
            ]
        );
        assert_eq!(
            refused_fields(json!({ "deletionProtection": "no" }), false),
            [("deletionProtection".to_owned(), InvalidReason::Format)]
        );
        let upgrade = runtime_patch_from_json(&json!({ "kubernetesVersion": "1.35" }), false);
        assert!(matches!(upgrade, Ok(RuntimePatch::Upgrade(_))), "{upgrade:?}");
    }

    #[test]
    fn the_approval_policy_is_changed_alone_and_only_to_a_known_policy() {
        assert_eq!(
            runtime_patch_from_json(&json!({ "approvalPolicy": "safeOnly" }), false),
            Ok(RuntimePatch::ApprovalPolicy(ApprovalPolicy::SafeOnly))
        );
        assert_eq!(
            refused_fields(json!({ "approvalPolicy": "SafeOnly" }), false),
            [("approvalPolicy".to_owned(), InvalidReason::Format)]
        );
        assert_eq!(
            refused_fields(json!({ "approvalPolicy": "manual", "workerPool": { "maxSize": 3 } }), false),
            [("approvalPolicy".to_owned(), InvalidReason::NotAllowed)]
        );
    }
}
