//! Looking after the fleet once its runtimes are Ready: background work that runs where the worker runs, on a
//! budget, through the service's use cases.

mod certificate_watch;

pub use certificate_watch::{CertificateWatch, CertificateWatchSettings};
