//! The W3C trace context (`traceparent`) an operation keeps from the request that queued it, so that its runs,
//! whichever process claims them and however often, continue the caller's trace.

use std::fmt;

/// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, with non-zero ids (W3C Trace Context, version 00).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent(String);

impl TraceParent {
    pub fn parse(text: &str) -> Option<Self> {
        let hex = |part: &str, length: usize| part.len() == length && part.bytes().all(|byte| byte.is_ascii_hexdigit());
        let not_zero = |part: &str| part.bytes().any(|byte| byte != b'0');
        match text.split('-').collect::<Vec<_>>()[..] {
            ["00", trace_id, span_id, flags]
                if hex(trace_id, 32)
                    && hex(span_id, 16)
                    && hex(flags, 2)
                    && not_zero(trace_id)
                    && not_zero(span_id) =>
            {
                Some(TraceParent(text.to_ascii_lowercase()))
            }
            _ => None,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_version_00_context_is_kept() {
        let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(TraceParent::parse(valid).map(|parent| parent.to_string()).as_deref(), Some(valid));
        for invalid in [
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(invalid), None, "{invalid}");
        }
    }
}
