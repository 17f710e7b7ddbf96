//! How far `make run` got building and starting the local cluster and cloud: it writes [`SetupProgress`] as JSON
//! to `APP_SETUP_PROGRESS_FILE`, and `/readyz` and `/healthz` show it while the file exists.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Larger files are not read: this one holds a few short fields.
const MAX_FILE_BYTES: u64 = 16 * 1024;

/// One report of the set-up's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetupProgress {
    /// What is being done, such as `building the Terraform provider hashicorp/aws`; after a failure, what failed.
    pub step: String,
    /// The step's number, from 1.
    pub step_number: usize,
    pub steps: usize,
    /// When the set-up began, in seconds since the Unix epoch.
    pub started_at: u64,
    /// How long the whole set-up is expected to take, in seconds: the sum of the steps' durations measured on this
    /// machine before, or on a fresh machine of the kind the project is tested on.
    pub estimated_seconds: u64,
    /// Whether the set-up stopped on an error; the service keeps serving, and operations wait in the queue.
    pub failed: bool,
    /// Seconds since `startedAt` when the report is read (the service sets it; the file need not have it).
    #[serde(default)]
    #[schema(required = true)]
    pub elapsed_seconds: u64,
}

/// The seconds since the Unix epoch.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// The report in `file`, with its elapsed time; none when there is no such file. A file that cannot be read or
/// parsed is logged and left out: the probes answer anyway.
pub async fn read(file: &Path) -> Option<SetupProgress> {
    match tokio::fs::metadata(file).await {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Ok(metadata) if metadata.len() > MAX_FILE_BYTES => {
            tracing::warn!(file = %file.display(), "the set-up progress file is larger than {MAX_FILE_BYTES} bytes");
            return None;
        }
        _ => {}
    }
    let parsed = tokio::fs::read(file)
        .await
        .map_err(|error| error.to_string())
        .and_then(|bytes| serde_json::from_slice::<SetupProgress>(&bytes).map_err(|error| error.to_string()));
    match parsed {
        Ok(mut progress) => {
            progress.elapsed_seconds = unix_seconds(SystemTime::now()).saturating_sub(progress.started_at);
            Some(progress)
        }
        Err(error) => {
            tracing::warn!(file = %file.display(), %error, "cannot read the set-up progress file");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_report_is_read_with_its_elapsed_time_and_a_missing_or_broken_file_is_none() {
        let folder = tempfile::tempdir().unwrap();
        let file = folder.path().join("setup.json");
        assert_eq!(read(&file).await, None);
        let started_at = unix_seconds(SystemTime::now()) - 90;
        let written = SetupProgress {
            step: "building OpenTofu".into(),
            step_number: 3,
            steps: 9,
            started_at,
            estimated_seconds: 2400,
            failed: false,
            elapsed_seconds: 0,
        };
        std::fs::write(&file, serde_json::to_vec(&written).unwrap()).unwrap();
        let progress = read(&file).await.unwrap();
        assert!((90..100).contains(&progress.elapsed_seconds), "{progress:?}");
        assert_eq!(SetupProgress { elapsed_seconds: 0, ..progress }, written);
        std::fs::write(&file, b"{\"step\": 3}").unwrap();
        assert_eq!(read(&file).await, None);
    }
}
