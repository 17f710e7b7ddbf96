//! The tracing subscriber of a process: JSON lines for log collectors or plain text for people.

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

/// Installs the global subscriber. `level` is an env-filter directive such as `info` or `provisioner=debug`.
pub fn init_tracing(level: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal; `kubectl logs` and log collectors get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    // A second initialisation (tests start several apps in one process) keeps the first subscriber.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
