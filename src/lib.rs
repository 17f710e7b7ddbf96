//! The cluster provisioner: turns "create a cluster" requests into Kubernetes clusters and tears them down.
//!
//! Layers: [`api`] (GraphQL and REST adapters) calls [`service`] (use cases, validation), which works on
//! [`domain`] types and the [`store`] adapter. [`startup`] wires them; `main.rs` only calls it.
#![deny(rust_2018_idioms)]

pub mod api;
pub mod auth;
pub mod backoff;
pub mod domain;
pub mod executor;
pub mod render;
pub mod runner;
pub mod service;
pub mod settings;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod token_review;
pub mod worker;

/// Installs the one TLS crypto provider of the process (ring); call once before any TLS client is built.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
