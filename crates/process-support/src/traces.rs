//! Traces: OpenTelemetry spans exported over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (nothing is
//! built, exported or paid for when it is not), and the W3C `traceparent` that joins a caller's trace, a queued
//! operation and its Job's run into one trace.

mod exporter;
mod sampler;

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use reqwest::Url;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub(crate) use exporter::tracer_provider;
pub use sampler::TraceSampler;

/// The standard variables, as the OpenTelemetry SDKs of other languages read them.
pub mod variable {
    pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
    pub const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
    pub const SAMPLER: &str = "OTEL_TRACES_SAMPLER";
    pub const SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";
    /// The context a child process continues (the Job's runner), as `traceparent` is for HTTP.
    pub const TRACEPARENT: &str = "TRACEPARENT";
}

/// The target of spans that only traces show (the steps of a run, each Terraform command): log lines keep
/// naming the spans they named before. Written out as `"traces"` where a literal is needed (`#[instrument]`).
pub const SPAN_TARGET: &str = "traces";

/// A span that declares a field of this name (left empty, so that log lines do not show it) is logged but never
/// exported, and no span under it joins a trace through it: the service's `request` span, which starts before its
/// caller is authenticated (issue #52 item 5). Written out as `untraced = tracing::field::Empty` in the span.
pub const UNTRACED: &str = "untraced";

/// Whether traces see what `metadata` describes: every span but one that declares [`UNTRACED`], every event.
pub fn exported(metadata: &tracing::Metadata<'_>) -> bool {
    !(metadata.is_span() && metadata.fields().field(UNTRACED).is_some())
}

/// The layer that exports spans through `tracer`, all but the [`UNTRACED`] ones (a per-layer filter: log lines
/// still name those).
pub(crate) fn layer<S>(tracer: opentelemetry_sdk::trace::Tracer) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    use tracing_subscriber::Layer as _;
    tracing_opentelemetry::layer().with_tracer(tracer).with_filter(tracing_subscriber::filter::filter_fn(exported))
}

/// Where and what to export; built once from the process's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    /// The collector's base URL (spans go to `<endpoint>/v1/traces`); `None`: tracing is off.
    pub endpoint: Option<Url>,
    pub service_name: String,
    pub sampler: TraceSampler,
}

/// A trace variable with a value that cannot be used, named.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{variable}: {message}")]
pub struct InvalidTraceVariable {
    pub variable: &'static str,
    pub message: String,
}

impl TraceSettings {
    /// Tracing off.
    pub fn off(service_name: &str) -> Self {
        TraceSettings { endpoint: None, service_name: service_name.to_owned(), sampler: TraceSampler::default() }
    }

    /// From the standard variables' values (blank counts as unset); `default_service_name` when
    /// `OTEL_SERVICE_NAME` is unset.
    pub fn from_values(
        endpoint: Option<&str>,
        service_name: Option<&str>,
        default_service_name: &str,
        sampler: Option<&str>,
        sampler_arg: Option<&str>,
    ) -> Result<Self, InvalidTraceVariable> {
        let endpoint = given(endpoint)
            .map(|text| match Url::parse(text) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(url),
                Ok(_) => Err("must be an http:// or https:// URL".to_owned()),
                Err(error) => Err(format!("{text:?} is not a URL ({error})")),
            })
            .transpose()
            .map_err(|message| InvalidTraceVariable { variable: variable::ENDPOINT, message })?;
        let sampler = match given(sampler) {
            Some(name) => TraceSampler::parse(name, given(sampler_arg))?,
            None => TraceSampler::default(),
        };
        let service_name = given(service_name).unwrap_or(default_service_name).to_owned();
        Ok(TraceSettings { endpoint, service_name, sampler })
    }

    /// From a process's environment (the runner's way of reading its settings).
    pub fn from_environment(
        environment: &HashMap<String, String>,
        default_service_name: &str,
    ) -> Result<Self, InvalidTraceVariable> {
        let read = |name: &str| environment.get(name).map(String::as_str);
        Self::from_values(
            read(variable::ENDPOINT),
            read(variable::SERVICE_NAME),
            default_service_name,
            read(variable::SAMPLER),
            read(variable::SAMPLER_ARG),
        )
    }

    pub fn enabled(&self) -> bool {
        self.endpoint.is_some()
    }

    /// The variables that make a child process (`service_name`) export to the same collector with the same
    /// sampler and continue `traceparent`; none when tracing is off.
    pub fn child_environment(&self, service_name: &str, traceparent: Option<String>) -> Vec<(&'static str, String)> {
        let Some(endpoint) = &self.endpoint else { return Vec::new() };
        let mut variables = vec![
            (variable::ENDPOINT, endpoint.as_str().trim_end_matches('/').to_owned()),
            (variable::SERVICE_NAME, service_name.to_owned()),
            (variable::SAMPLER, self.sampler.as_str().to_owned()),
        ];
        variables.extend(self.sampler.arg().map(|arg| (variable::SAMPLER_ARG, arg)));
        variables.extend(traceparent.map(|traceparent| (variable::TRACEPARENT, traceparent)));
        variables
    }
}

/// A value that is set and not blank.
fn given(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|value| !value.is_empty())
}

/// The current span's context as a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`); `None` when tracing
/// is off or there is no span.
pub fn current_traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

