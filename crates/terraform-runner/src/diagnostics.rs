//! Terraform's machine-readable output (`-json`): each line turned back into the text people read in the run's
//! log, and its error diagnostics kept, so that a failure names the cloud's answer, its class and the resource.

use runner_contract::failure::{CloudFailure, CloudFailureClass};
use runner_contract::redact::Redactor;
use serde::Deserialize;

/// An error Terraform reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub summary: String,
    pub detail: String,
    /// The resource it is about, when Terraform names one.
    pub address: Option<String>,
}

impl Diagnostic {
    /// With every credential value replaced, also one split across the lines of its detail.
    pub fn redacted(self, redactor: &Redactor) -> Self {
        Diagnostic { summary: redactor.redact(&self.summary), detail: redactor.redact(&self.detail), ..self }
    }

    fn class(&self) -> CloudFailureClass {
        CloudFailureClass::classify(&format!("{}\n{}", self.summary, self.detail))
    }
}

#[derive(Deserialize)]
struct UiMessage {
    #[serde(rename = "@message")]
    message: String,
    #[serde(default)]
    diagnostic: Option<UiDiagnostic>,
}

#[derive(Deserialize)]
struct UiDiagnostic {
    severity: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    address: Option<String>,
}

/// One line of output: the text to log for it (a line that is not a JSON message is logged as it is) and the
/// error it reports.
pub fn read_line(line: &str) -> (String, Option<Diagnostic>) {
    let Some(message) = line.starts_with('{').then(|| serde_json::from_str::<UiMessage>(line).ok()).flatten() else {
        return (line.to_owned(), None);
    };
    let Some(diagnostic) = message.diagnostic else { return (message.message, None) };
    let mut text = message.message;
    if !diagnostic.detail.is_empty() {
        text = format!("{text}\n  {}", diagnostic.detail.replace('\n', "\n  "));
    }
    if let Some(address) = &diagnostic.address {
        text = format!("{text}\n  with {address}");
    }
    let error = (diagnostic.severity == "error").then_some(Diagnostic {
        summary: diagnostic.summary,
        detail: diagnostic.detail,
        address: diagnostic.address,
    });
    (text, error)
}

/// The cloud failure behind `errors`, when the cloud's answer is recognised: transient only when every error is
/// (a retry would not fix the others), else the first error of a class a person can act on.
pub fn cloud_failure(errors: &[Diagnostic]) -> Option<CloudFailure> {
    let classes: Vec<CloudFailureClass> = errors.iter().map(Diagnostic::class).collect();
    let chosen = if !classes.is_empty() && classes.iter().all(|class| class.is_transient()) {
        0
    } else {
        classes.iter().position(|class| class.needs_a_person())?
    };
    Some(CloudFailure { class: classes[chosen], address: errors[chosen].address.clone() })
}

/// The errors in one line each: `summary: detail (at address)`.
pub fn describe(errors: &[Diagnostic]) -> String {
    errors
        .iter()
        .map(|error| {
            let mut text = format!("Error: {}", error.summary);
            if !error.detail.is_empty() {
                text = format!("{text}: {}", error.detail.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            match &error.address {
                Some(address) => format!("{text} (at {address})"),
                None => text,
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const VPC_QUOTA: &str = r#"{"@level":"error","@message":"Error: creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 400, RequestID: 1, api error VpcLimitExceeded: The maximum number of VPCs has been reached.","@module":"tofu.ui","diagnostic":{"severity":"error","summary":"creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 400, RequestID: 1, api error VpcLimitExceeded: The maximum number of VPCs has been reached.","detail":"","address":"module.vpc.aws_vpc.this"},"type":"diagnostic"}"#;

    fn throttled(address: &str) -> Diagnostic {
        Diagnostic {
            summary: "creating EC2 Subnet: operation error EC2: CreateSubnet, https response error StatusCode: 503, \
                      RequestID: 2, api error RequestLimitExceeded: Request limit exceeded."
                .to_owned(),
            detail: String::new(),
            address: Some(address.to_owned()),
        }
    }

    #[test]
    fn a_json_line_is_logged_as_its_message_and_an_error_is_kept() {
        let (text, error) = read_line(VPC_QUOTA);
        assert!(text.starts_with("Error: creating EC2 VPC"), "{text}");
        assert!(text.ends_with("\n  with module.vpc.aws_vpc.this"), "{text}");
        let error = error.unwrap();
        assert_eq!(error.address.as_deref(), Some("module.vpc.aws_vpc.this"));
        let progress = r#"{"@level":"info","@message":"module.vpc.aws_vpc.this: Creating...","type":"apply_start"}"#;
        assert_eq!(read_line(progress), ("module.vpc.aws_vpc.this: Creating...".to_owned(), None));
        assert_eq!(read_line("Warning: plain text"), ("Warning: plain text".to_owned(), None));
        let warning = r#"{"@message":"Warning: deprecated","diagnostic":{"severity":"warning","summary":"deprecated","detail":"use x\ninstead"},"type":"diagnostic"}"#;
        assert_eq!(read_line(warning), ("Warning: deprecated\n  use x\n  instead".to_owned(), None));
    }

    #[test]
    fn the_failure_is_transient_only_when_every_error_is() {
        let quota = read_line(VPC_QUOTA).1.unwrap();
        let all_throttled = [throttled("a"), throttled("b")];
        let failure = cloud_failure(&all_throttled).unwrap();
        assert_eq!((failure.class, failure.address.as_deref()), (CloudFailureClass::RateLimited, Some("a")));
        let mixed = [throttled("a"), quota.clone()];
        let failure = cloud_failure(&mixed).unwrap();
        assert_eq!(failure.class, CloudFailureClass::QuotaExceeded);
        assert_eq!(failure.address.as_deref(), Some("module.vpc.aws_vpc.this"));
        let unknown = Diagnostic { summary: "Unsupported argument".to_owned(), detail: String::new(), address: None };
        assert_eq!(cloud_failure(&[unknown]), None);
        assert_eq!(cloud_failure(&[]), None);
    }

    #[test]
    fn errors_are_described_in_one_line() {
        let quota = read_line(VPC_QUOTA).1.unwrap();
        let other = Diagnostic { summary: "s".to_owned(), detail: "two\nlines".to_owned(), address: None };
        assert_eq!(
            describe(&[quota, other]),
            "Error: creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 400, \
             RequestID: 1, api error VpcLimitExceeded: The maximum number of VPCs has been reached. (at \
             module.vpc.aws_vpc.this); Error: s: two lines"
        );
    }
}
