//! The few EC2 calls the leftover sweep makes, through EC2's Query protocol signed with SigV4 by the SDK's own
//! signer: the SDK's EC2 crate is the largest AWS crate by far, and its build would cost every build of the image
//! minutes for a handful of delete calls.

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;

use crate::aws::AwsSession;
use crate::{Error, Result};

/// EC2's Query API version (stable since 2016).
const API_VERSION: &str = "2016-11-15";
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// An EC2 error answer: its code (`DependencyViolation`, `InvalidVpcID.NotFound`, ...) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ec2Refusal {
    pub code: String,
    pub message: String,
}

impl Ec2Refusal {
    /// The resource is gone already (deleted meanwhile, or by an earlier round).
    pub fn is_not_found(&self) -> bool {
        self.code.ends_with(".NotFound")
    }
}

impl AwsSession {
    /// Calls EC2's `action` with `parameters`; `Ok(Err(refusal))` when EC2 answered with an error.
    pub(crate) async fn ec2(
        &self,
        action: &'static str,
        parameters: &[(&str, &str)],
    ) -> Result<std::result::Result<String, Ec2Refusal>> {
        let failed = |message: String| Error::Aws { operation: action, message };
        let endpoint = match self.sdk_config().endpoint_url() {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("https://ec2.{}.amazonaws.com", self.region()),
        };
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("Action", action)
            .append_pair("Version", API_VERSION)
            .extend_pairs(parameters)
            .finish();
        let url = format!("{endpoint}/");
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let signed = self.sign_ec2(&url, content_type, &body).await.map_err(failed)?;
        let http =
            reqwest::Client::builder().timeout(CALL_TIMEOUT).build().map_err(|error| failed(error.to_string()))?;
        let mut request = http.post(&url).header("content-type", content_type).body(body);
        for (name, value) in signed {
            request = request.header(name, value);
        }
        let answer = request.send().await.map_err(|error| failed(error.to_string()))?;
        let status = answer.status();
        let text = answer.text().await.map_err(|error| failed(error.to_string()))?;
        if status.is_success() {
            return Ok(Ok(text));
        }
        match refusal(&text) {
            Some(refusal) => Ok(Err(refusal)),
            None => Err(failed(format!("HTTP {status}"))),
        }
    }

    /// The SigV4 headers of a POST of `body` to EC2 at `url`, with the run's current credentials.
    async fn sign_ec2(
        &self,
        url: &str,
        content_type: &str,
        body: &str,
    ) -> std::result::Result<Vec<(String, String)>, String> {
        let provider = self.sdk_config().credentials_provider().ok_or("no credentials")?;
        let credentials = provider.provide_credentials().await.map_err(|error| error.to_string())?;
        let identity = Identity::from(credentials);
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(self.region())
            .name("ec2")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|error| error.to_string())?
            .into();
        let headers = [("content-type", content_type)];
        let request = SignableRequest::new("POST", url, headers.into_iter(), SignableBody::Bytes(body.as_bytes()))
            .map_err(|error| error.to_string())?;
        let (instructions, _) = sign(request, &params).map_err(|error| error.to_string())?.into_parts();
        Ok(instructions.headers().map(|(name, value)| (name.to_owned(), value.to_owned())).collect())
    }
}

/// The first error of an EC2 error answer (`<Response><Errors><Error><Code>...`).
fn refusal(xml: &str) -> Option<Ec2Refusal> {
    Some(Ec2Refusal {
        code: element(xml, "Code")?.to_owned(),
        message: element(xml, "Message").unwrap_or("").to_owned(),
    })
}

/// The text of each `<name>` element of an EC2 answer, in order (EC2's answers are flat, unescaped ids and codes).
pub(crate) fn elements<'a>(xml: &'a str, name: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut found = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        found.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    found
}

fn element<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    elements(xml, name).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As EC2 answers a delete of a VPC that still has a subnet.
    const DEPENDENCY_VIOLATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
        <Code>DependencyViolation</Code><Message>The vpc 'vpc-0a1b' has dependencies and cannot be deleted.</Message>\
        </Error></Errors><RequestID>5a7b</RequestID></Response>";

    #[test]
    fn an_error_answer_is_read_as_its_code_and_message() {
        let refusal = refusal(DEPENDENCY_VIOLATION).unwrap();
        assert_eq!(refusal.code, "DependencyViolation");
        assert_eq!(refusal.message, "The vpc 'vpc-0a1b' has dependencies and cannot be deleted.");
        assert!(!refusal.is_not_found());
        let gone = Ec2Refusal { code: "InvalidSubnetID.NotFound".into(), message: String::new() };
        assert!(gone.is_not_found());
        assert_eq!(super::refusal("<html>bad gateway</html>"), None);
    }

    #[test]
    fn every_element_of_a_name_is_read_in_order() {
        let answer = "<internetGatewaySet><item><attachmentSet><item><vpcId>vpc-1</vpcId></item><item>\
                      <vpcId>vpc-2</vpcId></item></attachmentSet></item></internetGatewaySet>";
        assert_eq!(elements(answer, "vpcId"), ["vpc-1", "vpc-2"]);
        assert!(elements(answer, "subnetId").is_empty());
    }
}
