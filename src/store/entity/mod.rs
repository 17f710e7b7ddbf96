//! sea-orm entities, one per table of the migrations crate.

pub mod idempotency_key;
pub mod operation;
pub mod operation_log;
pub mod operation_stage;
pub mod runtime;
