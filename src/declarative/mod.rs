//! Runtimes declared as Kubernetes objects: the `Runtime` custom resource and its definition. An adapter beside
//! the APIs: it drives the same service use cases and never touches the store.

pub mod convert;
pub mod crd;
pub mod events;
pub mod kubeconfig_secret;
pub mod leadership;
mod operation_feed;
pub mod reconciler;
pub mod reference;
pub mod resource;
pub mod status;
