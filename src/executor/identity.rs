//! The runner's identity, one per run (issue #52 item 5). RBAC cannot limit `create` to a name, and one
//! ServiceAccount shared by every Job let any runner pod create or overwrite any Secret of the Jobs' namespace:
//! other runs' outputs, the credentials Secrets. So each run gets a ServiceAccount named after its Job, a Role of
//! that name and the RoleBinding between them, and the Job's pod runs as that account. The Role grants what the
//! runner does with the API server and nothing more:
//!
//! - `update` of the runtime's outputs Secret alone (`resourceNames`), and only for an apply (a destroy or a plan
//!   publishes nothing). The worker creates that Secret, empty, before the Job; the runner replaces its content in
//!   one unconditional update (no `get`: it never reads it; no `patch`: it does not need it, and the worker, which
//!   may only grant what it holds, holds none).
//! - `get` of pods and `list` of Jobs in the namespace: a stale state lock is taken over only when its recorded
//!   holder pod no longer runs and its operation has no unfinished Job (`terraform-runner`'s `state_lock.rs`).
//!   Neither can be limited by name (the holder is only known at run time, a list has no name), and neither reads a
//!   Secret.
//!
//! The objects carry the run's labels, so `ensure` reuses them on a retry and replaces an earlier operation's; the
//! Job, once it exists, owns them, so the garbage collector removes them with it, and the run's Cleanup step deletes
//! them as soon as the run ends (the token of a finished pod is then worth nothing).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL, RUNTIME_LABEL};
use uuid::Uuid;

use super::{Error, Executor, Result, RunObject, RunRef, belongs_to, managed_by_us, metadata};
use crate::domain::RunAction;
use crate::domain::run::RunNames;

/// The ServiceAccount of the run's pod, its Role and RoleBinding: all named after the Job.
pub(super) fn identity_name(names: &RunNames) -> &str {
    &names.job
}

fn service_account(run: RunRef<'_>, annotations: &BTreeMap<String, String>) -> ServiceAccount {
    let mut metadata = metadata(identity_name(run.names), &run.labels());
    metadata.annotations = (!annotations.is_empty()).then(|| annotations.clone());
    ServiceAccount {
        metadata,
        // The Job projects the token into the runner container alone.
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

fn rule(group: &str, resource: &str, verb: &str, names: Option<&str>) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        verbs: vec![verb.to_owned()],
        resource_names: names.map(|name| vec![name.to_owned()]),
        ..PolicyRule::default()
    }
}

/// What the runner of `action` may do (see the module's documentation).
pub(super) fn role(action: RunAction, run: RunRef<'_>) -> Role {
    let publishes = action == RunAction::Apply;
    let outputs = publishes.then(|| rule("", "secrets", "update", Some(&run.names.outputs_secret)));
    let rules = outputs.into_iter().chain([rule("", "pods", "get", None), rule("batch", "jobs", "list", None)]);
    Role { metadata: metadata(identity_name(run.names), &run.labels()), rules: Some(rules.collect()) }
}

fn role_binding(run: RunRef<'_>, namespace: &str) -> RoleBinding {
    let name = identity_name(run.names);
    RoleBinding {
        metadata: metadata(name, &run.labels()),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: name.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: name.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

/// The labels of the outputs Secret: the runtime's, not the operation's, since every apply of the runtime
/// publishes into it (the runner writes the same ones).
fn outputs_labels(runtime_id: Uuid) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
        (RUNTIME_LABEL.to_owned(), runtime_id.to_string()),
    ])
}

impl Executor {
    /// The run's own identity (ServiceAccount, Role, RoleBinding) and, for an apply, the runtime's outputs Secret
    /// it may update, all before the Job: admission refuses a pod whose ServiceAccount does not exist yet, and the
    /// runner may not create a Secret. Each is reused when it exists (a retry, a restarted worker).
    pub async fn ensure_runner_identity(&self, action: RunAction, run: RunRef<'_>) -> Result<()> {
        if action == RunAction::Apply {
            self.ensure_outputs_secret(run).await?;
        }
        self.ensure(service_account(run, &self.settings.service_account_annotations), run.operation_id).await?;
        self.ensure(role(action, run), run.operation_id).await?;
        self.ensure(role_binding(run, &self.settings.namespace), run.operation_id).await?;
        Ok(())
    }

    /// The runtime's outputs Secret, created empty when it does not exist; one that exists is the runtime's (an
    /// earlier apply published into it) and is left as it is: it holds the kubeconfig the service serves.
    async fn ensure_outputs_secret(&self, run: RunRef<'_>) -> Result<()> {
        let name = &run.names.outputs_secret;
        let secret = Secret {
            metadata: metadata(name, &outputs_labels(run.runtime_id)),
            type_: Some("Opaque".to_owned()),
            ..Secret::default()
        };
        let api = self.api::<Secret>();
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
        let existing = api.get(name).await?;
        let runtime = existing.labels().get(RUNTIME_LABEL);
        if managed_by_us(existing.meta()) && runtime.is_some_and(|id| *id == run.runtime_id.to_string()) {
            return Ok(());
        }
        Err(Error::NotOurs { kind: "Secret", name: name.clone() })
    }

