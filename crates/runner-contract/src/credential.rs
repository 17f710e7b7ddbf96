//! A cloud credential and the files of the run's credentials Secret that carry it from the service (which
//! resolves it in auth-service and writes [`CloudCredential::secret_files`]) to the runner (which reads them back
//! with [`CloudCredential::from_secret_files`] from the mounted Secret). Both check the values with
//! [`CloudCredential::check`](crate::credential_check).
//!
//! The files: [`file::CREDENTIAL_TYPE`] always; AWS: `aws_access_key_id` and `aws_secret_access_key` (when there
//! are keys), `aws_region` (when given), `role_arn`, `external_id` and `session_duration_seconds` (assume role,
//! when given); GCP: `service_account.json` and `project_id`. An empty optional file counts as absent.

use std::collections::BTreeMap;

use secrecy::{ExposeSecret, SecretString};

use crate::Cloud;

/// The file names in the credentials Secret.
pub mod file {
    /// The [`super::CredentialType`].
    pub const CREDENTIAL_TYPE: &str = "credential_type";
    pub const AWS_ACCESS_KEY_ID: &str = "aws_access_key_id";
    pub const AWS_SECRET_ACCESS_KEY: &str = "aws_secret_access_key";
    pub const AWS_REGION: &str = "aws_region";
    pub const ROLE_ARN: &str = "role_arn";
    pub const EXTERNAL_ID: &str = "external_id";
    pub const SESSION_DURATION_SECONDS: &str = "session_duration_seconds";
    /// The service-account key, the JSON key file as auth-service handed it out.
    pub const GCP_KEY: &str = "service_account.json";
    pub const GCP_PROJECT_ID: &str = "project_id";
}

/// The kinds of credential, spelled as auth-service's `type` and the [`file::CREDENTIAL_TYPE`] file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialType {
    AwsAccessKey,
    AwsAssumeRole,
    GcpServiceAccount,
}

impl CredentialType {
    pub const ALL: [CredentialType; 3] =
        [CredentialType::AwsAccessKey, CredentialType::AwsAssumeRole, CredentialType::GcpServiceAccount];

    pub fn as_str(self) -> &'static str {
        match self {
            CredentialType::AwsAccessKey => "aws_access_key",
            CredentialType::AwsAssumeRole => "aws_assume_role",
            CredentialType::GcpServiceAccount => "gcp_service_account",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    pub fn cloud(self) -> Cloud {
        match self {
            CredentialType::AwsAccessKey | CredentialType::AwsAssumeRole => Cloud::Aws,
            CredentialType::GcpServiceAccount => Cloud::Gcp,
        }
    }
}

impl std::fmt::Display for CredentialType {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Why the credentials Secret's files do not make a credential; names the file, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialFilesError {
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{file} {value:?} is not a number")]
    NotANumber { file: &'static str, value: String },
    #[error(
        "{file} {0:?} is not one of {known}",
        file = file::CREDENTIAL_TYPE,
        known = CredentialType::ALL.map(CredentialType::as_str).join(", ")
    )]
    UnknownType(String),
}

/// A cloud credential as auth-service hands it out. `Debug` shows no secret value.
#[derive(Debug, Clone)]
pub enum CloudCredential {
    AwsAccessKey {
        access_key_id: String,
        secret_access_key: SecretString,
        region: Option<String>,
    },
    AwsAssumeRole {
        role_arn: String,
        /// Not a secret to AWS, but it guards against the confused deputy, so it stays out of logs.
        external_id: Option<SecretString>,
        session_duration_seconds: Option<u32>,
        /// The credentials that assume the role; without them the runner uses its own workload identity.
        source: Option<AwsKeyPair>,
    },
    GcpServiceAccount {
        project_id: String,
        /// The JSON key file's text.
        service_account_key: SecretString,
    },
}

#[derive(Debug, Clone)]
pub struct AwsKeyPair {
    pub access_key_id: String,
    pub secret_access_key: SecretString,
}

impl CloudCredential {
    pub fn kind(&self) -> CredentialType {
        match self {
            CloudCredential::AwsAccessKey { .. } => CredentialType::AwsAccessKey,
            CloudCredential::AwsAssumeRole { .. } => CredentialType::AwsAssumeRole,
            CloudCredential::GcpServiceAccount { .. } => CredentialType::GcpServiceAccount,
        }
    }

    pub fn cloud(&self) -> Cloud {
        self.kind().cloud()
    }

