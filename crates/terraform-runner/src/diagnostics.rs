//! Terraform's machine-readable output (`-json`): each line turned back into the text people read in the run's
//! log, its error diagnostics kept, so that a failure names the cloud's answer, its class and the resource, and
//! each resource an apply created named as it completes (for [`crate::creations`]).

use runner_contract::failure::{CloudFailure, CloudFailureClass};
use runner_contract::redact::Redactor;
use serde::{Deserialize, Serialize};

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
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    hook: Option<UiHook>,
}

/// One resource a run created: Terraform's type and id of it (`aws_instance`, `i-0a1b`), and its address, for
/// people reading the record of what runs created ([`crate::creations`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Created {
    #[serde(rename = "type")]
    pub resource_type: String,
    pub id: String,
    pub address: String,
}

/// The `hook` of a message: for `apply_complete`, the resource and the id the provider gave it. Every field is
/// optional, since the hooks of other messages (a provisioner's output, a refresh) have other shapes and a line
/// that does not parse would be logged unredacted as JSON.
#[derive(Deserialize)]
struct UiHook {
    #[serde(default)]
    resource: Option<UiResource>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    id_value: Option<String>,
}

#[derive(Deserialize)]
struct UiResource {
    #[serde(default)]
    addr: String,
    #[serde(default)]
    resource_type: String,
}

impl UiMessage {
    /// The resource this message says an apply created (a replacement's new half is a creation too).
    fn created(&self) -> Option<Created> {
        let hook = self.hook.as_ref().filter(|_| self.kind == "apply_complete")?;
        let resource = hook.resource.as_ref().filter(|_| hook.action.as_deref() == Some("create"))?;
        let id = hook.id_value.as_deref().filter(|id| !id.is_empty())?;
        let known = !resource.resource_type.is_empty() && !resource.addr.is_empty();
        known.then(|| Created {
            resource_type: resource.resource_type.clone(),
            id: id.to_owned(),
            address: resource.addr.clone(),
        })
    }
}

/// What one line of output says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Line {
    /// The text to log for it (a line that is not a JSON message is logged as it is).
    pub text: String,
    /// The error it reports.
    pub error: Option<Diagnostic>,
    /// The resource it says was created.
    pub created: Option<Created>,
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

/// What one line of output says.
pub fn read_line(line: &str) -> Line {
    let Some(message) = line.starts_with('{').then(|| serde_json::from_str::<UiMessage>(line).ok()).flatten() else {
        return Line { text: line.to_owned(), ..Line::default() };
    };
    let created = message.created();
    let Some(diagnostic) = message.diagnostic else { return Line { text: message.message, error: None, created } };
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
    Line { text, error, created }
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

    fn plain(text: &str) -> Line {
        Line { text: text.to_owned(), ..Line::default() }
    }

    #[test]
    fn a_json_line_is_logged_as_its_message_and_an_error_is_kept() {
        let Line { text, error, created } = read_line(VPC_QUOTA);
        assert!(text.starts_with("Error: creating EC2 VPC"), "{text}");
        assert!(text.ends_with("\n  with module.vpc.aws_vpc.this"), "{text}");
        let error = error.unwrap();
        assert_eq!(error.address.as_deref(), Some("module.vpc.aws_vpc.this"));
        assert_eq!(created, None);
        let progress = r#"{"@level":"info","@message":"module.vpc.aws_vpc.this: Creating...","type":"apply_start"}"#;
        assert_eq!(read_line(progress), plain("module.vpc.aws_vpc.this: Creating..."));
        assert_eq!(read_line("Warning: plain text"), plain("Warning: plain text"));
        let warning = r#"{"@message":"Warning: deprecated","diagnostic":{"severity":"warning","summary":"deprecated","detail":"use x\ninstead"},"type":"diagnostic"}"#;
        assert_eq!(read_line(warning), plain("Warning: deprecated\n  use x\n  instead"));
    }

    /// As OpenTofu 1.x prints them with `apply -json`.
    fn apply_complete(action: &str, id: &str) -> String {
        format!(
            r#"{{"@level":"info","@message":"module.compute.aws_instance.control_plane[0]: Creation complete after 12s [id={id}]","@module":"tofu.ui","hook":{{"resource":{{"addr":"module.compute.aws_instance.control_plane[0]","module":"module.compute","resource":"aws_instance.control_plane[0]","implied_provider":"aws","resource_type":"aws_instance","resource_name":"control_plane","resource_key":0}},"action":"{action}","id_key":"id","id_value":"{id}","elapsed_seconds":12}},"type":"apply_complete"}}"#
        )
    }

    #[test]
    fn a_completed_creation_names_the_resource_by_its_type_and_id_and_nothing_else_does() {
        let line = read_line(&apply_complete("create", "i-0a1b"));
        assert_eq!(line.text, "module.compute.aws_instance.control_plane[0]: Creation complete after 12s [id=i-0a1b]");
        assert_eq!(
            line.created,
            Some(Created {
                resource_type: "aws_instance".into(),
                id: "i-0a1b".into(),
                address: "module.compute.aws_instance.control_plane[0]".into(),
            })
        );
        for (action, id) in [("update", "i-0a1b"), ("delete", "i-0a1b"), ("create", "")] {
            assert_eq!(read_line(&apply_complete(action, id)).created, None, "{action} {id:?}");
        }
        let started = apply_complete("create", "i-0a1b").replace("apply_complete", "apply_start");
        assert_eq!(read_line(&started).created, None);
    }

    #[test]
    fn a_message_whose_hook_has_another_shape_is_still_read_as_its_text() {
        let output = r#"{"@level":"info","@message":"terraform_data.leaky: (local-exec): hello","@module":"tofu.ui","hook":{"resource":{"addr":"terraform_data.leaky","resource_type":"terraform_data"},"provisioner":"local-exec","output":"hello"},"type":"provision_progress"}"#;
        assert_eq!(read_line(output), plain("terraform_data.leaky: (local-exec): hello"));
    }

    #[test]
    fn the_failure_is_transient_only_when_every_error_is() {
        let quota = read_line(VPC_QUOTA).error.unwrap();
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
        let quota = read_line(VPC_QUOTA).error.unwrap();
        let other = Diagnostic { summary: "s".to_owned(), detail: "two\nlines".to_owned(), address: None };
        assert_eq!(
            describe(&[quota, other]),
            "Error: creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 400, \
             RequestID: 1, api error VpcLimitExceeded: The maximum number of VPCs has been reached. (at \
             module.vpc.aws_vpc.this); Error: s: two lines"
        );
    }
}
