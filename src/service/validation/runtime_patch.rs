//! A REST PATCH of a runtime: an upgrade (a merge patch of its cluster configuration) or a change of its deletion
//! protection, never both at once (one queues an operation, the other changes only the record).

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{Findings, Invalid, InvalidReason, Rejected, upgrade_from_json};
use crate::domain::UpgradeClusterInput;

const DELETION_PROTECTION: &str = "deletionProtection";

/// The body of a PATCH that turns the runtime's deletion protection on or off: that field alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletionProtectionChange {
    /// While true, deprovisionings are refused (409 `deletion_protected`).
    pub deletion_protection: bool,
}

/// What a PATCH asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimePatch {
    Upgrade(UpgradeClusterInput),
    DeletionProtection(bool),
}

/// The PATCH `body` (with `?dryRun`), every refused field named at once.
pub fn runtime_patch_from_json(body: &Value, dry_run: bool) -> Result<RuntimePatch, Rejected> {
    let Some(protection) = body.get(DELETION_PROTECTION) else {
        return upgrade_from_json(body).map(RuntimePatch::Upgrade);
    };
    let mut findings = Findings::default();
    if body.as_object().is_some_and(|fields| fields.len() > 1) {
        findings.check(Err(Invalid::new(
            InvalidReason::NotAllowed,
            DELETION_PROTECTION,
            "change it in a PATCH of its own: the other fields queue an upgrade",
        )));
    }
    if !protection.is_boolean() {
        findings.check(Err(Invalid::new(InvalidReason::Format, DELETION_PROTECTION, "must be true or false")));
    }
    if dry_run {
        findings.check(Err(Invalid::new(
            InvalidReason::NotAllowed,
            "dryRun",
            "deletion protection changes no cluster: there is nothing to plan",
        )));
    }
    findings.into_result()?;
    let change: DeletionProtectionChange = serde_json::from_value(body.clone())
        .map_err(|error| Invalid::new(InvalidReason::Format, DELETION_PROTECTION, error.to_string()))?;
    Ok(RuntimePatch::DeletionProtection(change.deletion_protection))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn deletion_protection_is_changed_alone_and_without_a_dry_run() {
        assert_eq!(
            runtime_patch_from_json(&json!({ "deletionProtection": false }), false),
            Ok(RuntimePatch::DeletionProtection(false))
        );
        let mixed = runtime_patch_from_json(&json!({ "deletionProtection": "no", "kubernetesVersion": "1.35" }), true)
            .expect_err("refused");
        let fields: Vec<(&str, InvalidReason)> =
            mixed.all().map(|invalid| (invalid.field.as_str(), invalid.reason)).collect();
        assert_eq!(
            fields,
            [
                ("deletionProtection", InvalidReason::NotAllowed),
                ("deletionProtection", InvalidReason::Format),
                ("dryRun", InvalidReason::NotAllowed)
            ]
        );
        let upgrade = runtime_patch_from_json(&json!({ "kubernetesVersion": "1.35" }), false);
        assert!(matches!(upgrade, Ok(RuntimePatch::Upgrade(_))), "{upgrade:?}");
    }
}
