//! The domain's types to the database's rows and back; an unknown stored value is an error, never a default.

use super::certificates::{certificates_from_column, certificates_to_column};
use super::entity::{operation, runtime};
use super::{Error, Result};
use crate::domain::approval::{Approval, ApprovalPolicy};
use crate::domain::managed_by::ResourceRef;
use crate::domain::run::Stage;
use crate::domain::state_bucket;
use crate::domain::tenant::Tenant;
use crate::domain::{
    ClusterConfig, Component, FailureReason, Labels, LastError, Operation, OperationState, OperationType,
    ProviderVersion, Runtime, TraceParent,
};

/// The key of [`ClusterConfig::api_allowed_cidrs`] in the configuration's JSON.
const API_ALLOWED_CIDRS: &str = "apiAllowedCidrs";

/// A configuration as it is stored: its JSON without `apiAllowedCidrs`, and that list for a column of its own. A
/// replica of the previous release reads the JSON with its own closed set of fields, so a new field there would
/// make every runtime and upgrade recorded by this release unreadable to it during a rolling update.
pub(super) fn config_columns(config: &ClusterConfig) -> Result<(serde_json::Value, Option<serde_json::Value>)> {
    let mut json = serde_json::to_value(config).map_err(|error| Error::Corrupt(error.to_string()))?;
    let cidrs = json.as_object_mut().and_then(|fields| fields.remove(API_ALLOWED_CIDRS));
    Ok((json, cidrs))
}

/// The inverse of [`config_columns`]; `whose`: what the configuration belongs to, for the error.
fn config_from_columns(
    json: serde_json::Value,
    cidrs: Option<serde_json::Value>,
    whose: impl Fn() -> String,
) -> Result<ClusterConfig> {
    let mut config: ClusterConfig =
        serde_json::from_value(json).map_err(|error| Error::Corrupt(format!("{}: {error}", whose())))?;
    if let Some(cidrs) = cidrs {
        let cidrs = serde_json::from_value(cidrs)
            .map_err(|error| Error::Corrupt(format!("{} {API_ALLOWED_CIDRS}: {error}", whose())))?;
        config.api_allowed_cidrs = Some(cidrs);
    }
    Ok(config)
}

pub(super) fn runtime_to_model(runtime: &Runtime) -> Result<runtime::Model> {
    let config = &runtime.cluster_config;
    let (cluster_config, api_allowed_cidrs) = config_columns(config)?;
    Ok(runtime::Model {
        id: runtime.id,
        name: runtime.name.clone(),
        description: runtime.description.clone(),
        labels: serde_json::to_value(&runtime.labels).map_err(|error| Error::Corrupt(error.to_string()))?,
        topology: config.topology.as_str().to_owned(),
        cloud: config.topology.cloud().as_str().to_owned(),
        region: config.region.clone(),
        environment: config.environment.clone(),
        credential_id: config.credential_id.clone(),
        cluster_config,
        api_allowed_cidrs,
        last_operation_id: runtime.last_operation_id,
        created_at: runtime.created_at,
        updated_at: runtime.updated_at,
        deleted_at: runtime.deleted_at,
        preview: runtime.preview,
        hibernated: runtime.hibernated,
        state_bucket: Some(runtime.state_bucket.clone()),
        tenant: runtime.tenant.as_ref().map(|tenant| tenant.as_str().to_owned()),
        deletion_protection: runtime.deletion_protection,
        approval_policy: runtime.approval_policy.as_str().to_owned(),
        managed_by: runtime.managed_by.as_ref().map(ToString::to_string),
        kubeconfig_expires_at: runtime.kubeconfig_expires_at,
        certificates: runtime.certificates.as_ref().map(certificates_to_column).transpose()?,
        // Due at once; written by the certificate watch only.
        certificates_due_at: None,
    })
}

