//! sea-orm entities, one per table of the migrations crate that this release reads or writes (the global
//! `idempotency_key` table stays for the release before, see its successor `caller_idempotency_key`).

pub mod caller_idempotency_key;
pub mod operation;
pub mod operation_log;
pub mod operation_stage;
pub mod runtime;