    /// File name → content of the run's credentials Secret, which is mounted into the terraform-runner.
    pub fn secret_files(&self) -> BTreeMap<String, SecretString> {
        let mut files = BTreeMap::new();
        let mut add = |name: &str, value: &str| {
            files.insert(name.to_owned(), SecretString::from(value));
        };
        add(file::CREDENTIAL_TYPE, self.kind().as_str());
        match self {
            CloudCredential::AwsAccessKey { access_key_id, secret_access_key, region } => {
                add(file::AWS_ACCESS_KEY_ID, access_key_id);
                add(file::AWS_SECRET_ACCESS_KEY, secret_access_key.expose_secret());
                if let Some(region) = region {
                    add(file::AWS_REGION, region);
                }
            }
            CloudCredential::AwsAssumeRole { role_arn, external_id, session_duration_seconds, source } => {
                add(file::ROLE_ARN, role_arn);
                if let Some(external_id) = external_id {
                    add(file::EXTERNAL_ID, external_id.expose_secret());
                }
                if let Some(seconds) = session_duration_seconds {
                    add(file::SESSION_DURATION_SECONDS, &seconds.to_string());
                }
                if let Some(source) = source {
                    add(file::AWS_ACCESS_KEY_ID, &source.access_key_id);
                    add(file::AWS_SECRET_ACCESS_KEY, source.secret_access_key.expose_secret());
                }
            }
            CloudCredential::GcpServiceAccount { project_id, service_account_key } => {
                add(file::GCP_KEY, service_account_key.expose_secret());
                add(file::GCP_PROJECT_ID, project_id);
            }
        }
        files
    }

    /// Reads back what [`CloudCredential::secret_files`] wrote (terraform-runner, from the mounted Secret).
    pub fn from_secret_files(files: &BTreeMap<String, SecretString>) -> Result<Self, CredentialFilesError> {
        // Empty optional files (a Secret key with no value) count as absent, not as empty values for STS.
        let text = |name: &str| {
            files.get(name).map(|value| value.expose_secret().trim().to_owned()).filter(|value| !value.is_empty())
        };
        let required = |name: &'static str| text(name).ok_or(CredentialFilesError::Missing(name));
        let secret = |name: &'static str| required(name).map(SecretString::from);
        let key_pair = || -> Result<Option<AwsKeyPair>, CredentialFilesError> {
            match text(file::AWS_ACCESS_KEY_ID) {
                None => Ok(None),
                Some(access_key_id) => {
                    Ok(Some(AwsKeyPair { access_key_id, secret_access_key: secret(file::AWS_SECRET_ACCESS_KEY)? }))
                }
            }
        };
        let kind = required(file::CREDENTIAL_TYPE)?;
        Ok(match CredentialType::parse(&kind).ok_or(CredentialFilesError::UnknownType(kind))? {
            CredentialType::AwsAccessKey => {
                let AwsKeyPair { access_key_id, secret_access_key } =
                    key_pair()?.ok_or(CredentialFilesError::Missing(file::AWS_ACCESS_KEY_ID))?;
                CloudCredential::AwsAccessKey { access_key_id, secret_access_key, region: text(file::AWS_REGION) }
            }
            CredentialType::AwsAssumeRole => CloudCredential::AwsAssumeRole {
                role_arn: required(file::ROLE_ARN)?,
                external_id: text(file::EXTERNAL_ID).map(SecretString::from),
                session_duration_seconds: text(file::SESSION_DURATION_SECONDS)
                    .map(|value| {
                        value.parse().map_err(|_| CredentialFilesError::NotANumber {
                            file: file::SESSION_DURATION_SECONDS,
                            value,
                        })
                    })
                    .transpose()?,
                source: key_pair()?,
            },
            CredentialType::GcpServiceAccount => CloudCredential::GcpServiceAccount {
                project_id: required(file::GCP_PROJECT_ID)?,
                service_account_key: secret(file::GCP_KEY)?,
            },
        })
    }

