//! Plans that wait for approval (see `runner_contract::approval`): saved beside the state when the policy says
//! so, and restored, checked against the approved digest, when the approved run applies them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use runner_contract::approval::{plan_digest, saved_plan_object};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::plans::PLAN_FILE;
use crate::{CloudSession, Error, Result};

/// Where a saved plan lives and which run it belongs to.
pub(crate) struct SavedPlan<'a> {
    pub(crate) session: &'a CloudSession,
    pub(crate) bucket: &'a str,
    pub(crate) operation_id: Uuid,
}

impl SavedPlan<'_> {
    /// Keeps the work folder's plan file in the state bucket and returns its digest. The file is binary; the
    /// object is JSON (the plan base64-encoded), which both clouds' object clients here read and write.
    pub(crate) async fn save(&self, work_dir: &std::path::Path) -> Result<String> {
        let path = work_dir.join(PLAN_FILE);
        let plan =
            std::fs::read(&path).map_err(|error| Error::Input(format!("reading {}: {error}", path.display())))?;
        let digest = plan_digest(&plan);
        let object = json!({ "sha256": digest, "plan": STANDARD.encode(&plan) });
        self.session.write_json_object(self.bucket, &saved_plan_object(self.operation_id), &object).await?;
        tracing::info!(bucket = self.bucket, sha256 = digest, "the plan waits for approval; nothing was applied");
        Ok(digest)
    }

    /// Puts the approved plan into the work folder as the file to apply: it must still be there and have exactly
    /// the approved digest.
    pub(crate) async fn restore(&self, work_dir: &std::path::Path, approved_sha256: &str) -> Result<()> {
        let name = saved_plan_object(self.operation_id);
        let stale = |reason: String| Error::StalePlan { reason };
        let object = self
            .session
            .read_json_object(self.bucket, &name)
            .await?
            .ok_or_else(|| stale(format!("the saved plan {name} is gone")))?;
        let plan = object
            .get("plan")
            .and_then(Value::as_str)
            .and_then(|encoded| STANDARD.decode(encoded).ok())
            .ok_or_else(|| stale(format!("{name} holds no saved plan")))?;
        let digest = plan_digest(&plan);
        if digest != approved_sha256 {
            return Err(stale(format!("the saved plan has digest {digest}, not the approved {approved_sha256}")));
        }
        let path = work_dir.join(PLAN_FILE);
        std::fs::write(&path, plan).map_err(|error| Error::Input(format!("writing {}: {error}", path.display())))
    }

    /// Removes the saved plan once it has been applied: an approval is good for one apply.
    pub(crate) async fn discard(&self) -> Result<()> {
        self.session.delete_object(self.bucket, &saved_plan_object(self.operation_id)).await
    }
}

/// Terraform's refusal of a saved plan whose state has moved on.
pub(crate) fn stale_plan_refusal(error: Error) -> Error {
    match error {
        Error::Terraform { excerpt, .. } if excerpt.contains("Saved plan is stale") => Error::StalePlan {
            reason: "the state changed since the plan was made (Terraform: saved plan is stale)".to_owned(),
        },
        other => other,
    }
}
