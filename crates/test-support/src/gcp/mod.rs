//! A local Google Cloud for the tests:
//!   - [`FakeGcs`]: fake-gcs-server (the GCS JSON API, in memory), built by `make fake-gcs`
//!     (tools/build-fake-gcs.sh) and named in `TEST_FAKE_GCS_BIN`, behind a small recording proxy so tests can
//!     check what the code under test sent (methods, paths, `Authorization`);
//!   - [`ServiceAccountKey`]: a service-account JSON key file with a real RSA-2048 key, generated once per test
//!     binary with the Python `cryptography` package of the venv that `make test-tools` installs
//!     (`TEST_AWS_TOOLS_BIN_DIR`; moto depends on it);
//!   - [`GoogleTokenServer`]: Google's OAuth 2.0 token endpoint for service accounts (the JWT-bearer grant), which
//!     verifies the signed assertion like Google does and hands out access tokens.
//!
//! One server per test: each starts in well under a second, and tests never see each other's buckets.
//!
//! What fake-gcs-server (v1.56.1) does differently from real GCS, for assertions:
//!   - creating a bucket keeps only `name`, `versioning` and `defaultEventBasedHold`; `iamConfiguration`,
//!     `labels`, `location` (always the server-wide `-location`, `US-CENTRAL1`) and the rest are dropped, and
//!     `PATCH` only changes `versioning` (`metageneration` stays "1");
//!   - deleting a bucket that still has objects (live or noncurrent) answers 412 `conditionNotMet`, not 409;
//!   - successful deletes answer 200 with the body `null`, not 204; an empty listing has no `items` key;
//!   - it ignores `Authorization` entirely (see [`FakeGcs::requests`]) and the `fields` parameter.

mod fake_gcs;
mod service_account;
mod token_server;

pub use fake_gcs::{FakeGcs, GcsRequest, fake_gcs_bin};
pub use service_account::{ServiceAccountKey, TestKeyPair, sign_rs256, test_key_pair};
pub use token_server::GoogleTokenServer;

/// The project and service account of [`ServiceAccountKey`].
pub const PROJECT_ID: &str = "kubeopera-test";
pub const CLIENT_EMAIL: &str = "runner@kubeopera-test.iam.gserviceaccount.com";
/// The grant type of a service account's token request.
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The scopes [`GoogleTokenServer`] accepts (either one).
pub const SCOPE_DEVSTORAGE_READ_WRITE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
pub const SCOPE_CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
