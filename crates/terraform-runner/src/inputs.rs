//! What a run reads and prepares before Terraform starts: `runner.json`, the mounted credentials, the provider
//! lock file and the work folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use runner_contract::credential::CloudCredential;
use runner_contract::manifest::{MAIN_TF_FILE, RUNNER_MANIFEST_FILE, RunnerManifest};
use runner_contract::providers::{LOCK_FILE, ProviderVersion};
use secrecy::SecretString;

use crate::{Error, Result};

pub(crate) fn read_manifest(config_dir: &Path) -> Result<RunnerManifest> {
    let path = config_dir.join(RUNNER_MANIFEST_FILE);
    let text =
        std::fs::read_to_string(&path).map_err(|error| Error::Input(format!("reading {}: {error}", path.display())))?;
    serde_json::from_str(&text).map_err(|error| Error::Input(format!("{}: {error}", path.display())))
}

/// Every file of the mounted Secret (Kubernetes adds `..data` links and hidden folders, which are skipped).
pub(crate) fn read_credential(dir: &Path) -> Result<CloudCredential> {
    let unreadable =
        |error: std::io::Error| Error::Input(format!("reading the credentials in {}: {error}", dir.display()));
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_file() {
            continue;
        }
        let value = std::fs::read_to_string(entry.path()).map_err(unreadable)?;
        files.insert(name, SecretString::from(value));
    }
    let credential = CloudCredential::from_secret_files(&files)
        .map_err(|error| Error::Input(format!("credentials in {}: {error}", dir.display())))?;
    // The service checked them too; the files are checked again before anything is written from them.
    credential.check().map_err(|invalid| Error::Input(format!("credentials in {}: {invalid}", dir.display())))?;
    Ok(credential)
}

/// Swaps the configuration's backend for local state; written only for a dry run of a cluster without state.
const DRY_RUN_BACKEND_OVERRIDE: &str = "dry_run_backend_override.tf";

/// An override file (Terraform merges `*_override.tf` last) that swaps the configuration's backend for local
/// state in the work folder: a dry run of a new cluster plans without creating its state bucket.
pub(crate) fn plan_without_backend(work_dir: &Path) -> Result<()> {
    let override_file = work_dir.join(DRY_RUN_BACKEND_OVERRIDE);
    std::fs::write(&override_file, "terraform {\n  backend \"local\" {}\n}\n")
        .map_err(|error| Error::Input(format!("writing {}: {error}", override_file.display())))
}

/// Puts the image's lock file for the run's provider version where `init` reads it. A run of a version the image
/// does not carry fails here, naming it, before Terraform starts.
pub(crate) fn install_lock_file(lock_dir: &Path, provider: &ProviderVersion, work_dir: &Path) -> Result<()> {
    if !provider.is_exact() {
        return Err(Error::Input(format!("runner.json names provider {provider}, which is not an exact version")));
    }
    let lock_file = lock_dir.join(provider.lock_file_name());
    if !lock_file.is_file() {
        return Err(Error::Input(format!(
            "this image carries no provider {provider} (no {}); run the operation with an image that has it",
            lock_file.display()
        )));
    }
    std::fs::copy(&lock_file, work_dir.join(LOCK_FILE))
        .map_err(|error| Error::Input(format!("copying {} into the work folder: {error}", lock_file.display())))?;
    Ok(())
}

/// Copies `main.tf` into the writable work folder (Terraform writes `.terraform` next to it) and makes a
/// temporary folder there for Terraform's temporary files, since the root filesystem (and so `/tmp`) is read-only.
/// A folder left by an earlier attempt of the same run is reused. Returns the temporary folder.
pub(crate) fn prepare_work_dir(config_dir: &Path, work_dir: &Path) -> Result<PathBuf> {
    let failed = |error: std::io::Error| Error::Input(format!("preparing {}: {error}", work_dir.display()));
    let temporary = work_dir.join(".tmp");
    std::fs::create_dir_all(&temporary).map_err(failed)?;
    std::fs::copy(config_dir.join(MAIN_TF_FILE), work_dir.join(MAIN_TF_FILE)).map_err(failed)?;
    // An earlier attempt's dry run must not send this run's state elsewhere.
    match std::fs::remove_file(work_dir.join(DRY_RUN_BACKEND_OVERRIDE)) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(failed(error)),
        _ => {}
    }
    Ok(temporary)
}
