//! What this build is: `provisioner --version`, `GET /version` and the metric `provisioner_build_info` say it.

/// The package version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from (`build.rs`: `PROVISIONER_COMMIT`, else the checkout's HEAD, else
/// `unknown`).
pub const COMMIT: &str = env!("PROVISIONER_COMMIT");
