//! The kubeconfig of a Runtime's cluster in a Secret of the object's namespace (`<name>-kubeconfig`, key
//! `kubeconfig`), owned by the Runtime so that it goes with it: `kubectl` users read it without calling the API.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL};
// The same key as in the runner's outputs Secret.
use runner_contract::manifest::KUBECONFIG_KEY;

use super::resource::{FIELD_MANAGER, RuntimeResource};

/// The Secret of the Runtime named `name`.
fn secret_name(name: &str) -> String {
    format!("{name}-kubeconfig")
}

/// Writes `kubeconfig` into the Runtime's Secret (server-side apply: the same content writes nothing new) and
/// returns the Secret's name.
pub async fn publish_kubeconfig(
    client: &kube::Client,
    runtime: &RuntimeResource,
    kubeconfig: &str,
) -> Result<String, kube::Error> {
    let name = secret_name(&runtime.name_any());
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())])),
            owner_references: runtime.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(KUBECONFIG_KEY.to_owned(), ByteString(kubeconfig.as_bytes().to_vec()))])),
        ..Secret::default()
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &runtime.namespace().unwrap_or_default());
    secrets.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&secret)).await?;
    Ok(name)
}
