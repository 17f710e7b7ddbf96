//! auth-service's answer for one credential, checked against its `type` (see the table in [`super`]) and turned
//! into the [`CloudCredential`] the runner gets, with the other projects it may build in. Messages name what is
//! wrong, never a secret value.

use runner_contract::credential::{AwsKeyPair, CloudCredential, CredentialType};
use runner_contract::credential_check::{InvalidField, is_gcp_project_id};
use secrecy::SecretString;
use serde::{Deserialize, Deserializer, de};

use super::{Error, Resolved};

/// The answer of auth-service as it arrives; [`WireCredential::into_credential`] checks it against its `type`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCredential {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    access_key_id: Option<String>,
    secret_access_key: Option<WireSecret>,
    region: Option<String>,
    role_arn: Option<String>,
    external_id: Option<WireSecret>,
    session_duration_seconds: Option<u32>,
    project_id: Option<String>,
    project_ids: Option<Vec<String>>,
    service_account_key: Option<WireJsonObject>,
}

/// A non-empty string. serde's own messages quote the offending value, so secrets use this instead.
struct WireSecret(SecretString);

impl<'de> Deserialize<'de> for WireSecret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(value) if !value.is_empty() => Ok(Self(value.into())),
            _ => Err(de::Error::custom("expected a non-empty string")),
        }
    }
}

/// A JSON object kept as its text, with the same care as [`WireSecret`].
struct WireJsonObject(SecretString);

impl<'de> Deserialize<'de> for WireJsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            value @ serde_json::Value::Object(_) => Ok(Self(value.to_string().into())),
            _ => Err(de::Error::custom("expected a JSON object")),
        }
    }
}

fn required<T>(value: Option<T>, field: &str, kind: CredentialType) -> Result<T, String> {
    value.ok_or_else(|| format!("{field} is required for type {kind}"))
}

fn required_text(value: Option<String>, field: &str, kind: CredentialType) -> Result<String, String> {
    required(value.filter(|value| !value.is_empty()), field, kind)
}

impl WireCredential {
    /// The credential, and for a GCP one the projects it lists besides its own (unknown fields, `projectIds` of
    /// another type among them, are ignored).
    fn into_resolved(mut self, requested_id: &str) -> Result<Resolved, String> {
        let project_ids = self.project_ids.take().unwrap_or_default();
        let credential = self.into_credential(requested_id)?;
        let project_ids = match credential {
            CloudCredential::GcpServiceAccount { .. } => project_ids,
            CloudCredential::AwsAccessKey { .. } | CloudCredential::AwsAssumeRole { .. } => Vec::new(),
        };
        Ok(Resolved { credential, project_ids })
    }

    fn into_credential(self, requested_id: &str) -> Result<CloudCredential, String> {
        if self.id != requested_id {
            return Err(format!("id {:?} is not the requested {requested_id:?}", self.id));
        }
        let Some(kind) = CredentialType::parse(&self.kind) else {
            return Err(format!("unknown credential type {:?}", self.kind));
        };
        match kind {
            CredentialType::AwsAccessKey => Ok(CloudCredential::AwsAccessKey {
                access_key_id: required_text(self.access_key_id, "accessKeyId", kind)?,
                secret_access_key: required(self.secret_access_key, "secretAccessKey", kind)?.0,
                region: self.region.filter(|region| !region.is_empty()),
            }),
            CredentialType::AwsAssumeRole => {
                let role_arn = required_text(self.role_arn, "roleArn", kind)?;
                if let Some(seconds) = self.session_duration_seconds
                    && !(900..=43200).contains(&seconds)
                {
                    return Err(format!("sessionDurationSeconds {seconds} is outside 900..=43200"));
                }
                let source = match (self.access_key_id.filter(|id| !id.is_empty()), self.secret_access_key) {
                    (Some(access_key_id), Some(secret)) => {
                        Some(AwsKeyPair { access_key_id, secret_access_key: secret.0 })
                    }
                    (None, None) => None,
                    _ => {
                        return Err("accessKeyId and secretAccessKey must come together".to_owned());
                    }
                };
                Ok(CloudCredential::AwsAssumeRole {
                    role_arn,
                    external_id: self.external_id.map(|id| id.0),
                    session_duration_seconds: self.session_duration_seconds,
                    source,
                })
            }
            CredentialType::GcpServiceAccount => Ok(CloudCredential::GcpServiceAccount {
                project_id: required_text(self.project_id, "projectId", kind)?,
                service_account_key: required(self.service_account_key, "serviceAccountKey", kind)?.0,
            }),
        }
    }
}