pub(super) fn runtime_from_model(model: runtime::Model) -> Result<Runtime> {
    let labels: Labels = serde_json::from_value(model.labels)
        .map_err(|error| Error::Corrupt(format!("runtime {} labels: {error}", model.id)))?;
    let id = model.id;
    let cluster_config =
        config_from_columns(model.cluster_config, model.api_allowed_cidrs, || format!("runtime {id} cluster config"))?;
    // Runtimes recorded before they recorded their bucket keep the name they were given.
    let state_bucket = model
        .state_bucket
        .unwrap_or_else(|| state_bucket::legacy_state_bucket_name(&cluster_config.environment, &model.name));
    let tenant = model
        .tenant
        .map(|tenant| Tenant::parse(&tenant))
        .transpose()
        .map_err(|error| Error::Corrupt(format!("runtime {} tenant: {error}", model.id)))?;
    let managed_by = (model.managed_by.as_deref())
        .map(ResourceRef::parse)
        .transpose()
        .map_err(|error| Error::Corrupt(format!("runtime {} managed_by: {error}", model.id)))?;
    Ok(Runtime {
        id: model.id,
        name: model.name,
        description: model.description,
        labels,
        last_operation_id: model.last_operation_id,
        created_at: model.created_at,
        updated_at: model.updated_at,
        deleted_at: model.deleted_at,
        state_bucket,
        tenant,
        preview: model.preview,
        hibernated: model.hibernated,
        managed_by,
        kubeconfig_expires_at: model.kubeconfig_expires_at,
        certificates: model.certificates.as_deref().map(certificates_from_column).transpose()?,
        deletion_protection: model.deletion_protection,
        approval_policy: ApprovalPolicy::parse(&model.approval_policy)
            .ok_or_else(|| corrupt("approval policy", &model.approval_policy))?,
        cluster_config,
    })
}

pub(super) fn operation_to_model(operation: &Operation) -> Result<operation::Model> {
    let last_error = operation.last_error.as_ref();
    let (target_config, target_api_allowed_cidrs) = match &operation.target_config {
        Some(config) => {
            let (json, cidrs) = config_columns(config)?;
            (Some(json), cidrs)
        }
        None => (None, None),
    };
    Ok(operation::Model {
        id: operation.id,
        runtime_id: operation.runtime_id,
        operation_type: operation.operation_type.as_str().to_owned(),
        state: operation.state.as_str().to_owned(),
        stage: operation.stage.as_str().to_owned(),
        message: operation.message.clone(),
        last_error_message: last_error.map(|error| error.err_message.clone()),
        last_error_reason: last_error.map(|error| error.reason.as_str().to_owned()),
        last_error_component: last_error.map(|error| error.component.as_str().to_owned()),
        attempts: operation.attempts,
        claims: operation.claims,
        terraform_provider: operation.terraform_provider.as_ref().map(ProviderVersion::to_string),
        plan_summary: operation.plan_summary.as_ref().map(|summary| serde_json::json!(summary).to_string()),
        target_config,
        target_api_allowed_cidrs,
        dry_run: operation.dry_run,
        minors: (!operation.minors.is_empty()).then(|| serde_json::json!(operation.minors).to_string()),
        requested_by: operation.requested_by.clone(),
        cancel_requested_by: operation.cancel_requested_by.clone(),
        retry_of: operation.retry_of,
        saved_plan_sha256: operation.saved_plan_sha256.clone(),
        approval_expires_at: operation.approval_expires_at,
        approved_by: operation.approved.as_ref().map(|approval| approval.by.clone()),
        approved_at: operation.approved.as_ref().map(|approval| approval.at),
        approval_policy: operation.approval_policy.map(|policy| policy.as_str().to_owned()),
        forced: operation.forced.as_ref().map(|forced| serde_json::json!(forced).to_string()),
        trace_parent: operation.trace_parent.as_ref().map(|parent| parent.as_str().to_owned()),
        kubeconfig_sha256: None,
        claim_token: None,
        progress_since_claim: false,
        owner: None,
        lease_expires_at: None,
        created_at: operation.created_at,
        started_at: operation.started_at,
        updated_at: operation.updated_at,
        finished_at: operation.finished_at,
    })
}

