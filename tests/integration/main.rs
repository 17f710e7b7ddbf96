//! The integration tests, in one binary: one link instead of one per file, and one test control plane (started
//! on first use) for all of them. Each module is one concern; its doc comment says which. Shared helpers live in
//! the `test-support` crate. `tests/hygiene.rs` is a binary of its own because it captures every log line of its
//! process.

mod api;
mod auth_client;
mod authn;
mod cancel;
mod change_detection;
mod chart;
mod cloud_failures;
mod database_connections;
mod day_two;
mod declarative;
mod deletion_protection;
mod docs;
mod end_to_end;
mod engine;
mod events;
mod forced_deletion;
mod fuzz_api;
mod gcp_smoke;
mod generated;
mod history;
mod limits;
mod manifests;
mod modules;
mod moto_smoke;
mod on_call;
mod pipeline;
mod plan_approval;
mod playground;
mod providers;
mod provisionerctl;
mod query_plans;
mod real_node;
mod render;
mod retries;
mod retry_operation;
mod rolling_update;
mod runner;
mod runner_identity;
mod runtime_resource;
mod startup;
mod statement_counts;
mod tenants;
mod traces;
