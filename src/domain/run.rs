//! The step machine of a run (a provisioning or deprovisioning operation) and the names of the Kubernetes objects
//! it uses. Pure: the worker performs the steps, this module only says which comes next and what things are called.

use uuid::Uuid;

use super::OperationType;

/// The steps of a run, in order (the derived ordering is the step order). The current one is stored with the
/// operation, so a new process resumes there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Recorded, not yet picked up by a worker.
    Queued,
    /// Resolve the cloud credential in auth-service and write it to the credentials Secret.
    ResolveCredential,
    /// Render the Terraform configuration into the config ConfigMap.
    RenderConfig,
    /// Create the Job that runs terraform.
    CreateJob,
    /// Follow the Job until it completes or fails.
    WaitForJob,
    /// Provisioning: require the outputs Secret. Deprovisioning: remove it and mark the runtime deleted.
    Finalize,
    /// Delete the credentials Secret, whatever the result.
    Cleanup,
    /// Nothing left to do.
    Done,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::Queued,
        Stage::ResolveCredential,
        Stage::RenderConfig,
        Stage::CreateJob,
        Stage::WaitForJob,
        Stage::Finalize,
        Stage::Cleanup,
        Stage::Done,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Queued => "Queued",
            Stage::ResolveCredential => "ResolveCredential",
            Stage::RenderConfig => "RenderConfig",
            Stage::CreateJob => "CreateJob",
            Stage::WaitForJob => "WaitForJob",
            Stage::Finalize => "Finalize",
            Stage::Cleanup => "Cleanup",
            Stage::Done => "Done",
        }
    }

    pub fn parse(value: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|stage| stage.as_str() == value)
    }

    /// The step after this one has succeeded.
    pub fn next(self) -> Stage {
        match self {
            Stage::Queued => Stage::ResolveCredential,
            Stage::ResolveCredential => Stage::RenderConfig,
            Stage::RenderConfig => Stage::CreateJob,
            Stage::CreateJob => Stage::WaitForJob,
            Stage::WaitForJob => Stage::Finalize,
            Stage::Finalize => Stage::Cleanup,
            Stage::Cleanup | Stage::Done => Stage::Done,
        }
    }

    /// What the operation is doing while at this step, as its status message.
    pub fn message(self, operation_type: OperationType) -> &'static str {
        match (self, operation_type) {
            (Stage::Queued, _) => "Operation queued: waiting for a worker",
            (Stage::ResolveCredential, _) => "Resolving the cloud credential",
            (Stage::RenderConfig, _) => "Rendering the Terraform configuration",
            (Stage::CreateJob, OperationType::Provision) => "Starting the terraform apply Job",
            (Stage::CreateJob, OperationType::Deprovision) => "Starting the terraform destroy Job",
            (Stage::WaitForJob, OperationType::Provision) => "terraform apply is running",
            (Stage::WaitForJob, OperationType::Deprovision) => "terraform destroy is running",
            (Stage::Finalize, OperationType::Provision) => "Checking the published kubeconfig",
            (Stage::Finalize, OperationType::Deprovision) => "Removing the cluster's outputs",
            (Stage::Cleanup, _) => "Removing the run's credentials",
            (Stage::Done, OperationType::Provision) => "Cluster provisioned",
            (Stage::Done, OperationType::Deprovision) => "Cluster deprovisioned",
        }
    }
}

/// What a run's Job is doing, as far as the API server says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Missing,
    Running,
    Succeeded,
    /// `message` is the runner's termination message (bounded and redacted) or the Job's failure reason.
    Failed {
        reason: String,
        message: String,
    },
}

/// The deterministic names of one run's Kubernetes objects: a retry or a new process finds what an earlier
/// attempt created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNames {
    pub job: String,
    pub config_map: String,
    pub credentials_secret: String,
    pub outputs_secret: String,
}

impl RunNames {
    pub fn new(operation_type: OperationType, runtime_id: Uuid) -> Self {
        let job = match operation_type {
            OperationType::Provision => format!("provision-{runtime_id}"),
            OperationType::Deprovision => format!("deprovision-{runtime_id}"),
        };
        RunNames {
            config_map: format!("{job}-config"),
            credentials_secret: format!("{job}-credentials"),
            outputs_secret: format!("provision-{runtime_id}-outputs"),
            job,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_run_in_order_and_end_done() {
        let mut stage = Stage::Queued;
        let mut seen = vec![stage];
        while stage != Stage::Done {
            stage = stage.next();
            seen.push(stage);
        }
        assert_eq!(seen, Stage::ALL);
        assert_eq!(Stage::Done.next(), Stage::Done);
    }

    #[test]
    fn stages_round_trip_through_their_stored_names() {
        for stage in Stage::ALL {
            assert_eq!(Stage::parse(stage.as_str()), Some(stage));
        }
        assert_eq!(Stage::parse("Nope"), None);
    }

    #[test]
    fn names_are_deterministic_and_valid_kubernetes_names() {
        let runtime_id = Uuid::parse_str("0190b8a6-7f3e-7c4a-9a41-3f2d3c1b2a10").unwrap();
        let names = RunNames::new(OperationType::Deprovision, runtime_id);
        assert_eq!(names, RunNames::new(OperationType::Deprovision, runtime_id));
        assert_eq!(names.job, format!("deprovision-{runtime_id}"));
        assert_eq!(names.outputs_secret, format!("provision-{runtime_id}-outputs"));
        for name in [&names.job, &names.config_map, &names.credentials_secret, &names.outputs_secret] {
            assert!(name.len() <= 63, "{name} is {} characters", name.len());
            assert!(name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-'));
        }
        assert_eq!(RunNames::new(OperationType::Provision, runtime_id).job, format!("provision-{runtime_id}"));
    }
}
