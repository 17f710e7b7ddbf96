//! The statements of the two status reads, built once when the store connects: their SQL is the same for every
//! id, which is their only value, and building one with sea-query cost each read about as much CPU as decoding
//! its row.

use std::sync::Arc;

use sea_orm::{DbBackend, QueryTrait, Statement, Value};
use uuid::Uuid;

use super::{operations, runtimes};

#[derive(Debug, Clone)]
pub(super) struct Prepared {
    backend: DbBackend,
    runtime_record: Arc<str>,
    operation_with_stages: Arc<str>,
}

impl Prepared {
    pub(super) fn for_backend(backend: DbBackend) -> Self {
        Prepared {
            backend,
            runtime_record: runtimes::runtime_record_query(Uuid::nil()).build(backend).sql.into(),
            operation_with_stages: operations::operation_with_stages_query(Uuid::nil()).build(backend).sql.into(),
        }
    }

    /// [`runtimes::runtime_record_query`] for the runtime `id`.
    pub(super) fn runtime_record(&self, id: Uuid) -> Statement {
        self.with_id(&self.runtime_record, id)
    }

    /// [`operations::operation_with_stages_query`] for the operation `id`.
    pub(super) fn operation_with_stages(&self, id: Uuid) -> Statement {
        self.with_id(&self.operation_with_stages, id)
    }

    fn with_id(&self, sql: &str, id: Uuid) -> Statement {
        Statement::from_sql_and_values(self.backend, sql, [Value::from(id)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_statement_built_once_is_the_one_built_for_any_id_with_the_id_as_its_only_value() {
        for backend in [DbBackend::Postgres, DbBackend::Sqlite] {
            let prepared = Prepared::for_backend(backend);
            let id = Uuid::new_v4();
            let pairs = [
                (prepared.runtime_record(id), runtimes::runtime_record_query(id).build(backend)),
                (prepared.operation_with_stages(id), operations::operation_with_stages_query(id).build(backend)),
            ];
            for (prepared, built) in pairs {
                assert_eq!(prepared.sql, built.sql, "{backend:?}");
                assert_eq!(prepared.values, built.values, "{backend:?}");
                assert_eq!(built.values.expect("the id is bound").0, vec![Value::from(id)], "{backend:?}");
            }
        }
    }
}