    /// Deletes the run's identity, binding first, once the run has ended (its pods are done, or stopped): only the
    /// objects of this operation, so a later operation's identity of the same name is never touched. Absent ones
    /// are fine (the garbage collector, a Job of the previous release, a Cleanup that runs again).
    pub async fn delete_runner_identity(&self, names: &RunNames, operation_id: Uuid) -> Result<()> {
        let name = identity_name(names);
        self.delete_if_of::<RoleBinding>(name, operation_id).await?;
        self.delete_if_of::<Role>(name, operation_id).await?;
        self.delete_if_of::<ServiceAccount>(name, operation_id).await
    }

    async fn delete_if_of<K: RunObject>(&self, name: &str, operation_id: Uuid) -> Result<()> {
        let api = self.api::<K>();
        let Some(object) = api.get_opt(name).await? else { return Ok(()) };
        if !belongs_to(object.meta(), operation_id) {
            return Ok(());
        }
        // The uid as a precondition: an object of the same name created since is not this one.
        let preconditions = Preconditions { uid: object.uid(), resource_version: None };
        let params = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
        match api.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OperationType;

    fn run(names: &RunNames) -> RunRef<'_> {
        RunRef { names, runtime_id: Uuid::now_v7(), operation_id: Uuid::now_v7() }
    }

    fn verbs(role: &Role) -> Vec<(String, String, String, Option<Vec<String>>)> {
        role.rules
            .iter()
            .flatten()
            .flat_map(|rule| {
                let (groups, resources) = (rule.api_groups.clone().unwrap(), rule.resources.clone().unwrap());
                let names = rule.resource_names.clone();
                rule.verbs.iter().map(move |verb| (groups.join(","), resources.join(","), verb.clone(), names.clone()))
            })
            .collect()
    }

    /// An apply may update its runtime's outputs Secret and nothing else of Secrets; a destroy or a plan no Secret.
    #[test]
    fn the_role_names_the_outputs_secret_and_grants_only_what_the_runner_does() {
        let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
        let run = run(&names);
        let lookups = [
            (String::new(), "pods".to_owned(), "get".to_owned(), None),
            ("batch".to_owned(), "jobs".to_owned(), "list".to_owned(), None),
        ];
        let apply = role(RunAction::Apply, run);
        let outputs =
            (String::new(), "secrets".to_owned(), "update".to_owned(), Some(vec![names.outputs_secret.clone()]));
        let expected: Vec<_> = std::iter::once(outputs).chain(lookups.clone()).collect();
        assert_eq!(verbs(&apply), expected);
        for action in [RunAction::Destroy, RunAction::Plan] {
            assert_eq!(verbs(&role(action, run)), lookups, "{action:?}");
        }
        assert_eq!(apply.metadata.name.as_deref(), Some(names.job.as_str()));
        assert_eq!(
            apply.metadata.labels.as_ref().unwrap()[runner_contract::job::OPERATION_LABEL],
            run.operation_id.to_string()
        );
    }

    #[test]
    fn the_binding_gives_the_role_to_the_runs_service_account_alone() {
        let names = RunNames::new(OperationType::Upgrade, Uuid::now_v7());
        let run = run(&names);
        let binding = role_binding(run, "jobs");
        assert_eq!(binding.role_ref.name, names.job);
        assert_eq!(binding.role_ref.kind, "Role");
        let subjects = binding.subjects.unwrap();
        assert_eq!(subjects.len(), 1);
        assert_eq!((subjects[0].kind.as_str(), subjects[0].name.as_str()), ("ServiceAccount", names.job.as_str()));
        assert_eq!(subjects[0].namespace.as_deref(), Some("jobs"));
        assert_eq!(service_account(run, &BTreeMap::new()).metadata.name.as_deref(), Some(names.job.as_str()));
    }

    /// A key-less cloud identity (IRSA, GKE Workload Identity) is an annotation of the run's ServiceAccount.
    #[test]
    fn the_runs_service_account_carries_the_configured_annotations() {
        let names = RunNames::new(OperationType::Provision, Uuid::now_v7());
        assert_eq!(service_account(run(&names), &BTreeMap::new()).metadata.annotations, None);
        let irsa = BTreeMap::from([("eks.amazonaws.com/role-arn".to_owned(), "arn:aws:iam::1:role/run".to_owned())]);
        let account = service_account(run(&names), &irsa);
        assert_eq!(account.metadata.annotations, Some(irsa));
    }
}