/// Parses a 200 answer and checks every value's format; the message names what is wrong and never holds a
/// secret value.
pub(super) fn parse_credential(requested_id: &str, body: &[u8]) -> Result<Resolved, Error> {
    let shape = |message| Error::InvalidResponse { message };
    let wire: WireCredential = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(body))
        .map_err(|error| shape(error.to_string()))?;
    let resolved = wire.into_resolved(requested_id).map_err(shape)?;
    let invalid = |invalid| Error::InvalidCredential { id: requested_id.to_owned(), invalid };
    resolved.credential.check().map_err(invalid)?;
    if !resolved.project_ids.iter().all(|project| is_gcp_project_id(project)) {
        return Err(invalid(InvalidField { field: "projectIds", why: "is not a list of Google Cloud project ids" }));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use runner_contract::Cloud;
    use secrecy::ExposeSecret;

    use super::*;

    fn parse_resolved(json: serde_json::Value) -> Result<Resolved, String> {
        parse_credential("cred-1", json.to_string().as_bytes()).map_err(|error| error.to_string())
    }

    fn parse(json: serde_json::Value) -> Result<CloudCredential, String> {
        parse_resolved(json).map(|resolved| resolved.credential)
    }

    #[test]
    fn parses_an_aws_access_key() {
        let credential = parse(serde_json::json!({
            "id": "cred-1", "type": "aws_access_key",
            "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "s3cr3t-key", "region": "eu-west-1",
        }))
        .unwrap();
        assert_eq!(credential.kind(), CredentialType::AwsAccessKey);
        assert_eq!(credential.cloud(), Cloud::Aws);
        assert_eq!(credential.secret_values(), ["AKIAEXAMPLE", "s3cr3t-key"]);
        let files = credential.secret_files();
        let files: BTreeMap<_, _> = files.iter().map(|(name, value)| (name.as_str(), value.expose_secret())).collect();
        assert_eq!(
            files,
            BTreeMap::from([
                ("aws_access_key_id", "AKIAEXAMPLE"),
                ("aws_region", "eu-west-1"),
                ("aws_secret_access_key", "s3cr3t-key"),
                ("credential_type", "aws_access_key"),
            ])
        );
    }

    #[test]
    fn parses_an_aws_assume_role_with_and_without_source_keys() {
        let credential = parse(serde_json::json!({
            "id": "cred-1", "type": "aws_assume_role",
            "roleArn": "arn:aws:iam::123456789012:role/provisioner",
            "externalId": "ext-secret", "sessionDurationSeconds": 3600,
            "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "s3cr3t-key",
        }))
        .unwrap();
        assert_eq!(credential.kind(), CredentialType::AwsAssumeRole);
        assert_eq!(credential.secret_values(), ["ext-secret", "AKIAEXAMPLE", "s3cr3t-key"]);
        let files = credential.secret_files();
        assert_eq!(
            files.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "aws_access_key_id",
                "aws_secret_access_key",
                "credential_type",
                "external_id",
                "role_arn",
                "session_duration_seconds"
            ]
        );
        assert_eq!(files["session_duration_seconds"].expose_secret(), "3600");

        let credential = parse(serde_json::json!({
            "id": "cred-1", "type": "aws_assume_role", "roleArn": "arn:aws-cn:iam::123456789012:role/x",
        }))
        .unwrap();
        assert!(matches!(credential, CloudCredential::AwsAssumeRole { source: None, external_id: None, .. }));
        assert!(credential.secret_values().is_empty());
        assert_eq!(credential.secret_files().len(), 2);
    }

    #[test]
    fn parses_a_gcp_service_account() {
        let key = serde_json::json!({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"});
        let credential = parse(serde_json::json!({
            "id": "cred-1", "type": "gcp_service_account", "projectId": "my-project", "serviceAccountKey": key,
        }))
        .unwrap();
        assert_eq!(credential.kind(), CredentialType::GcpServiceAccount);
        assert_eq!(credential.cloud(), Cloud::Gcp);
        let files = credential.secret_files();
        let written: serde_json::Value = serde_json::from_str(files["service_account.json"].expose_secret()).unwrap();
        assert_eq!(written, key);
        assert_eq!(files["project_id"].expose_secret(), "my-project");
        assert_eq!(files["credential_type"].expose_secret(), "gcp_service_account");
        let secrets = credential.secret_values();
        assert_eq!(secrets.len(), 2, "the key file and its private key on its own");
        assert_eq!(secrets[1], "-----BEGIN PRIVATE KEY-----");
    }

    #[test]
    fn a_gcp_credential_lists_the_other_projects_it_may_build_in() {
        let key = serde_json::json!({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"});
        let gcp = |project_ids: serde_json::Value| {
            parse_resolved(serde_json::json!({
                "id": "cred-1", "type": "gcp_service_account", "projectId": "my-project",
                "serviceAccountKey": key, "projectIds": project_ids,
            }))
        };
        let resolved = gcp(serde_json::json!(["other-project-2", "spare-project-3"])).unwrap();
        assert_eq!(resolved.project_ids, ["other-project-2", "spare-project-3"]);
        assert!(gcp(serde_json::json!([])).unwrap().project_ids.is_empty());
        let message = gcp(serde_json::json!(["other-project-2", "Not A Project"])).map(|_| ()).unwrap_err();
        assert!(message.contains("has an invalid projectIds"), "{message}");
        assert!(gcp(serde_json::json!("other-project-2")).is_err(), "a list, not one project");

        let aws = parse_resolved(serde_json::json!({
            "id": "cred-1", "type": "aws_access_key", "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "s3cr3t-key",
            "projectIds": ["other-project-2"],
        }))
        .unwrap();
        assert!(aws.project_ids.is_empty(), "only a GCP credential has projects");
    }

    #[test]
    fn invalid_answers_name_the_problem_without_secret_values() {
        let cases = [
            (serde_json::json!({"id": "cred-1", "type": "aws_access_key", "accessKeyId": "A"}), "secretAccessKey"),
            (
                serde_json::json!({"id": "cred-1", "type": "aws_access_key", "accessKeyId": "A", "secretAccessKey": 12345678}),
                "secretAccessKey",
            ),
            (
                serde_json::json!({"id": "cred-1", "type": "gcp_service_account", "projectId": "p", "serviceAccountKey": "{\"private_key\": \"12345678\"}"}),
                "serviceAccountKey",
            ),
            (
                serde_json::json!({"id": "cred-1", "type": "aws_assume_role", "roleArn": "arn:aws:s3:::bucket"}),
                "roleArn",
            ),
            (
                serde_json::json!({"id": "cred-1", "type": "aws_assume_role", "roleArn": "arn:aws:iam::123456789012:role/x", "sessionDurationSeconds": 60}),
                "sessionDurationSeconds",
            ),
            (
                serde_json::json!({"id": "cred-1", "type": "aws_assume_role", "roleArn": "arn:aws:iam::123456789012:role/x", "secretAccessKey": "12345678"}),
                "accessKeyId",
            ),
            (serde_json::json!({"id": "cred-2", "type": "aws_access_key"}), "cred-2"),
            (serde_json::json!({"id": "cred-1", "type": "azure"}), "azure"),
            (serde_json::json!({"id": "cred-1"}), "type"),
        ];
        for (json, expected) in cases {
            let message = parse(json.clone()).expect_err(&json.to_string());
            assert!(message.contains(expected), "{json}: {message}");
            assert!(!message.contains("12345678"), "{json}: {message}");
        }
        assert!(parse_credential("cred-1", b"<html>").is_err());
    }
}