/// Makes `span` (not yet entered) a child of the remote span `traceparent` names. A malformed value is ignored:
/// the span then starts a trace of its own, as it would without one. The parent's sampled flag is followed only
/// with a `parentbased_*` sampler (see [`TraceSampler`]); the span joins the parent's trace either way.
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let parent = TraceContextPropagator::new().extract(&carrier);
    if parent.span().span_context().is_valid() {
        // Only a span already started, or one no subscriber records, refuses a parent; neither loses anything.
        let _ = span.set_parent(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_is_off_without_an_endpoint_and_a_bad_value_is_named() {
        let off = TraceSettings::from_values(None, None, "provisioner", None, None).unwrap();
        assert_eq!(off, TraceSettings::off("provisioner"));
        assert!(off.child_environment("terraform-runner", Some("00-x".into())).is_empty());
        let error = TraceSettings::from_values(Some("collector:4318"), None, "p", None, None).unwrap_err();
        assert_eq!(error.variable, variable::ENDPOINT, "{error}");
        let error = TraceSettings::from_values(Some("ftp://collector"), None, "p", None, None).unwrap_err();
        assert_eq!(error.to_string(), "OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:// or https:// URL");
    }

    #[test]
    fn a_child_exports_where_its_parent_does_and_continues_its_trace() {
        let settings = TraceSettings::from_values(
            Some("http://collector:4318/"),
            Some("provisioner-eu"),
            "provisioner",
            Some("parentbased_traceidratio"),
            Some("0.25"),
        )
        .unwrap();
        assert_eq!(settings.service_name, "provisioner-eu");
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned();
        let variables: HashMap<_, _> =
            settings.child_environment("terraform-runner", Some(traceparent.clone())).into_iter().collect();
        assert_eq!(variables[variable::ENDPOINT], "http://collector:4318");
        assert_eq!(variables[variable::SERVICE_NAME], "terraform-runner");
        assert_eq!(variables[variable::SAMPLER], "parentbased_traceidratio");
        assert_eq!(variables[variable::SAMPLER_ARG], "0.25");
        assert_eq!(variables[variable::TRACEPARENT], traceparent);
        let child: HashMap<String, String> =
            variables.into_iter().map(|(name, value)| (name.to_owned(), value)).collect();
        let read = TraceSettings::from_environment(&child, "unused").unwrap();
        assert_eq!((read.endpoint, read.sampler), (settings.endpoint, settings.sampler));
    }

    #[test]
    fn unset_the_sampler_ignores_the_callers_decision_and_the_child_gets_it_too() {
        let settings =
            TraceSettings::from_values(Some("http://collector:4318"), None, "provisioner", None, None).unwrap();
        assert_eq!(settings.sampler, TraceSampler::AlwaysOn);
        let variables: HashMap<_, _> = settings.child_environment("terraform-runner", None).into_iter().collect();
        assert_eq!(variables[variable::SAMPLER], "always_on");
        assert!(!variables.contains_key(variable::SAMPLER_ARG));
        let configured =
            TraceSettings::from_values(Some("http://c:4318"), None, "p", Some("parentbased_always_on"), None).unwrap();
        assert_eq!(configured.sampler, TraceSampler::ParentBasedAlwaysOn);
    }

    const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    /// What `current_traceparent` says inside an untraced `request` span, and inside a span continuing
    /// `traceparent` under it (the service's server span), with `sampler` (no exporter: only the ids matter).
    fn traceparents_within(sampler: TraceSampler, traceparent: &str) -> (Option<String>, Option<String>) {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::layer::SubscriberExt as _;

        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().with_sampler(sampler.sdk()).build();
        // Log lines (nowhere) record every span, as the process's do.
        let lines = tracing_subscriber::fmt::layer().with_writer(std::io::sink);
        let subscriber = tracing_subscriber::registry().with(layer(provider.tracer("test"))).with(lines);
        tracing::subscriber::with_default(subscriber, || {
            let request =
                tracing::info_span!("request", route = "/api/v1/provisions", untraced = tracing::field::Empty);
            assert_eq!(request.metadata().map(exported), Some(false));
            continue_trace(&request, traceparent);
            request.in_scope(|| {
                let outside = current_traceparent();
                let server = tracing::info_span!(target: SPAN_TARGET, "request", otel.kind = "server");
                assert_eq!(server.metadata().map(exported), Some(true));
                continue_trace(&server, traceparent);
                (outside, server.in_scope(current_traceparent))
            })
        })
    }

    #[test]
    fn an_untraced_span_joins_no_trace_and_a_span_under_it_continues_the_caller_sampled_by_this_process() {
        let not_sampled = format!("00-{CALLER_TRACE}-00f067aa0ba902b7-00");
        let (outside, inside) = traceparents_within(TraceSampler::default(), &not_sampled);
        assert_eq!(outside, None, "the untraced span is in no trace");
        let inside = inside.expect("the server span is traced");
        assert!(inside.starts_with(&format!("00-{CALLER_TRACE}-")) && inside.ends_with("-01"), "{inside}");
        assert!(!inside.contains("00f067aa0ba902b7"), "a span of its own: {inside}");

        let (_, configured) = traceparents_within(TraceSampler::ParentBasedAlwaysOn, &not_sampled);
        let configured = configured.expect("the span still has the caller's context");
        assert!(configured.starts_with(&format!("00-{CALLER_TRACE}-")) && configured.ends_with("-00"), "{configured}");

        let (_, own) = traceparents_within(TraceSampler::default(), "not a traceparent");
        let own = own.expect("a trace of its own");
        assert!(!own.contains(CALLER_TRACE) && own.ends_with("-01"), "{own}");
    }
}