pub(super) fn operation_from_model(model: operation::Model) -> Result<Operation> {
    let last_error = match (model.last_error_message, model.last_error_reason, model.last_error_component) {
        (Some(err_message), Some(reason), Some(component)) => Some(LastError {
            err_message,
            reason: FailureReason::parse(&reason).ok_or_else(|| corrupt("failure reason", &reason))?,
            component: Component::parse(&component).ok_or_else(|| corrupt("component", &component))?,
        }),
        (None, _, _) => None,
        (Some(_), _, _) => {
            return Err(Error::Corrupt(format!("operation {} has an error without reason or component", model.id)));
        }
    };
    Ok(Operation {
        id: model.id,
        runtime_id: model.runtime_id,
        operation_type: type_from_str(&model.operation_type)?,
        state: state_from_str(&model.state)?,
        stage: Stage::parse(&model.stage).ok_or_else(|| corrupt("stage", &model.stage))?,
        message: model.message,
        last_error,
        attempts: model.attempts,
        claims: model.claims,
        terraform_provider: model.terraform_provider.as_deref().map(provider_from_str).transpose()?,
        plan_summary: model
            .plan_summary
            .as_deref()
            .map(|summary| serde_json::from_str(summary).map_err(|_| corrupt("plan summary", summary)))
            .transpose()?,
        target_config: model
            .target_config
            .map(|config| {
                let id = model.id;
                config_from_columns(config, model.target_api_allowed_cidrs, || format!("operation {id} target config"))
            })
            .transpose()?,
        dry_run: model.dry_run,
        minors: model
            .minors
            .as_deref()
            .map(|minors| serde_json::from_str(minors).map_err(|_| corrupt("chain of minor versions", minors)))
            .transpose()?
            .unwrap_or_default(),
        requested_by: model.requested_by,
        cancel_requested_by: model.cancel_requested_by,
        retry_of: model.retry_of,
        saved_plan_sha256: model.saved_plan_sha256,
        approval_expires_at: model.approval_expires_at,
        approved: match (model.approved_by, model.approved_at) {
            (Some(by), Some(at)) => Some(Approval { by, at }),
            (None, None) => None,
            _ => return Err(Error::Corrupt(format!("operation {} has half an approval", model.id))),
        },
        approval_policy: model
            .approval_policy
            .as_deref()
            .map(|policy| ApprovalPolicy::parse(policy).ok_or_else(|| corrupt("approval policy", policy)))
            .transpose()?,
        forced: model
            .forced
            .as_deref()
            .map(|forced| serde_json::from_str(forced).map_err(|_| corrupt("forced deprovisioning", forced)))
            .transpose()?,
        trace_parent: model
            .trace_parent
            .as_deref()
            .map(|parent| TraceParent::parse(parent).ok_or_else(|| corrupt("trace context", parent)))
            .transpose()?,
        created_at: model.created_at,
        started_at: model.started_at,
        updated_at: model.updated_at,
        finished_at: model.finished_at,
    })
}

pub(super) fn corrupt(what: &str, value: &str) -> Error {
    Error::Corrupt(format!("unknown {what} {value:?}"))
}

/// `hashicorp/aws 6.47.0`, as `ProviderVersion`'s `Display` writes it.
pub(super) fn provider_from_str(value: &str) -> Result<ProviderVersion> {
    let (source, version) = value.split_once(' ').ok_or_else(|| corrupt("Terraform provider", value))?;
    let provider = ProviderVersion { source: source.to_owned(), version: version.to_owned() };
    if !provider.is_exact() {
        return Err(corrupt("Terraform provider", value));
    }
    Ok(provider)
}

pub(super) fn type_from_str(value: &str) -> Result<OperationType> {
    OperationType::parse(value).ok_or_else(|| corrupt("operation type", value))
}

pub(super) fn state_from_str(value: &str) -> Result<OperationState> {
    OperationState::parse(value).ok_or_else(|| corrupt("operation state", value))
}
