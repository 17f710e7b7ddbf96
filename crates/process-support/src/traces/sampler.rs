//! `OTEL_TRACES_SAMPLER` and its argument, as the OpenTelemetry specification names them; an unknown name or a
//! ratio outside 0..=1 is refused, never replaced by a default.

use opentelemetry_sdk::trace::Sampler;

use super::{InvalidTraceVariable, variable};

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TraceSampler {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio(f64),
    /// The specification's default: follow the caller's decision, sample every trace this process starts.
    #[default]
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
    use super::*;

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
