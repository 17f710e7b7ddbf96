//! Publishes the kubeconfig and the inventory of the cluster's cloud resources to the outputs Secret with the
//! run's own narrow identity, which may update that one Secret and no other, and create none (RBAC cannot limit
//! `create` to a name): the worker creates it, empty, before the Job, and the runner overwrites its content in one
//! unconditional update (also what a retried run does).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use process_support::backoff::Backoff;
use runner_contract::inventory::RESOURCES_KEY;
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL, RUNTIME_LABEL};
use runner_contract::manifest::KUBECONFIG_KEY;
use uuid::Uuid;

use crate::{Error, Result};

const CALL_TIMEOUT: Duration = Duration::from_secs(20);
const ATTEMPTS: u32 = 5;

/// What an apply publishes: the cluster's kubeconfig and what its state holds in the cloud.
pub struct Outputs<'a> {
    pub kubeconfig: &'a str,
    pub resources: &'a [String],
}

#[tracing::instrument(target = "traces", name = "publish", skip_all)]
pub async fn publish_outputs(
    client: Client,
    namespace: &str,
    name: &str,
    runtime_id: Uuid,
    outputs: Outputs<'_>,
) -> Result<()> {
    let resources = serde_json::to_vec(outputs.resources).expect("a list of strings serializes");
    let secrets = Api::<Secret>::namespaced(client, namespace);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
                (RUNTIME_LABEL.to_owned(), runtime_id.to_string()),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([
            (KUBECONFIG_KEY.to_owned(), ByteString(outputs.kubeconfig.as_bytes().to_vec())),
            (RESOURCES_KEY.to_owned(), ByteString(resources)),
        ])),
        ..Secret::default()
    };
    let failure = |message: String| Error::Publish { secret: name.to_owned(), message };
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(8));
    let params = PostParams::default();
    loop {
        // Without a resourceVersion the update is unconditional: this run's kubeconfig wins.
        let attempt = secrets.replace(name, &params, &secret);
        let error = match tokio::time::timeout(CALL_TIMEOUT, attempt).await {
            Ok(Ok(_)) => {
                tracing::info!(secret = name, resources = outputs.resources.len(), "published the kubeconfig");
                return Ok(());
            }
            // Refusals (RBAC, validation) and a missing Secret will not change on a retry.
            Ok(Err(kube::Error::Api(status))) if (400..500).contains(&status.code) && status.code != 429 => {
                return Err(failure(refusal(status.code, &status.message)));
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {CALL_TIMEOUT:?}"),
        };
        if backoff.attempts() + 1 >= ATTEMPTS {
            return Err(failure(error));
        }
        let delay = backoff.next_delay();
        tracing::warn!(error, ?delay, "publishing the kubeconfig failed; retrying");
        tokio::time::sleep(delay).await;
    }
}

/// What a refusal of the update means for the run.
fn refusal(code: u16, message: &str) -> String {
    match code {
        404 => format!(
            "404 {message}: the worker creates the outputs Secret before the Job, and this run's identity may only \
             update it"
        ),
        403 => format!("403 {message}: this run's identity may update its runtime's outputs Secret and no other"),
        _ => format!("{code} {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_forbidden_secret_is_explained() {
        let missing = refusal(404, "secrets \"provision-x-outputs\" not found");
        assert!(missing.starts_with("404 secrets \"provision-x-outputs\" not found: the worker creates"), "{missing}");
        assert!(refusal(403, "forbidden").contains("may update its runtime's outputs Secret and no other"));
        assert_eq!(refusal(422, "invalid"), "422 invalid");
    }
}
