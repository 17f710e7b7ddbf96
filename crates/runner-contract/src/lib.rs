//! The contract between the provisioner (the service, which writes a run's ConfigMap and credentials Secret and
//! creates its Job) and terraform-runner (the Job's main container, which reads them). Each side's half used to
//! be spelled out on its own; everything both must agree on is defined here once:
//!
//! - [`environment`]: the Job's mount paths and the environment variables that tell the runner where they are;
//! - [`manifest`]: the ConfigMap's files, `runner.json` ([`manifest::RunnerManifest`]) and the action;
//! - [`credential`]: the credential and the files of the credentials Secret that carry it;
//! - [`credential_check`]: the format of every credential value, checked before it is written anywhere;
//! - [`job`]: labels, the runner's binary, the grace period and the state-lock wait;
//! - [`modules`]: the pinned modules repository the init container clones and checks;
//! - [`inventory`]: the cloud resources an apply left, published beside the kubeconfig;
//! - [`kubeconfig`]: how a kubeconfig is written, by the runner that publishes it and by the service;
//! - [`plan`]: what a run's plan changes, and the exit code of a refused destructive plan;
//! - [`failure`]: the classes of a cloud's error answers, and what a run that failed on one reports;
//! - [`approval`]: which plans wait for a person's approval, and where a waiting plan is kept;
//! - [`assess`]: how a saved plan is read into that summary, each change with its risk;
//! - [`providers`]: the provider versions a run installs, and where the image keeps their lock files;
//! - [`report`]: what a successful run reports, with the digest that gives the outputs Secret its provenance;
//! - [`redact`]: how credential values are kept out of messages, and how long a failure message may be;
//! - [`Topology`] and [`Cloud`], which `runner.json` names.
//!
//! No Kubernetes or HTTP here, so that both binaries can depend on it. The service enables the `graphql` and
//! `openapi` features for the derives its APIs need on [`Topology`].
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod administrators;
pub mod approval;
pub mod assess;
pub mod credential;
pub mod credential_check;
pub mod environment;
pub mod failure;
pub mod inventory;
pub mod job;
pub mod kubeconfig;
pub mod manifest;
pub mod modules;
pub mod plan;
pub mod providers;
pub mod redact;
pub mod report;
mod topology;

pub use topology::{Cloud, Topology};
