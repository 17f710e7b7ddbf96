//! The tracing subscriber of a process: JSON lines for log collectors or plain text for people, and its spans
//! exported when traces are on.

use std::fmt;
use std::io::Write;
use std::sync::Arc;

use opentelemetry::trace::{SpanId, TraceContextExt, TraceId};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use crate::traces::{SPAN_TARGET, TraceSettings, tracer_provider};

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

/// The process's traces, while they are exported; [`Tracing::shutdown`] sends what is still buffered.
#[must_use = "shut it down before the process exits, or the last spans are lost"]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Tracing {
    /// Sends the spans not yet exported and stops the exporter; waits at most the export timeout.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else { return };
        // The provider blocks until its batch thread is done, and that thread's request runs on this runtime.
        let ended = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(error)) = ended {
            eprintln!("exporting the last spans: {error}");
        }
    }
}

/// Installs the global subscriber: logs to standard output, each line through `filter` when given (the
/// formatter writes each event with one write, so it sees whole lines), and spans exported as `traces` say. `level`
/// is an env-filter directive such as `info` or `provisioner=debug`. With traces, every JSON line carries its
/// span's `trace_id` and `span_id`. Spans of target [`SPAN_TARGET`] are exported but not named in log lines;
/// spans that declare [`crate::traces::UNTRACED`] are named in log lines but not exported.
pub fn init_tracing(level: &str, format: LogFormat, traces: &TraceSettings, filter: Option<LineFilter>) -> Tracing {
    let writer = match filter {
        Some(filter) => BoxMakeWriter::new(Filtered { inner: std::io::stdout, filter }),
        None => BoxMakeWriter::new(std::io::stdout),
    };
    let (provider, tracer) = match traces.enabled().then(|| tracer_provider(traces)) {
        Some(Ok((provider, tracer))) => (Some(provider), Some(tracer)),
        Some(Err(error)) => {
            eprintln!("traces are not exported: {error}");
            (None, None)
        }
        None => (None, None),
    };
    let env_filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let spans = tracer.map(crate::traces::layer);
    // Colours only for a person at a terminal; `kubectl logs` and log collectors get plain text.
    let lines = tracing_subscriber::fmt::layer()
        .with_target(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_writer(writer);
    let json = || tracing_subscriber::fmt::format().json().flatten_event(true).with_current_span(true);
    let logged = filter_fn(|metadata| !(metadata.is_span() && metadata.target() == SPAN_TARGET));
    let registry = tracing_subscriber::registry().with(env_filter).with(spans);
    // A second initialisation (tests start several apps in one process) keeps the first subscriber.
    let _ = match (format, provider.is_some()) {
        (LogFormat::Json, true) => {
            registry.with(lines.json().event_format(WithTraceIds { inner: json() }).with_filter(logged)).try_init()
        }
        (LogFormat::Json, false) => registry.with(lines.json().event_format(json()).with_filter(logged)).try_init(),
        (LogFormat::Text, _) => registry.with(lines.with_filter(logged)).try_init(),
    };
    Tracing { provider }
}

/// A JSON line with `"trace_id"` and `"span_id"` first, those of the span the event happened in: the innermost
/// one the line names, or when that one is not exported (an untraced `request`), the current span (an exported
/// one, of target [`SPAN_TARGET`], within it).
struct WithTraceIds<F> {
    inner: F,
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
    N: for<'fields> FormatFields<'fields> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, context: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let named = context.lookup_current().and_then(|span| trace_ids(&span.id()));
        let Some((trace_id, span_id)) = named.or_else(|| context.current_span().id().and_then(trace_ids)) else {
            return self.inner.format_event(context, writer, event);
        };
        let mut line = String::new();
        self.inner.format_event(context, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\",{rest}"),
            None => writer.write_str(&line),
        }
    }
}

/// The trace and span ids of the span `id`, when it is recorded.
fn trace_ids(id: &tracing::span::Id) -> Option<(TraceId, SpanId)> {
    // The global dispatcher (the process's only one) is reachable while an event is being formatted.
    let context = tracing::dispatcher::get_default(|dispatch| tracing_opentelemetry::get_otel_context(id, dispatch))?;
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| (span_context.trace_id(), span_context.span_id()))
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
