//! `OTEL_TRACES_SAMPLER` and its argument, as the OpenTelemetry specification names them; an unknown name or a
//! ratio outside 0..=1 is refused, never replaced by a default.

use opentelemetry_sdk::trace::Sampler;

use super::{InvalidTraceVariable, variable};

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TraceSampler {
    /// The default (not the specification's, `parentbased_always_on`): every span is sampled, whatever a caller's
    /// `traceparent` says (issue #52 item 5: a caller must not decide what this process records). A span still
    /// joins its parent's trace; only the decision is this process's own. The `parentbased_*` samplers are how an
    /// operator chooses to honour the caller's decision instead.
    #[default]
    AlwaysOn,
    AlwaysOff,
    /// A decision from the trace id alone: every span of one trace, in every process, gets the same one.
    TraceIdRatio(f64),
    /// Follow the caller's decision (its `traceparent`'s sampled flag), sample every trace this process starts.
    ParentBasedAlwaysOn,
    ParentBasedAlwaysOff,
    ParentBasedTraceIdRatio(f64),
}

impl TraceSampler {
    pub fn parse(name: &str, arg: Option<&str>) -> Result<Self, InvalidTraceVariable> {
        let ratio = || -> Result<f64, InvalidTraceVariable> {
            let text = arg.unwrap_or("1.0");
            match text.parse::<f64>() {
                Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
                _ => Err(InvalidTraceVariable {
                    variable: variable::SAMPLER_ARG,
                    message: format!("{text:?} is not a ratio between 0 and 1"),
                }),
            }
        };
        Ok(match name {
            "always_on" => TraceSampler::AlwaysOn,
            "always_off" => TraceSampler::AlwaysOff,
            "traceidratio" => TraceSampler::TraceIdRatio(ratio()?),
            "parentbased_always_on" => TraceSampler::ParentBasedAlwaysOn,
            "parentbased_always_off" => TraceSampler::ParentBasedAlwaysOff,
            "parentbased_traceidratio" => TraceSampler::ParentBasedTraceIdRatio(ratio()?),
            other => {
                return Err(InvalidTraceVariable {
                    variable: variable::SAMPLER,
                    message: format!(
                        "{other:?} is not one of always_on, always_off, traceidratio, parentbased_always_on, \
                         parentbased_always_off, parentbased_traceidratio"
                    ),
                });
            }
        })
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            TraceSampler::AlwaysOn => "always_on",
            TraceSampler::AlwaysOff => "always_off",
            TraceSampler::TraceIdRatio(_) => "traceidratio",
            TraceSampler::ParentBasedAlwaysOn => "parentbased_always_on",
            TraceSampler::ParentBasedAlwaysOff => "parentbased_always_off",
            TraceSampler::ParentBasedTraceIdRatio(_) => "parentbased_traceidratio",
        }
    }

    /// `OTEL_TRACES_SAMPLER_ARG`, for the samplers that take one.
    pub fn arg(&self) -> Option<String> {
        match self {
            TraceSampler::TraceIdRatio(ratio) | TraceSampler::ParentBasedTraceIdRatio(ratio) => Some(ratio.to_string()),
            _ => None,
        }
    }

    pub(super) fn sdk(&self) -> Sampler {
        match *self {
            TraceSampler::AlwaysOn => Sampler::AlwaysOn,
            TraceSampler::AlwaysOff => Sampler::AlwaysOff,
            TraceSampler::TraceIdRatio(ratio) => Sampler::TraceIdRatioBased(ratio),
            TraceSampler::ParentBasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            TraceSampler::ParentBasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
            TraceSampler::ParentBasedTraceIdRatio(ratio) => {
                Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::trace::{SamplingDecision, ShouldSample};

    use super::*;

    /// The decision `sampler` takes for a span whose parent is a caller's span, sampled or not.
    fn decision(sampler: TraceSampler, caller_sampled: bool) -> SamplingDecision {
        let trace_id = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        let flags = if caller_sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
        let span_id = SpanId::from_hex("00f067aa0ba902b7").unwrap();
        let caller = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
        let parent = opentelemetry::Context::new().with_remote_span_context(caller);
        sampler
            .sdk()
            .should_sample(Some(&parent), trace_id, "POST /api/v1/provisions", &SpanKind::Server, &[], &[])
            .decision
    }

    #[test]
    fn by_default_a_callers_sampled_flag_decides_nothing_unless_a_parent_based_sampler_is_configured() {
        assert_eq!(TraceSampler::default(), TraceSampler::AlwaysOn);
        for caller_sampled in [false, true] {
            assert_eq!(decision(TraceSampler::default(), caller_sampled), SamplingDecision::RecordAndSample);
            // A ratio depends on the trace id only: a trace is sampled whole, or not at all, whatever the caller says.
            let ratio = decision(TraceSampler::TraceIdRatio(0.5), caller_sampled);
            assert_eq!(ratio, decision(TraceSampler::TraceIdRatio(0.5), !caller_sampled));
        }
        // Configured, the caller's decision is followed.
        let configured = TraceSampler::parse("parentbased_always_on", None).unwrap();
        assert_eq!(decision(configured, false), SamplingDecision::Drop);
        assert_eq!(decision(configured, true), SamplingDecision::RecordAndSample);
    }

    #[test]
    fn the_specifications_names_are_read_and_anything_else_is_refused() {
        assert_eq!(TraceSampler::parse("always_off", None), Ok(TraceSampler::AlwaysOff));
        assert_eq!(TraceSampler::parse("traceidratio", Some("0.1")), Ok(TraceSampler::TraceIdRatio(0.1)));
        assert_eq!(TraceSampler::parse("traceidratio", None), Ok(TraceSampler::TraceIdRatio(1.0)));
        let error = TraceSampler::parse("parentbased_traceidratio", Some("2")).unwrap_err();
        assert_eq!(error.variable, variable::SAMPLER_ARG);
        let error = TraceSampler::parse("sometimes", None).unwrap_err();
        assert_eq!(error.variable, variable::SAMPLER);
        assert!(error.message.starts_with("\"sometimes\" is not one of"), "{error}");
    }
}