    /// Every value to keep out of output we did not write (the runner's messages): the secrets, and the access
    /// key ids too, which identify the credential. For GCP also the key's own secret fields, which a tool may
    /// print without the rest of the key file.
    pub fn secret_values(&self) -> Vec<String> {
        match self {
            CloudCredential::AwsAccessKey { access_key_id, secret_access_key, .. } => {
                vec![access_key_id.clone(), secret_access_key.expose_secret().to_owned()]
            }
            CloudCredential::AwsAssumeRole { external_id, source, .. } => external_id
                .iter()
                .map(|external_id| external_id.expose_secret().to_owned())
                .chain(source.iter().flat_map(|source| {
                    [source.access_key_id.clone(), source.secret_access_key.expose_secret().to_owned()]
                }))
                .collect(),
            CloudCredential::GcpServiceAccount { service_account_key, .. } => {
                let key = service_account_key.expose_secret();
                let fields = serde_json::from_str::<serde_json::Value>(key).ok();
                std::iter::once(key.to_owned())
                    .chain(["private_key", "private_key_id"].into_iter().filter_map(|field| {
                        fields.as_ref().and_then(|fields| fields[field].as_str()).map(str::to_owned)
                    }))
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposed(files: &BTreeMap<String, SecretString>) -> BTreeMap<String, String> {
        files.iter().map(|(name, value)| (name.clone(), value.expose_secret().to_owned())).collect()
    }

    #[test]
    fn secret_files_read_back_into_the_same_credential() {
        let credentials = [
            CloudCredential::AwsAccessKey {
                access_key_id: "AKIAEXAMPLE".to_owned(),
                secret_access_key: "k".into(),
                region: Some("eu-west-1".to_owned()),
            },
            CloudCredential::AwsAssumeRole {
                role_arn: "arn:aws:iam::123456789012:role/p".to_owned(),
                external_id: Some("ext".into()),
                session_duration_seconds: Some(3600),
                source: Some(AwsKeyPair { access_key_id: "AKIASOURCE".to_owned(), secret_access_key: "s".into() }),
            },
            CloudCredential::AwsAssumeRole {
                role_arn: "arn:aws:iam::123456789012:role/p".to_owned(),
                external_id: None,
                session_duration_seconds: None,
                source: None,
            },
            CloudCredential::GcpServiceAccount {
                project_id: "my-project-1".to_owned(),
                service_account_key: r#"{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----"}"#.into(),
            },
        ];
        for credential in credentials {
            let files = credential.secret_files();
            let read = CloudCredential::from_secret_files(&files).unwrap();
            assert_eq!(read.kind(), credential.kind());
            assert_eq!(exposed(&read.secret_files()), exposed(&files), "{}", credential.kind());
        }
    }

    #[test]
    fn unreadable_secret_files_name_the_file() {
        let files = |pairs: &[(&str, &str)]| -> BTreeMap<String, SecretString> {
            pairs.iter().map(|(name, value)| (name.to_string(), SecretString::from(*value))).collect()
        };
        let error = |pairs| CloudCredential::from_secret_files(&files(pairs)).unwrap_err().to_string();
        assert_eq!(error(&[]), "credential_type is missing");
        assert_eq!(error(&[("credential_type", "aws_access_key")]), "aws_access_key_id is missing");
        assert_eq!(
            error(&[("credential_type", "aws_access_key"), ("aws_access_key_id", "A")]),
            "aws_secret_access_key is missing"
        );
        assert_eq!(error(&[("credential_type", "aws_assume_role")]), "role_arn is missing");
        assert_eq!(
            error(&[("credential_type", "aws_assume_role"), ("role_arn", "r"), ("session_duration_seconds", "1h")]),
            "session_duration_seconds \"1h\" is not a number"
        );
        // Empty optional files (a Secret key with no value) count as absent, not as empty values for STS.
        let read = CloudCredential::from_secret_files(&files(&[
            ("credential_type", "aws_assume_role"),
            ("role_arn", "arn:aws:iam::123456789012:role/p"),
            ("external_id", ""),
            ("aws_access_key_id", "\n"),
        ]))
        .unwrap();
        assert!(matches!(read, CloudCredential::AwsAssumeRole { external_id: None, source: None, .. }), "{read:?}");
        assert_eq!(
            error(&[("credential_type", "azure")]),
            "credential_type \"azure\" is not one of aws_access_key, aws_assume_role, gcp_service_account"
        );
    }

    #[test]
    fn credential_types_are_spelled_like_auth_service() {
        for kind in CredentialType::ALL {
            assert_eq!(CredentialType::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(CredentialType::GcpServiceAccount.cloud(), Cloud::Gcp);
        assert_eq!(CredentialType::AwsAssumeRole.to_string(), "aws_assume_role");
        assert_eq!(CredentialType::parse("azure"), None);
    }

    #[test]
    fn debug_shows_no_secret_values() {
        let credential = CloudCredential::AwsAssumeRole {
            role_arn: "arn:aws:iam::123456789012:role/x".to_owned(),
            external_id: Some("ext-secret".into()),
            session_duration_seconds: None,
            source: Some(AwsKeyPair {
                access_key_id: "AKIAEXAMPLE".to_owned(),
                secret_access_key: "s3cr3t-key".into(),
            }),
        };
        let debug = format!("{credential:?}");
        assert!(debug.contains("AKIAEXAMPLE"), "{debug}");
        assert!(!debug.contains("ext-secret") && !debug.contains("s3cr3t-key"), "{debug}");
        let debug = format!("{:?}", credential.secret_files());
        assert!(!debug.contains("s3cr3t-key"), "{debug}");
    }
}
