//! The mutations: provisioning, the changes of a runtime, deprovisioning, cancel, retry and plan approval.

use async_graphql::{Context, Object};

use super::types::{RotatedKubeconfig, RuntimeNode};
use super::{GraphQLResult, OperationView, authorize, graphql_error, operation_id, runtime_id, service};
use crate::api::audit::{ApiKind, AuditEvent};
use crate::api::authentication::Identity;
use crate::api::authorization::{Action, Subresource, Verb};
use crate::domain::approval::ApprovalPolicy;
use crate::domain::{Operation, ProvisionRequest, RuntimeId, UpgradeClusterInput};
use crate::service::{Requested, Service};

pub struct Mutation;

/// What a mutation answers: the operation it queued (or cancelled), with its stages.
async fn view(service: &Service, operation: Operation) -> GraphQLResult<OperationView> {
    Ok(service.with_stages(operation).await.map_err(graphql_error)?.into())
}

#[Object]
impl Mutation {
    /// With `dryRun`, only validates, renders and plans: the runtime is recorded as a preview (its name stays
    /// free) and nothing is built.
    async fn provision_runtime(
        &self,
        context: &Context<'_>,
        config: ProvisionRequest,
        #[graphql(default_with = "Some(false)")] dry_run: Option<bool>,
    ) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Create)).await?;
        let identity = context.data::<Identity>()?;
        let dry_run = dry_run.unwrap_or_default();
        let service = service(context);
        let accepted =
            service.provision_runtime(config, None, dry_run, &identity.username).await.map_err(graphql_error)?;
        if !accepted.replayed {
            identity.audit(ApiKind::Graphql, &accepted.operation);
        }
        view(&service, accepted.operation).await
    }

    /// Changes a provisioned cluster (planned first; a plan that would replace the cluster is refused). The
    /// runtime's configuration changes only once the upgrade succeeded; with `dryRun` the operation only plans.
    /// `approvalPolicy` holds for this run instead of the runtime's (one that holds back less needs the right to
    /// approve plans).
    async fn upgrade_cluster(
        &self,
        context: &Context<'_>,
        id: String,
        config: UpgradeClusterInput,
        #[graphql(default_with = "Some(false)")] dry_run: Option<bool>,
        approval_policy: Option<ApprovalPolicy>,
    ) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let dry_run = dry_run.unwrap_or_default();
        let service = service(context);
        let runtime_id = runtime_id(&id)?;
        if service.loosens_approval(runtime_id, approval_policy).await.map_err(graphql_error)? {
            authorize(context, Action::to_approve()).await?;
        }
        let operation = service
            .upgrade_cluster(runtime_id, config, dry_run, approval_policy, &identity.username, None)
            .await
            .map_err(graphql_error)?;
        audit_queued(identity, &operation);
        view(&service, operation.into_operation()).await
    }

    /// A new kubeconfig for a cluster that signs in with client certificates (vanilla_kubeadm): a certificate the
    /// cluster issues for `APP_KUBECONFIG_LIFETIME`, handed to every reader from now on; the one before stays valid
    /// until it expires. Refused (`nothing_to_rotate`) for EKS and GKE, whose kubeconfigs use the cloud's token
    /// plugin. Needs the right to read the kubeconfig.
    async fn rotate_kubeconfig(&self, context: &Context<'_>, id: String) -> GraphQLResult<RotatedKubeconfig> {
        authorize(context, Action::on(Subresource::Kubeconfig)).await?;
        let identity = context.data::<Identity>()?;
        let runtime_id = runtime_id(&id)?;
        let handed_out = service(context).rotate_kubeconfig(runtime_id).await.map_err(graphql_error)?;
        identity.audit_kubeconfig(ApiKind::Graphql, AuditEvent::KubeconfigRotated, runtime_id, &handed_out);
        Ok(RotatedKubeconfig { kubeconfig: handed_out.kubeconfig, expires_at: handed_out.expires_at })
    }

    /// Scales every worker pool to zero (and stops a vanilla control plane); the configuration is kept for the
    /// wake-up. A hibernated runtime refuses upgrades until it is woken up; it can be deprovisioned. A repeated
    /// request returns the hibernation already queued or running, or the last operation once it sleeps.
    async fn hibernate_runtime(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let service = service(context);
        let change =
            service.hibernate_runtime(runtime_id(&id)?, &identity.username, None).await.map_err(graphql_error)?;
        audit_queued(identity, &change);
        view(&service, change.into_operation()).await
    }

    /// Has kubeadm renew a vanilla runtime's control-plane certificates, one node after the other (EKS and GKE
    /// renew their own: `managed_by_the_cloud`). A repeated request returns the renewal queued or running.
    async fn renew_certificates(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let service = service(context);
        let change =
            service.renew_certificates(runtime_id(&id)?, &identity.username, None).await.map_err(graphql_error)?;
        audit_queued(identity, &change);
        view(&service, change.into_operation()).await
    }

    /// Brings a hibernated cluster back at its configured sizes; a vanilla one ends once its API server answers.
    /// A repeated request returns the wake-up already queued or running, or the last operation once it is awake.
    async fn wake_up_runtime(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let service = service(context);
        let change =
            service.wake_up_runtime(runtime_id(&id)?, &identity.username, None).await.map_err(graphql_error)?;
        audit_queued(identity, &change);
        view(&service, change.into_operation()).await
    }

    /// Cancels an operation: a queued one ends at once; a running one is stopped (its Terraform interrupted at a
    /// safe point) and ends `Failed` with reason `cancelled`. A repeated cancel returns the operation; an error
    /// once it has ended otherwise.
    async fn cancel_operation(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let service = service(context);
        let change = service.cancel_operation(operation_id(&id)?, &identity.username).await.map_err(graphql_error)?;
        if !matches!(change, Requested::Done(_)) {
            identity.audit_cancel(ApiKind::Graphql, change.operation());
        }
        view(&service, change.into_operation()).await
    }

    /// Turns a runtime's deletion protection on or off: while it is on, deprovisionings are refused
    /// (`deletion_protected`). Changes only the runtime's record; no operation is queued.
    async fn set_deletion_protection(
        &self,
        context: &Context<'_>,
        id: String,
        enabled: bool,
    ) -> GraphQLResult<RuntimeNode> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let id = runtime_id(&id)?;
        let status = service(context).set_deletion_protection(id, enabled).await.map_err(graphql_error)?;
        identity.audit_deletion_protection(ApiKind::Graphql, id, enabled);
        Ok(RuntimeNode::new(status))
    }

    /// Retries a failed operation: a new operation of the same type and target (`retryOf` names the failed one) on
    /// the runtime whose last operation it is. Refused (`not_retryable`) when it has not failed, another came
    /// after it, or its `lastError.reason` is one a new run cannot fix. A repeated request returns the retry that
    /// runs or succeeded. Retrying a deprovisioning needs `delete`, a provisioning `create`.
    async fn retry_operation(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationView> {
        authorize(context, Action::on_runtimes(Verb::Update)).await?;
        let identity = context.data::<Identity>()?;
        let service = service(context);
        let id = operation_id(&id)?;
        let failed = service.operation_status(id).await.map_err(graphql_error)?.operation;
        authorize(context, Action::to_retry(failed.operation_type)).await?;
        let retried_policy = service.loosens_approval(RuntimeId(failed.runtime_id), failed.approval_policy);
        if retried_policy.await.map_err(graphql_error)? {
            authorize(context, Action::to_approve()).await?;
        }
        let change = service.retry_operation(id, &identity.username, None).await.map_err(graphql_error)?;
        audit_queued(identity, &change);
        view(&service, change.into_operation()).await
    }

    /// Approves the plan an operation waits with (state `AwaitingApproval`), named by its `planSha256`: the
    /// operation is queued again and applies exactly that plan (a plan whose state moved on meanwhile fails as
    /// `stale_plan`). Refused: `not_awaiting_approval`, `plan_mismatch`, `approval_expired`. Needs `update` on
    /// `runtimes/approval`.
    async fn approve_operation(
        &self,
        context: &Context<'_>,
        id: String,
        plan_sha256: String,
    ) -> GraphQLResult<OperationView> {
        authorize(context, Action::to_approve()).await?;
        let identity = context.data::<Identity>()?;
        let service = service(context);
        let change = service
            .approve_operation(operation_id(&id)?, &plan_sha256, &identity.username)
            .await
            .map_err(graphql_error)?;
        if let Requested::Queued(operation) = &change {
            identity.audit_approval(ApiKind::Graphql, AuditEvent::PlanApproved, operation);
        }
        view(&service, change.into_operation()).await
    }

    /// Rejects the plan an operation waits with: it fails with reason `plan_rejected`, nothing applied. Needs
    /// `update` on `runtimes/approval`.
    async fn reject_operation(&self, context: &Context<'_>, id: String) -> GraphQLResult<OperationView> {
        authorize(context, Action::to_approve()).await?;
        let identity = context.data::<Identity>()?;
        let service = service(context);
        let change = service.reject_operation(operation_id(&id)?, &identity.username).await.map_err(graphql_error)?;
        if let Requested::Queued(operation) = &change {
            identity.audit_approval(ApiKind::Graphql, AuditEvent::PlanRejected, operation);
        }
        view(&service, change.into_operation()).await
    }

    /// Chooses which plans of a runtime's runs wait for approval: `Auto` (none; a destructive plan is refused),
    /// `SafeOnly` (risky and destructive ones), `Manual` (every plan that changes something). Changes only the
    /// runtime's record. Needs `update` on `runtimes/approval`.
    async fn set_approval_policy(
        &self,
        context: &Context<'_>,
        id: String,
        policy: ApprovalPolicy,
    ) -> GraphQLResult<RuntimeNode> {
        authorize(context, Action::to_approve()).await?;
        let identity = context.data::<Identity>()?;
        let id = runtime_id(&id)?;
        let status = service(context).set_approval_policy(id, policy).await.map_err(graphql_error)?;
        identity.audit_approval_policy(ApiKind::Graphql, id);
        Ok(RuntimeNode::new(status))
    }

    /// Returns the id of the deprovisioning operation (for a repeated request, of the one queued, running or done).
    /// `confirm` names the runtime: required when the operator requires confirmations, checked whenever sent.
    /// Refused (`deletion_protected`) while the runtime's deletion protection is on. `force` marks the runtime
    /// deleted without a run (with `confirm`), only when its last deprovisioning failed because its credential is
    /// gone or refused; the operation's `forced` lists what may remain in the cloud.
    async fn deprovision_runtime(
        &self,
        context: &Context<'_>,
        id: String,
        confirm: Option<String>,
        #[graphql(default)] force: bool,
    ) -> GraphQLResult<String> {
        authorize(context, Action::on_runtimes(Verb::Delete)).await?;
        let identity = context.data::<Identity>()?;
        let change = service(context)
            .deprovision_runtime(runtime_id(&id)?, confirm.as_deref(), force, &identity.username, None)
            .await
            .map_err(graphql_error)?;
        audit_queued(identity, &change);
        Ok(change.operation().id.to_string())
    }
}

/// The audit line of an operation queued now; a repeated request changed nothing.
fn audit_queued(identity: &Identity, change: &Requested) {
    if let Requested::Queued(operation) = change {
        identity.audit(ApiKind::Graphql, operation);
    }
}
