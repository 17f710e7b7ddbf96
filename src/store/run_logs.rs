//! The run-log archive: each container's log of a run, gzip-compressed, read back within a byte budget.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use super::convert::corrupt;
use super::entity::operation_log;
use super::{Error, Result, Store, now};
use crate::domain::run_log::{KeptLog, LogBudget};

/// One container's log of a run as it is archived: gzip-compressed.
#[derive(Debug, Clone)]
pub struct ArchivedLog {
    operation_id: Uuid,
    container: String,
    content: Vec<u8>,
    printed_bytes: usize,
}

impl ArchivedLog {
    /// The log, its size taken from `budget` before it is decompressed ([`Error::OverBudget`] when too little is
    /// left); decompression never goes past it.
    pub fn unpack(&self, budget: &LogBudget) -> Result<KeptLog> {
        let damaged = |problem: String| {
            Error::Corrupt(format!("the archived {} log of operation {}: {problem}", self.container, self.operation_id))
        };
        let size = gzip_size(&self.content).ok_or_else(|| damaged("no gzip trailer".to_owned()))?;
        if !budget.spend(size) {
            return Err(Error::OverBudget { max_bytes: budget.total() });
        }
        let text = gunzip(&self.content, size)
            .map_err(|error| damaged(error.to_string()))?
            .ok_or_else(|| damaged(format!("longer than the {size} bytes its trailer says")))?;
        Ok(KeptLog { text, printed_bytes: self.printed_bytes, container: self.container.clone() })
    }
}

impl Store {
    /// Keeps a run's logs, gzip-compressed. The first archive of an operation stays: a clean-up step that runs
    /// again after a restart (when the pod may be gone) adds nothing.
    pub async fn archive_run_logs(&self, operation_id: Uuid, logs: &[KeptLog]) -> Result<()> {
        let archived_at = now();
        let rows: Vec<_> = logs
            .iter()
            .map(|log| operation_log::ActiveModel {
                operation_id: sea_orm::Set(operation_id),
                container: sea_orm::Set(log.container.clone()),
                content: sea_orm::Set(gzip(&log.text)),
                printed_bytes: sea_orm::Set(log.printed_bytes as i64),
                archived_at: sea_orm::Set(archived_at),
            })
            .collect();
        if rows.is_empty() {
            return Ok(());
        }
        operation_log::Entity::insert_many(rows).on_conflict_do_nothing().exec(&self.db).await?;
        Ok(())
    }

    /// Whether the operation's log of `container` (as a run archives it) is archived.
    pub async fn run_log_archived(&self, operation_id: Uuid, container: &str) -> Result<bool> {
        let count = operation_log::Entity::find()
            .filter(operation_log::Column::OperationId.eq(operation_id))
            .filter(operation_log::Column::Container.eq(container))
            .count(&self.reads)
            .await?;
        Ok(count > 0)
    }

    /// The archived logs of each of `operation_ids` (left out when none were archived), by container in container
    /// order, still compressed ([`ArchivedLog::unpack`]), in one query.
    pub async fn archived_logs(&self, operation_ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<ArchivedLog>>> {
        if operation_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = operation_log::Entity::find()
            .filter(operation_log::Column::OperationId.is_in(operation_ids.iter().copied()))
            .order_by_asc(operation_log::Column::Container)
            .all(&self.reads)
            .await?;
        let mut archived: HashMap<Uuid, Vec<ArchivedLog>> = HashMap::new();
        for row in rows {
            let printed_bytes = usize::try_from(row.printed_bytes)
                .map_err(|_| corrupt("printed_bytes", &row.printed_bytes.to_string()))?;
            archived.entry(row.operation_id).or_default().push(ArchivedLog {
                operation_id: row.operation_id,
                container: row.container,
                content: row.content,
                printed_bytes,
            });
        }
        Ok(archived)
    }

    /// Deletes the logs archived before `cutoff` (the retention clean-up); returns how many container logs went.
    pub async fn delete_run_logs_archived_before(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        let deleted = operation_log::Entity::delete_many()
            .filter(operation_log::Column::ArchivedAt.lt(cutoff))
            .exec(&self.db)
            .await?;
        Ok(deleted.rows_affected)
    }
}

fn gzip(text: &str) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).and_then(|()| encoder.finish()).expect("compressing into memory cannot fail")
}

/// The size a gzip member says its content has (its trailer's ISIZE: the length modulo 2^32; kept logs are far
/// smaller), read without decompressing.
fn gzip_size(content: &[u8]) -> Option<usize> {
    let trailer: [u8; 4] = content.get(content.len().checked_sub(4)?..)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(trailer)).ok()
}

/// The decompressed text, or `None` when it is longer than `max_bytes` (it is not decompressed further).
fn gunzip(content: &[u8], max_bytes: usize) -> std::io::Result<Option<String>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::GzDecoder::new(content).take(limit).read_to_end(&mut bytes)?;
    if bytes.len() > max_bytes {
        return Ok(None);
    }
    String::from_utf8(bytes).map(Some).map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}
