//! A vanilla control plane's upgrade: changed before anything else, one node at a time, each change planned
//! alone, applied as planned and awaited until the nodes say they are done. No worker changes before: none may
//! be newer than its control plane. An approved run applies each part only when it is part of the approved plan,
//! value by value ([`PlanChanges`]).

use std::time::Duration;

use runner_contract::manifest::{ControlPlaneUpgrade, NodesPath};
use runner_contract::plan::PlanSummary;

use crate::approved_changes::PlanChanges;
use crate::aws::AwsSession;
use crate::plans::{EVERYTHING, apply_plan, plan, refuse_destructive, show_changes};
use crate::settings::RunnerSettings;
use crate::terraform::{RecordCreation, Signals, Terraform};
use crate::{Error, Result, output};

/// What every part of the upgrade works with.
pub(crate) struct ControlPlaneUpgradeRun<'a> {
    pub(crate) settings: &'a RunnerSettings,
    pub(crate) terraform: &'a Terraform,
    pub(crate) recorder: &'a dyn RecordCreation,
    pub(crate) aws: &'a AwsSession,
    pub(crate) lock_timeout: &'a str,
}

/// One part: the resource applied alone, and the SSM parameter the nodes publish once they have taken it,
/// within `timeout`.
struct ControlPlaneChange {
    target: String,
    marker: String,
    what: String,
    timeout: Duration,
}

impl ControlPlaneUpgradeRun<'_> {
    /// The control plane's parts, then the rest planned again from the state as it is then, into the plan file
    /// the apply applies. An approved run's plan file (in the work folder) goes stale once the first part is
    /// applied, so the run starts only while a new plan makes exactly its changes, value by value, and applies
    /// each part and the rest only as far as the approved plan makes them.
    pub(crate) async fn upgrade_first(
        &self,
        upgrade: &ControlPlaneUpgrade,
        approved: bool,
        signals: &mut Signals,
    ) -> Result<()> {
        let approved = match approved {
            true => Some(self.approved_and_still_planned(signals).await?),
            false => None,
        };
        self.parts(upgrade, approved.as_ref(), signals).await?;
        let protected = &self.settings.protected_resources;
        let rest = plan(self.terraform, EVERYTHING, self.lock_timeout, protected, signals).await?;
        self.check(&rest, approved.as_ref()).await
    }

    /// The approved plan's changes, when a new plan of everything makes exactly them.
    async fn approved_and_still_planned(&self, signals: &mut Signals) -> Result<PlanChanges> {
        let approved = show_changes(self.terraform).await?;
        let protected = &self.settings.protected_resources;
        plan(self.terraform, EVERYTHING, self.lock_timeout, protected, signals).await?;
        let fresh = show_changes(self.terraform).await?;
        approved.same_as(&fresh).map_err(|reason| Error::StalePlan {
            reason: format!("a new plan makes other changes than the approved one ({reason})"),
        })?;
        Ok(approved)
    }

    /// Each node's machine (a new type: EC2 stops and starts it), then the version.
    async fn parts(
        &self,
        upgrade: &ControlPlaneUpgrade,
        approved: Option<&PlanChanges>,
        signals: &mut Signals,
    ) -> Result<()> {
        // Where the nodes publish is recorded by the provisioning's apply.
        let outputs = self.terraform.outputs().await?;
        let kubeconfig_parameter = output(&outputs, "kubeconfig_ssm_parameter")?;
        let nodes = NodesPath::of_kubeconfig_parameter(kubeconfig_parameter).ok_or_else(|| {
            Error::Outputs(format!("kubeconfig_ssm_parameter {kubeconfig_parameter:?} is not an SSM path"))
        })?;
        for node in 0..=upgrade.last_node {
            let change = ControlPlaneChange {
                target: format!("{}[{node}]", upgrade.machines),
                marker: nodes.running_marker(node, &upgrade.machine_type),
                what: format!("that control-plane node {node} runs again on {}", upgrade.machine_type),
                timeout: self.settings.kubeconfig_timeout,
            };
            self.apply_alone_then_wait(&change, approved, signals).await?;
        }
        let change = ControlPlaneChange {
            target: upgrade.resource.clone(),
            marker: nodes.upgraded_marker(upgrade.last_node, &upgrade.version),
            what: format!("that its control plane runs {}", upgrade.version),
            timeout: self.settings.control_plane_upgrade_timeout,
        };
        self.apply_alone_then_wait(&change, approved, signals).await
    }

    /// Plans `change.target` alone; when that changes anything, checks it, removes the marker (one of an earlier
    /// change must not count), applies the plan and waits for the marker.
    async fn apply_alone_then_wait(
        &self,
        change: &ControlPlaneChange,
        approved: Option<&PlanChanges>,
        signals: &mut Signals,
    ) -> Result<()> {
        let (terraform, lock_timeout) = (self.terraform, self.lock_timeout);
        let protected = &self.settings.protected_resources;
        let summary = plan(terraform, Some(&change.target), lock_timeout, protected, signals).await?;
        if summary.add + summary.change + summary.destroy == 0 {
            return Ok(());
        }
        self.check(&summary, approved).await?;
        self.aws.delete_parameter(&change.marker).await?;
        apply_plan(terraform, lock_timeout, signals, Some(self.recorder)).await?;
        tracing::info!(target = change.target, marker = change.marker, "waiting for the control plane");
        let interval = self.settings.kubeconfig_poll_interval;
        self.aws.wait_for_parameter(&change.marker, &change.what, interval, change.timeout, signals).await?;
        tracing::info!(target = change.target, "the control plane has taken the change");
        Ok(())
    }

    /// The saved plan (`summary` is its) may be applied: an approved run's only when the approved plan makes each
    /// of its changes, another's only when it destroys nothing protected.
    async fn check(&self, summary: &PlanSummary, approved: Option<&PlanChanges>) -> Result<()> {
        match approved {
            Some(approved) => {
                let planned = show_changes(self.terraform).await?;
                approved.admits(&planned).map_err(|reason| Error::BeyondApproval { reason })
            }
            None => refuse_destructive(summary),
        }
    }
}
