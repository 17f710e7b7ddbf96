//! Credentials from Kubernetes Secrets, for a platform without auth-service (`APP_CREDENTIALS_SOURCE=secrets`): the
//! id names a Secret in the tenant's namespace (the platform's own namespace, `APP_CREDENTIALS_NAMESPACE`, for a
//! request without a tenant) that carries the label [`CREDENTIAL_LABEL`]. Its keys are the fields of auth-service's
//! answer (the table in [`super`]), each a string: `type`, then `accessKeyId`, `secretAccessKey`, `region`;
//! `roleArn`, `externalId`, `sessionDurationSeconds`; `projectId`, `serviceAccountKey` (the key file),
//! `projectIds` (comma-separated). The answer is checked exactly as auth-service's is. A Secret without the label
//! is not a credential (the namespace's other Secrets cannot be named), and one of another namespace is never
//! read: both answer as an unknown id. Values are never logged, and messages name keys, never values.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Map, Value};

use super::{Error, Resolved, Result};
use crate::domain::tenant::Tenant;

/// The label (value `"true"`) that makes a Secret a credential.
pub const CREDENTIAL_LABEL: &str = "provisioner.kubeopera.io/credential";

/// The keys whose values are numbers or lists in auth-service's answer.
const SESSION_DURATION: &str = "sessionDurationSeconds";
const SERVICE_ACCOUNT_KEY: &str = "serviceAccountKey";
const PROJECT_IDS: &str = "projectIds";

/// Reads credentials from the Secrets of the tenants' namespaces with the process's own identity.
#[derive(Clone)]
pub struct SecretCredentials {
    /// `None` without a cluster: every credential is then unavailable, as every run is.
    client: Option<kube::Client>,
    /// Where the credentials of requests without a tenant are; `None`: such requests name no credential.
    platform_namespace: Option<String>,
    timeout: Duration,
}

impl SecretCredentials {
    pub fn new(client: Option<kube::Client>, platform_namespace: Option<String>, timeout: Duration) -> Self {
        SecretCredentials { client, platform_namespace, timeout }
    }

    /// Resolves the credential `id` within `tenant`: the labelled Secret `id` of the tenant's namespace.
    #[tracing::instrument(skip_all, fields(credential_id = %id, tenant = tenant.map(Tenant::as_str)))]
    pub async fn credential(&self, id: &str, tenant: Option<&Tenant>) -> Result<Resolved> {
        let not_found = || Error::SecretNotFound { id: id.to_owned() };
        let namespace = match tenant {
            Some(tenant) => tenant.as_str(),
            None => self.platform_namespace.as_deref().ok_or_else(not_found)?,
        };
        let Some(client) = self.client.clone() else {
            return Err(Error::KubernetesUnavailable { message: "no Kubernetes cluster is configured".to_owned() });
        };
        let api: Api<Secret> = Api::namespaced(client, namespace);
        let secret = match tokio::time::timeout(self.timeout, api.get_opt(id)).await {
            Err(_) => return Err(Error::Kubernetes { message: "reading the Secret timed out".to_owned() }),
            Ok(Err(error)) => return Err(kubernetes_error(&error)),
            Ok(Ok(secret)) => secret,
        };
        let labelled = |secret: &Secret| {
            secret.metadata.labels.as_ref().and_then(|labels| labels.get(CREDENTIAL_LABEL)) == Some(&"true".to_owned())
        };
        let secret = secret.filter(labelled).ok_or_else(not_found)?;
        let answer = answer_of(id, &secret)?;
        super::wire::parse_credential(id, answer.to_string().as_bytes()).map_err(|error| match error {
            Error::InvalidResponse { message } => Error::InvalidSecret { id: id.to_owned(), message },
            Error::InvalidCredential { invalid, .. } => {
                Error::InvalidSecret { id: id.to_owned(), message: invalid.to_string() }
            }
            other => other,
        })
    }
}

