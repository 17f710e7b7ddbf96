//! The kubeconfig of a Runtime's cluster in a Secret of the object's namespace (`<name>-kubeconfig`, key
//! `kubeconfig`), owned by the Runtime so that it goes with it: `kubectl` users read it without calling the API.
//! A kubeconfig with a lifetime carries its expiry as an annotation; each reconcile writes the current one.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use runner_contract::job::{MANAGED_BY, MANAGED_BY_LABEL};
// The same key as in the runner's outputs Secret.
use runner_contract::manifest::KUBECONFIG_KEY;

use super::resource::{FIELD_MANAGER, RuntimeResource};
use crate::service::HandedOut;

/// The Secret of the Runtime named `name`.
fn secret_name(name: &str) -> String {
    format!("{name}-kubeconfig")
}

/// Until when the kubeconfig in the Secret signs in (RFC 3339), when it has a lifetime.
const EXPIRES_AT: &str = "provisioner.kubeopera.io/expires-at";

/// Writes the kubeconfig into the Runtime's Secret (server-side apply: the same content writes nothing new) and
/// returns the Secret's name.
pub async fn publish_kubeconfig(
    client: &kube::Client,
    runtime: &RuntimeResource,
    handed_out: &HandedOut,
) -> Result<String, kube::Error> {
    let name = secret_name(&runtime.name_any());
    let kubeconfig = &handed_out.kubeconfig;
    let annotations =
        (handed_out.expires_at).map(|expires_at| BTreeMap::from([(EXPIRES_AT.to_owned(), expires_at.to_rfc3339())]));
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())])),
            owner_references: runtime.controller_owner_ref(&()).map(|owner| vec![owner]),
            annotations,
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
