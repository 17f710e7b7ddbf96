//! The plans of a run: everything (or one resource) planned into [`PLAN_FILE`], read back with its risks, checked,
//! and exactly that file applied.

use runner_contract::plan::PlanSummary;

use crate::approved_changes::PlanChanges;
use crate::terraform::{RecordCreation, Signals, Terraform};
use crate::{Error, Result};

/// The saved plan, in the work folder: what is applied is exactly what was planned and checked.
pub(crate) const PLAN_FILE: &str = "run.tfplan";

/// A plan of the whole configuration.
pub(crate) const EVERYTHING: Option<&str> = None;

/// Plans `target` alone (with `-target`), or everything, into [`PLAN_FILE`] and reads its summary, each change
/// with its risk (`protected`: the operator's additions to what an apply must leave standing).
pub(crate) async fn plan(
    terraform: &Terraform,
    target: Option<&str>,
    lock_timeout: &str,
    protected: &[String],
    signals: &mut Signals,
) -> Result<PlanSummary> {
    let summary = plan_with(terraform, &[], target, lock_timeout, protected, signals).await?;
    tracing::info!(risk = ?summary.risk, risky = ?summary.risky, destructive = ?summary.destructive, "plan assessed");
    Ok(summary)
}

/// A destroy's plan: a deprovisioning destroys everything by design, so it carries no risk.
pub(crate) async fn plan_destroy(
    terraform: &Terraform,
    lock_timeout: &str,
    signals: &mut Signals,
) -> Result<PlanSummary> {
    let summary = plan_with(terraform, &["-destroy"], EVERYTHING, lock_timeout, &[], signals).await?;
    Ok(PlanSummary { risk: None, risky: Vec::new(), destructive: Vec::new(), ..summary })
}

pub(crate) async fn plan_with(
    terraform: &Terraform,
    flags: &[&str],
    target: Option<&str>,
    lock_timeout: &str,
    protected: &[String],
    signals: &mut Signals,
) -> Result<PlanSummary> {
    let out = format!("-out={PLAN_FILE}");
    let target = target.map(|target| format!("-target={target}"));
    let mut arguments = vec!["plan", "-input=false", "-no-color", "-json", lock_timeout, &out];
    arguments.extend_from_slice(flags);
    arguments.extend(target.as_deref());
    terraform.run(&arguments, signals).await?;
    let summary = show_plan(terraform, protected).await?;
    tracing::info!(
        add = summary.add,
        change = summary.change,
        destroy = summary.destroy,
        replaced = ?summary.replaced,
        destroyed = ?summary.destroyed,
        "planned"
    );
    Ok(summary)
}

/// The summary of the saved plan in [`PLAN_FILE`], each change with its risk.
pub(crate) async fn show_plan(terraform: &Terraform, protected: &[String]) -> Result<PlanSummary> {
    let show = terraform.capture(&["show", "-json", "-no-color", PLAN_FILE]).await?;
    runner_contract::assess::summarize(&show, protected).map_err(Error::Plan)
}

/// What the saved plan in [`PLAN_FILE`] changes, value by value.
pub(crate) async fn show_changes(terraform: &Terraform) -> Result<PlanChanges> {
    let show = terraform.capture(&["show", "-json", "-no-color", PLAN_FILE]).await?;
    PlanChanges::of(&show).map_err(Error::Plan)
}

/// A plan that destroys or replaces a protected resource is never applied.
pub(crate) fn refuse_destructive(summary: &PlanSummary) -> Result<()> {
    if summary.destructive.is_empty() {
        Ok(())
    } else {
        Err(Error::DestructivePlan { addresses: summary.destructive.clone() })
    }
}

/// Applies exactly the saved plan; `recorder` records what it creates (a destroy creates nothing).
pub(crate) async fn apply_plan(
    terraform: &Terraform,
    lock_timeout: &str,
    signals: &mut Signals,
    recorder: Option<&dyn RecordCreation>,
) -> Result<()> {
    let arguments = ["apply", "-input=false", "-no-color", "-json", lock_timeout, PLAN_FILE];
    terraform.run_recording(&arguments, signals, recorder).await
}
