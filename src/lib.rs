//! The cluster provisioner: turns "create a cluster" requests into Kubernetes clusters and tears them down.
//!
//! Layers: [`api`] (GraphQL and REST adapters) calls [`service`] (use cases, validation), which works on
//! [`domain`] types and the [`store`] adapter. [`startup`] wires them; `main.rs` only calls it.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod api;
pub mod build_info;
pub mod credentials;
pub mod declarative;
pub mod domain;
pub mod executor;
pub mod fleet;
pub mod listener_tls;
pub mod render;
pub mod runtime_access;
pub mod service;
pub mod settings;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod worker;

/// Shared with terraform-runner: retry delays, and the one TLS crypto provider of the process.
pub use process_support::{backoff, install_crypto_provider};
