//! OpenTofu and the real Terraform providers for the tests: `tofu` (`TEST_TOFU_BIN`, tools/build-tofu.sh), and
//! hashicorp/aws and hashicorp/google built from the Go module proxy (tools/build-terraform-providers.sh), which
//! the CLI configuration in `TEST_TERRAFORM_PROVIDERS` installs from their filesystem mirror only (no registry).
//!
//! Lock files for the pinned versions are made by that script, against the test builds, once per machine (beside
//! that configuration, in `test-locks`; the image built here carries them). Their hashes differ from the releases' in the image's lock files (made at image build from the
//! mirrored release packages), so the two never mix: tests point `RUNNER_PROVIDER_LOCK_DIR` at these, and no
//! test lock file is ever committed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use provisioner::domain::{Cloud, ProviderVersion};

/// `TEST_TOFU_BIN`: the `tofu` binary; panics (the test fails, never skips) when it is missing.
pub fn tofu_bin() -> PathBuf {
    let tofu = std::env::var_os("TEST_TOFU_BIN").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TEST_TOFU_BIN is not set: build OpenTofu with `make tofu` (tools/build-tofu.sh) and set TEST_TOFU_BIN \
             to the `tofu` binary in the folder it prints (`make test-really-local` does both)"
        )
    });
    assert!(tofu.is_file(), "TEST_TOFU_BIN={} is not a file: build it with `make tofu`", tofu.display());
    tofu
}

/// The test builds of the providers: how tofu installs them, and their lock files.
pub struct TestProviders {
    /// A tofu CLI configuration (`TF_CLI_CONFIG_FILE`) whose only installation method is the mirror.
    pub cli_config: PathBuf,
    /// One lock file per pinned provider, named as the runner looks them up (`ProviderVersion::lock_file_name`).
    pub lock_dir: PathBuf,
}

/// The providers of `TEST_TERRAFORM_PROVIDERS`, with lock files for this release's pins.
pub fn test_providers() -> &'static TestProviders {
    static PROVIDERS: OnceLock<TestProviders> = OnceLock::new();
    PROVIDERS.get_or_init(|| {
        let cli_config = std::env::var_os("TEST_TERRAFORM_PROVIDERS").map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "TEST_TERRAFORM_PROVIDERS is not set: run `make terraform-providers` (tools/build-terraform-providers.sh \
                 builds hashicorp/aws and hashicorp/google and prints their tofu configuration) and set it to that \
                 file, or run `make test-really-local`, which does both"
            )
        });
        assert!(cli_config.is_file(), "TEST_TERRAFORM_PROVIDERS={} does not exist", cli_config.display());
        let lock_dir = cli_config.with_file_name("test-locks");
        for cloud in [Cloud::Aws, Cloud::Gcp] {
            let lock_file = lock_dir.join(ProviderVersion::pinned(cloud).lock_file_name());
            assert!(
                lock_file.is_file(),
                "{} is missing: run `make terraform-providers` (tools/build-terraform-providers.sh writes it)",
                lock_file.display()
            );
        }
        TestProviders { cli_config, lock_dir }
    })
}

impl TestProviders {
    /// Copies the lock file of `provider` into the configuration folder `dir`, as the runner does.
    pub fn install_lock_file(&self, provider: &ProviderVersion, dir: &Path) {
        std::fs::copy(self.lock_dir.join(provider.lock_file_name()), dir.join(".terraform.lock.hcl"))
            .expect("copy the test lock file");
    }
}

/// A `terraform` block requiring exactly `provider`, as the rendered configurations do: with the lock file of
/// the runner's, `init -lockfile=readonly` installs it (and fails for a configuration that requires none).
pub fn required_providers(provider: &ProviderVersion) -> String {
    format!(
        "terraform {{\n  required_providers {{\n    {} = {{\n      source  = \"{}\"\n      version = \"{}\"\n    }}\n  }}\n}}\n",
        provider.name(),
        provider.source,
        provider.version
    )
}