/// A failed read: refused (the provisioner may not read the namespace's Secrets) or the API server unavailable.
fn kubernetes_error(error: &kube::Error) -> Error {
    match error {
        kube::Error::Api(status) if status.code == 403 => Error::Forbidden { message: status.message.clone() },
        kube::Error::Api(status) if status.code < 500 => {
            Error::Kubernetes { message: format!("the API server answered {}: {}", status.code, status.message) }
        }
        other => Error::KubernetesUnavailable { message: other.to_string() },
    }
}

/// The Secret as auth-service would answer for it: its keys as the answer's fields, with their types.
fn answer_of(id: &str, secret: &Secret) -> Result<Value> {
    let invalid = |message: String| Error::InvalidSecret { id: id.to_owned(), message };
    let mut fields = Map::new();
    fields.insert("id".to_owned(), Value::String(id.to_owned()));
    for (key, value) in values(secret).map_err(invalid)? {
        let value = match key.as_str() {
            SESSION_DURATION => Value::from(
                value.trim().parse::<u32>().map_err(|_| invalid(format!("{key} is not a number of seconds")))?,
            ),
            SERVICE_ACCOUNT_KEY => serde_json::from_str::<Value>(&value)
                .ok()
                .filter(Value::is_object)
                .ok_or_else(|| invalid(format!("{key} is not a JSON key file")))?,
            PROJECT_IDS => value.split(',').map(str::trim).filter(|id| !id.is_empty()).map(Value::from).collect(),
            _ => Value::String(value),
        };
        fields.insert(key, value);
    }
    Ok(Value::Object(fields))
}

/// The Secret's values as text (`data`, and `stringData` as a client may leave it unconverted).
fn values(secret: &Secret) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut values = BTreeMap::new();
    for (key, bytes) in secret.data.iter().flatten() {
        let text = String::from_utf8(bytes.0.clone()).map_err(|_| format!("{key} is not UTF-8 text"))?;
        values.insert(key.clone(), text);
    }
    for (key, text) in secret.string_data.iter().flatten() {
        values.insert(key.clone(), text.clone());
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn secret(data: &[(&str, &str)]) -> Secret {
        let data = data.iter().map(|(key, value)| ((*key).to_owned(), ByteString(value.as_bytes().to_vec())));
        Secret { data: Some(data.collect()), ..Secret::default() }
    }

    fn parsed(data: &[(&str, &str)]) -> std::result::Result<Resolved, String> {
        let answer = answer_of("team-gcp", &secret(data)).map_err(|error| error.to_string())?;
        super::super::wire::parse_credential("team-gcp", answer.to_string().as_bytes())
            .map_err(|error| error.to_string())
    }

    #[test]
    fn a_secrets_keys_are_the_answers_fields_with_their_types() {
        let key = r#"{"type": "service_account", "project_id": "team-project", "private_key": "-----BEGIN PRIVATE KEY-----\nk"}"#;
        let resolved = parsed(&[
            ("type", "gcp_service_account"),
            ("projectId", "team-project"),
            ("serviceAccountKey", key),
            ("projectIds", "other-project, third-project"),
        ])
        .unwrap();
        assert_eq!(resolved.project_ids, ["other-project", "third-project"]);
        let role = parsed(&[
            ("type", "aws_assume_role"),
            ("roleArn", "arn:aws:iam::123456789012:role/provisioner"),
            ("sessionDurationSeconds", "3600"),
        ]);
        assert!(role.is_ok(), "{role:?}");
    }

    #[test]
    fn a_malformed_secret_names_the_key_and_never_a_value() {
        let cases: [(&[(&str, &str)], &str); 3] = [
            (&[("type", "aws_access_key"), ("accessKeyId", "AKIAEXAMPLE")], "secretAccessKey"),
            (
                &[
                    ("type", "aws_assume_role"),
                    ("roleArn", "arn:aws:iam::1:role/r"),
                    ("sessionDurationSeconds", "s3cr3t"),
                ],
                "sessionDurationSeconds",
            ),
            (
                &[("type", "gcp_service_account"), ("projectId", "p"), ("serviceAccountKey", "s3cr3t")],
                "serviceAccountKey",
            ),
        ];
        for (data, key) in cases {
            let message = parsed(data).map(|_| ()).unwrap_err();
            assert!(message.contains(key) && !message.contains("s3cr3t"), "{message}");
        }
    }
}
