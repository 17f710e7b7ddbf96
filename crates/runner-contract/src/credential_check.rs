//! Every value of a credential is checked against its format before it is written anywhere: auth-service is
//! outside the platform, and its values end up in files the runner writes (an AWS profile, where a newline would
//! add lines such as `credential_process`) and in Terraform's environment. A message names the field (as
//! auth-service spells it) and why, never the value.

use secrecy::ExposeSecret;

use crate::credential::CloudCredential;

/// A field whose value does not have its format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {why}")]
pub struct InvalidField {
    pub field: &'static str,
    pub why: &'static str,
}

fn invalid(field: &'static str, why: &'static str) -> InvalidField {
    InvalidField { field, why }
}

impl CloudCredential {
    /// Checks every field; the first that does not have its format is named.
    pub fn check(&self) -> Result<(), InvalidField> {
        match self {
            CloudCredential::AwsAccessKey { access_key_id, secret_access_key, region } => {
                check_access_key(access_key_id, secret_access_key.expose_secret())?;
                region.as_deref().map_or(Ok(()), check_region)
            }
            CloudCredential::AwsAssumeRole { role_arn, external_id, session_duration_seconds: _, source } => {
                check_role_arn(role_arn)?;
                if let Some(external_id) = external_id {
                    check_external_id(external_id.expose_secret())?;
                }
                source.as_ref().map_or(Ok(()), |source| {
                    check_access_key(&source.access_key_id, source.secret_access_key.expose_secret())
                })
            }
            CloudCredential::GcpServiceAccount { project_id, service_account_key } => {
                check_project_id("projectId", project_id)?;
                check_service_account_key(service_account_key.expose_secret())
            }
        }
    }
}

/// AWS access key ids are upper-case letters and digits; secret keys printable ASCII without spaces.
fn check_access_key(access_key_id: &str, secret_access_key: &str) -> Result<(), InvalidField> {
    let id_ok = (1..=128).contains(&access_key_id.len())
        && access_key_id.bytes().all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit());
    if !id_ok {
        return Err(invalid("accessKeyId", "is not 1 to 128 upper-case letters and digits"));
    }
    let secret_ok =
        (1..=128).contains(&secret_access_key.len()) && secret_access_key.bytes().all(|b| b.is_ascii_graphic());
    if !secret_ok {
        return Err(invalid("secretAccessKey", "is not 1 to 128 printable characters without spaces"));
    }
    Ok(())
}

/// `eu-west-1`, `us-gov-west-1`, `cn-north-1`: lower-case words and a number, joined by dashes.
pub fn is_aws_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    region.len() <= 32
        && parts.len() >= 3
        && parts[..parts.len() - 1].iter().all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase()))
        && parts.last().is_some_and(|number| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
}

fn check_region(region: &str) -> Result<(), InvalidField> {
    if is_aws_region(region) { Ok(()) } else { Err(invalid("region", "is not an AWS region such as eu-west-1")) }
}

/// `arn:<partition>:iam::<12-digit account>:role/<path and name>`, with IAM's characters for the name.
fn check_role_arn(arn: &str) -> Result<(), InvalidField> {
    let valid = match arn.split(':').collect::<Vec<_>>()[..] {
        ["arn", partition, "iam", "", account, resource] => {
            partition.starts_with("aws")
                && partition.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
                && account.len() == 12
                && account.bytes().all(|byte| byte.is_ascii_digit())
                && resource.strip_prefix("role/").is_some_and(|name| {
                    (1..=512).contains(&name.len()) && name.bytes().all(|b| iam_name_byte(b) || b == b'/')
                })
        }
        _ => false,
    };
    if valid { Ok(()) } else { Err(invalid("roleArn", "is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")) }
}

/// IAM's `[\w+=,.@-]`.
fn iam_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"_+=,.@-".contains(&byte)
}

/// STS: 2 to 1224 characters of `[\w+=,.@:/-]`.
fn check_external_id(external_id: &str) -> Result<(), InvalidField> {
    let valid = (2..=1224).contains(&external_id.len())
        && external_id.bytes().all(|byte| iam_name_byte(byte) || byte == b':' || byte == b'/');
    if valid {
        Ok(())
    } else {
        Err(invalid("externalId", "is not 2 to 1224 characters of letters, digits and +=,.@:/-"))
    }
}

