//! What both binaries of the provisioner (the service and terraform-runner) set up the same way: their logs and
//! traces, the one TLS crypto provider, the delays between retries of their outbound calls, and durations in their settings.
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod backoff;
pub mod logging;
pub mod traces;

use std::time::Duration;

/// Installs the one TLS crypto provider of the process (ring); call once before any TLS client is built.
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A duration setting such as `90m` or `1h30m`; zero is refused, since every duration setting is a wait or a
/// time limit. The message is for a person and says what to write instead.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    let parsed = humantime::parse_duration(text.trim())
        .map_err(|error| format!("invalid duration {text:?} ({error}); use for example 90m or 1h30m"))?;
    if parsed.is_zero() {
        return Err("must be longer than zero".to_owned());
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_positive_and_human() {
        assert_eq!(parse_positive_duration(" 1h30m "), Ok(Duration::from_secs(90 * 60)));
        assert_eq!(parse_positive_duration("0s"), Err("must be longer than zero".to_owned()));
        let error = parse_positive_duration("soon").unwrap_err();
        assert!(error.starts_with("invalid duration \"soon\""), "{error}");
    }
}
