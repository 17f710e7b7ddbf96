//! The tracing subscriber of a process: JSON lines for log collectors or plain text for people.

use std::io::Write;
use std::sync::Arc;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            LogFormat::Json => "json",
            LogFormat::Text => "text",
        })
    }
}

/// What every log line passes through before it is written (the runner's redaction of credential values).
pub type LineFilter = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Installs the global subscriber. `level` is an env-filter directive such as `info` or `provisioner=debug`.
pub fn init_tracing(level: &str, format: LogFormat) {
    install(level, format, std::io::stdout);
}

/// [`init_tracing`] with every line passed through `filter` before it reaches standard output (the formatter
/// writes each event with one write, so `filter` sees whole lines).
pub fn init_tracing_filtered(level: &str, format: LogFormat, filter: LineFilter) {
    install(level, format, Filtered { inner: std::io::stdout, filter });
}

fn install<W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static>(level: &str, format: LogFormat, writer: W) {
    let env_filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal; `kubectl logs` and log collectors get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_target(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_writer(writer);
    // A second initialisation (tests start several apps in one process) keeps the first subscriber.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// A writer whose every write passes through the filter first.
struct Filtered<M> {
    inner: M,
    filter: LineFilter,
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Filtered<M> {
    type Writer = FilteredWrite<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        FilteredWrite { inner: self.inner.make_writer(), filter: self.filter.clone() }
    }
}

struct FilteredWrite<W> {
    inner: W,
    filter: LineFilter,
}

impl<W: Write> Write for FilteredWrite<W> {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        let filtered = (self.filter)(&String::from_utf8_lossy(buffer));
        self.inner.write_all(filtered.as_bytes())?;
        Ok(buffer.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buffer);
            Ok(buffer.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_event_passes_through_the_filter() {
        let captured = Captured::default();
        let sink = captured.clone();
        let filter: LineFilter = Arc::new(|line| line.replace("s3cr3t-value", "[REDACTED]"));
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(Filtered { inner: move || sink.clone(), filter })
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(bucket = "s3cr3t-value", "created the state bucket");
        });
        let written = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(written.contains("created the state bucket"), "{written}");
        assert!(written.contains("bucket=\"[REDACTED]\""), "{written}");
        assert!(!written.contains("s3cr3t-value"), "{written}");
    }
}