/// Google's rule: 6 to 30 lower-case letters, digits and dashes, starting with a letter, not ending with a dash.
pub fn is_gcp_project_id(project_id: &str) -> bool {
    let bytes = project_id.as_bytes();
    (6..=30).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1] != b'-'
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn check_project_id(field: &'static str, project_id: &str) -> Result<(), InvalidField> {
    if is_gcp_project_id(project_id) { Ok(()) } else { Err(invalid(field, "is not a Google Cloud project id")) }
}

/// A service account's JSON key: `type` must be `service_account` (an `external_account` file, for example,
/// can make Google's libraries run a command), with a PEM private key and, when given, a valid project id.
fn check_service_account_key(text: &str) -> Result<(), InvalidField> {
    const FIELD: &str = "serviceAccountKey";
    let key: serde_json::Value = serde_json::from_str(text).map_err(|_| invalid(FIELD, "is not JSON"))?;
    if key.get("type").and_then(serde_json::Value::as_str) != Some("service_account") {
        return Err(invalid(FIELD, "is not a key of type service_account"));
    }
    let private_key = key.get("private_key").and_then(serde_json::Value::as_str).unwrap_or_default();
    if !private_key.trim_start().starts_with("-----BEGIN PRIVATE KEY-----") {
        return Err(invalid(FIELD, "has no PEM private_key"));
    }
    match key.get("project_id") {
        None => Ok(()),
        Some(project_id) => check_project_id(
            "serviceAccountKey.project_id",
            project_id.as_str().ok_or_else(|| invalid("serviceAccountKey.project_id", "is not a string"))?,
        ),
    }
}

#[cfg(test)]
mod tests {
    use secrecy::SecretString;

    use super::*;
    use crate::credential::AwsKeyPair;

    fn access_key(id: &str, secret: &str, region: Option<&str>) -> CloudCredential {
        CloudCredential::AwsAccessKey {
            access_key_id: id.to_owned(),
            secret_access_key: SecretString::from(secret),
            region: region.map(str::to_owned),
        }
    }

    fn assume_role(arn: &str, external_id: Option<&str>) -> CloudCredential {
        CloudCredential::AwsAssumeRole {
            role_arn: arn.to_owned(),
            external_id: external_id.map(SecretString::from),
            session_duration_seconds: None,
            source: Some(AwsKeyPair { access_key_id: "AKIASOURCE".to_owned(), secret_access_key: "s3cr3t".into() }),
        }
    }

    fn gcp(project_id: &str, key: serde_json::Value) -> CloudCredential {
        CloudCredential::GcpServiceAccount {
            project_id: project_id.to_owned(),
            service_account_key: SecretString::from(key.to_string()),
        }
    }

    fn key(kind: &str) -> serde_json::Value {
        serde_json::json!({"type": kind, "project_id": "my-project-1", "private_key": "-----BEGIN PRIVATE KEY-----\nx"})
    }

    #[test]
    fn well_formed_credentials_pass() {
        access_key("AKIAEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", Some("us-gov-west-1")).check().unwrap();
        assume_role("arn:aws-cn:iam::123456789012:role/path/provisioner+x", Some("ext-id:1/a@b")).check().unwrap();
        gcp("my-project-1", key("service_account")).check().unwrap();
    }

    /// Each injected value is refused, naming its field: a newline would add a line to the AWS profile.
    #[test]
    fn injected_values_are_refused_by_field() {
        let cases = [
            (access_key("AKIA\ncredential_process = sh", "s", None), "accessKeyId"),
            (access_key("AKIAEXAMPLE", "secret\n[profile x]", None), "secretAccessKey"),
            (access_key("AKIAEXAMPLE", "secret", Some("eu-west-1\ncredential_process = sh")), "region"),
            (access_key("AKIAEXAMPLE", "secret", Some("eu-west")), "region"),
            (assume_role("arn:aws:iam::123456789012:role/x\ncredential_process = sh", None), "roleArn"),
            (assume_role("arn:aws:iam::123456789012:role/x", Some("id\ncredential_process = sh")), "externalId"),
            (assume_role("arn:aws:iam::123456789012:role/x", Some("x")), "externalId"),
            (gcp("My_Project", key("service_account")), "projectId"),
            (gcp("my-project-1", key("external_account")), "serviceAccountKey"),
            (gcp("my-project-1", serde_json::json!({"type": "service_account"})), "serviceAccountKey"),
        ];
        for (credential, field) in cases {
            let refused = credential.check().expect_err(field);
            assert_eq!(refused.field, field, "{refused}");
            assert!(!refused.to_string().contains('\n'), "{refused}");
        }
    }
}
