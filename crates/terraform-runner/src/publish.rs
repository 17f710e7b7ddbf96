//! Publishes the kubeconfig and the inventory of the cluster's cloud resources to the outputs Secret with the
//! runner's own narrow identity, which may only create and update Secrets: create, and when it exists already (a
//! retried run), overwrite it.

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
    loop {
        let attempt = async {
            match secrets.create(&PostParams::default(), &secret).await {
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    // Without a resourceVersion the update is unconditional: this run's kubeconfig wins.
                    secrets.replace(name, &PostParams::default(), &secret).await.map(drop)
                }
                result => result.map(drop),
            }
        };
        let error = match tokio::time::timeout(CALL_TIMEOUT, attempt).await {
            Ok(Ok(())) => {
                tracing::info!(secret = name, resources = outputs.resources.len(), "published the kubeconfig");
                return Ok(());
            }
            // Refusals (RBAC, validation) will not change on a retry.
            Ok(Err(kube::Error::Api(status))) if (400..500).contains(&status.code) && status.code != 429 => {
                return Err(failure(format!("{} {}", status.code, status.message)));
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
