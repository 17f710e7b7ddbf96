//! Client of auth-service, which holds the cloud credentials that clusters are built with. Only a credential's
//! id is ever stored; the provisioner resolves it when a request arrives (to fail fast when it is missing) and
//! again in the worker once per run.
//!
//! # Contract
//!
//! **Authentication.** OAuth2 client credentials. The client file (`APP_AUTH_OAUTH_PATH`, in the Kyma
//! `director.yaml` format) holds `data.client_id`, `data.client_secret` and `data.tokens_endpoint` (an http or
//! https URL). The provisioner posts `grant_type=client_credentials` to the token endpoint with HTTP Basic client
//! authentication, keeps the access token until 30 s before its `expires_in` (5 minutes when the answer has no
//! `expires_in`) and sends it as `Authorization: Bearer <token>`.
//!
//! **Request.** `GET {AUTH_SERVICE_BASE_URL}/api/v1/credentials/{id}`, the id percent-encoded as one path
//! segment, with `Accept: application/json`.
//!
//! **Answer 200.** A JSON object whose `id` equals the requested id and whose `type` selects the other fields
//! (unknown fields are ignored):
//!
//! | `type` | Fields |
//! |---|---|
//! | `aws_access_key` | `accessKeyId`, `secretAccessKey`, optional `region` |
//! | `aws_assume_role` | `roleArn` (`arn:<partition>:iam::<12-digit account>:role/<name>`), optional `externalId`, optional `sessionDurationSeconds` (900 to 43200), optional `accessKeyId` and `secretAccessKey` together: the source credentials (without them the runner uses its own workload identity) |
//! | `gcp_service_account` | `projectId`, `serviceAccountKey` (the JSON key file, as an object) |
//!
//! **Errors.**
//!
//! | Answer | Result | Retried |
//! |---|---|---|
//! | 404 | `NotFound`: the credential does not exist | no |
//! | 401 | the token is replaced by a fresh one and the request sent again; a second 401 is `Rejected` | once |
//! | 403, other 4xx | `Rejected`: the provisioner is not allowed | no |
//! | 5xx, timeout, connection error (also of the token endpoint) | `Unavailable` (transient) | 3 attempts in all, backoff 200 ms then 400 ms plus jitter |
//! | the token endpoint refuses the client (4xx, OAuth error) | `Token` | no |
//! | 200 that is not JSON or not the shape above | `InvalidResponse`, naming the field but never a secret value | no |
//!
//! Every call has a timeout (connect and whole request). Tokens and secret values are never logged.
//!
//! **Runner files.** The resolved [`CloudCredential`] goes to the runner as the files of the run's credentials
//! Secret, as `runner_contract::credential` defines them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oauth2::basic::{BasicClient, BasicErrorResponse};
use oauth2::{ClientId, ClientSecret, EndpointNotSet, EndpointSet, RequestTokenError, TokenResponse, TokenUrl};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, de};
use tokio::sync::Mutex;

use runner_contract::credential::{AwsKeyPair, CloudCredential, CredentialType};

use crate::backoff::Backoff;
use crate::settings::AuthSettings;

/// Attempts of one [`AuthClient::credential`] call when auth-service is unavailable.
const MAX_ATTEMPTS: u32 = 3;
const RETRY_BASE_DELAY: Duration = Duration::from_millis(200);
const RETRY_MAX_DELAY: Duration = Duration::from_secs(2);
/// A token is replaced this long before it expires, so that it does not expire in flight.
const TOKEN_REFRESH_MARGIN: Duration = Duration::from_secs(30);
const TOKEN_LIFETIME_WITHOUT_EXPIRY: Duration = Duration::from_secs(5 * 60);
/// The most of an error answer's body quoted in [`Error::Rejected`].
const EXCERPT_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("credential {id:?} does not exist in auth-service")]
    NotFound { id: String },
    #[error("auth-service rejected the request with {status}: {message}")]
    Rejected { status: StatusCode, message: String },
    #[error("auth-service is unavailable: {message}")]
    Unavailable { message: String },
    #[error("auth-service sent an invalid response: {message}")]
    InvalidResponse { message: String },
    #[error("OAuth client file {}: {message}", path.display())]
    ClientFile { path: PathBuf, message: String },
    #[error("the token endpoint refused the OAuth client: {message}")]
    Token { message: String },
    /// The HTTP client cannot be built or the base URL cannot take a path.
    #[error("the auth-service client cannot be set up: {message}")]
    Setup { message: String },
}

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }

    /// What callers and operation statuses may show: the component and what went wrong, never auth-service's
    /// address or the operating system's error text (those go to the log).
    pub fn public_message(&self) -> String {
        match self {
            Error::NotFound { .. } => self.to_string(),
            Error::Rejected { status, .. } => format!("auth-service rejected the request with {status}"),
            Error::Unavailable { .. } => "auth-service is unavailable (no answer, or a server error)".to_owned(),
            Error::InvalidResponse { .. } => "auth-service sent an invalid response".to_owned(),
            Error::ClientFile { .. } | Error::Token { .. } | Error::Setup { .. } => {
                "the provisioner cannot authenticate to auth-service (OAuth client or token endpoint)".to_owned()
            }
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

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

fn valid_role_arn(arn: &str) -> bool {
    // arn:<partition>:iam::<account>:role/<name>
    match arn.split(':').collect::<Vec<_>>()[..] {
        ["arn", partition, "iam", "", account, resource] => {
            partition.starts_with("aws")
                && account.len() == 12
                && account.bytes().all(|byte| byte.is_ascii_digit())
                && resource.strip_prefix("role/").is_some_and(|name| !name.is_empty())
        }
        _ => false,
    }
}

impl WireCredential {
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
                if !valid_role_arn(&role_arn) {
                    return Err(format!(
                        "roleArn {role_arn:?} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)"
                    ));
                }
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

/// Parses a 200 answer; the message names what is wrong and never holds a secret value.
fn parse_credential(requested_id: &str, body: &[u8]) -> Result<CloudCredential, String> {
    let wire: WireCredential = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(body))
        .map_err(|error| error.to_string())?;
    wire.into_credential(requested_id)
}

type OAuthClient = BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// Reads the OAuth client file (`data.client_id`, `data.client_secret`, `data.tokens_endpoint`).
fn read_client_file(path: &Path) -> Result<OAuthClient> {
    let error = |message: String| Error::ClientFile { path: path.to_owned(), message };
    let file = config::Config::builder()
        .add_source(config::File::from(path).format(config::FileFormat::Yaml))
        .build()
        .map_err(|cause| error(cause.to_string()))?;
    let field = |key: &str| match file.get_string(key) {
        Ok(value) if !value.trim().is_empty() => Ok(value.trim().to_owned()),
        Ok(_) => Err(error(format!("{key} is empty"))),
        Err(config::ConfigError::NotFound(_)) => Err(error(format!("{key} is missing"))),
        // Not the cause: it could quote the value, and this may be the secret.
        Err(_) => Err(error(format!("{key} must be a string"))),
    };
    let client_id = field("data.client_id")?;
    let client_secret = field("data.client_secret")?;
    let tokens_endpoint = field("data.tokens_endpoint")?;
    let token_url = TokenUrl::new(tokens_endpoint.clone())
        .ok()
        .filter(|url| matches!(url.url().scheme(), "http" | "https"))
        .ok_or_else(|| error(format!("data.tokens_endpoint {tokens_endpoint:?} is not an http or https URL")))?;
    Ok(BasicClient::new(ClientId::new(client_id))
        .set_client_secret(ClientSecret::new(client_secret))
        .set_token_uri(token_url))
}

/// An error and its causes on one line: reqwest's own message omits the cause (such as "connection refused").
fn describe(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

fn unavailable(error: reqwest::Error) -> Error {
    Error::Unavailable { message: describe(&error) }
}

/// The start of an error answer's body, for the error message.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "no details".to_owned();
    }
    text.chars().take(EXCERPT_CHARS).map(|character| if character.is_control() { ' ' } else { character }).collect()
}

/// A failure to reach the token endpoint (or its 5xx), as opposed to the endpoint refusing the client.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct TokenTransportError(String);

/// The HTTP function the oauth2 crate calls, on the one reqwest client. It takes the client by value: a future
/// that borrows it trips rustc's higher-ranked `Send` check, and `credential` calls could no longer be spawned.
async fn send_token_request(
    http: reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, TokenTransportError> {
    let transport = |error: reqwest::Error| TokenTransportError(describe(&error));
    let request = reqwest::Request::try_from(request).map_err(transport)?;
    let response = http.execute(request).await.map_err(transport)?;
    let status = response.status();
    if status.is_server_error() {
        return Err(TokenTransportError(format!("the token endpoint answered {status}")));
    }
    let mut builder = oauth2::http::Response::builder().status(status);
    for (name, value) in response.headers() {
        builder = builder.header(name, value);
    }
    let body = response.bytes().await.map_err(transport)?;
    builder.body(body.to_vec()).map_err(|error| TokenTransportError(error.to_string()))
}

fn token_error(error: RequestTokenError<TokenTransportError, BasicErrorResponse>) -> Error {
    match error {
        RequestTokenError::Request(error) => Error::Unavailable { message: error.0 },
        RequestTokenError::ServerResponse(response) => Error::Token { message: response.to_string() },
        // Only the path: the body may hold a token.
        RequestTokenError::Parse(error, _) => {
            Error::Token { message: format!("unparsable answer (at {})", error.path()) }
        }
        RequestTokenError::Other(message) => Error::Token { message },
    }
}

struct CachedToken {
    value: SecretString,
    refresh_at: Instant,
}

/// Resolves cloud credentials in auth-service. Cheap to clone: clones share the HTTP client and the token.
#[derive(Clone)]
pub struct AuthClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    oauth: OAuthClient,
    credentials_url: Url,
    /// Held while a token is fetched, so that concurrent callers wait for one fetch instead of each making one.
    token: Mutex<Option<CachedToken>>,
}

impl AuthClient {
    /// Reads and checks the OAuth client file. `timeout` bounds each HTTP call, connecting included. The TLS
    /// crypto provider must be installed ([`crate::install_crypto_provider`]).
    pub fn new(settings: &AuthSettings, timeout: Duration) -> Result<Self> {
        let oauth = read_client_file(&settings.oauth_client_file)?;
        let mut credentials_url = settings.service_base_url.clone();
        credentials_url
            .path_segments_mut()
            .map_err(|()| Error::Setup {
                message: format!("base URL {} cannot take a path", settings.service_base_url),
            })?
            .pop_if_empty()
            .extend(["api", "v1", "credentials"]);
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            // The token endpoint must not redirect the client secret elsewhere (RFC 6749 section 4.4).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| Error::Setup { message: describe(&error) })?;
        Ok(AuthClient { inner: Arc::new(Inner { http, oauth, credentials_url, token: Mutex::new(None) }) })
    }

    /// Resolves the credential `id`, retrying while auth-service is unavailable.
    #[tracing::instrument(skip_all, fields(credential_id = %id))]
    pub async fn credential(&self, id: &str) -> Result<CloudCredential> {
        let mut url = self.inner.credentials_url.clone();
        url.path_segments_mut().expect("new() checked that the URL takes a path").push(id);
        let mut attempt = 1;
        let mut backoff = Backoff::new(RETRY_BASE_DELAY, RETRY_MAX_DELAY);
        loop {
            match self.attempt(id, &url).await {
                Err(error) if error.is_transient() && attempt < MAX_ATTEMPTS => {
                    let delay = backoff.next_delay();
                    tracing::warn!(attempt, ?delay, %error, "auth-service call failed, retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Ok(credential) => {
                    tracing::debug!(kind = credential.kind().as_str(), "resolved the credential");
                    return Ok(credential);
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn attempt(&self, id: &str, url: &Url) -> Result<CloudCredential> {
        let token = self.token().await?;
        let mut response = self.get(url, &token).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            tracing::debug!("auth-service refused the access token, retrying with a fresh one");
            self.forget_token(&token).await;
            let token = self.token().await?;
            response = self.get(url, &token).await?;
        }
        let status = response.status();
        let body = response.bytes().await.map_err(unavailable)?;
        match status {
            StatusCode::OK => parse_credential(id, &body).map_err(|message| Error::InvalidResponse { message }),
            StatusCode::NOT_FOUND => Err(Error::NotFound { id: id.to_owned() }),
            status if status.is_client_error() => Err(Error::Rejected { status, message: excerpt(&body) }),
            status if status.is_server_error() => {
                Err(Error::Unavailable { message: format!("auth-service answered {status}") })
            }
            status => Err(Error::InvalidResponse { message: format!("unexpected status {status}") }),
        }
    }

    async fn get(&self, url: &Url, token: &SecretString) -> Result<reqwest::Response> {
        self.inner
            .http
            .get(url.clone())
            .bearer_auth(token.expose_secret())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(unavailable)
    }

    /// The cached access token, or a new one when it is missing or about to expire.
    async fn token(&self) -> Result<SecretString> {
        let mut cached = self.inner.token.lock().await;
        if let Some(token) = cached.as_ref().filter(|token| Instant::now() < token.refresh_at) {
            return Ok(token.value.clone());
        }
        let client = self.inner.http.clone();
        let http = move |request| send_token_request(client.clone(), request);
        let response =
            self.inner.oauth.exchange_client_credentials().request_async(&http).await.map_err(token_error)?;
        let lifetime = response
            .expires_in()
            .map_or(TOKEN_LIFETIME_WITHOUT_EXPIRY, |expires_in| expires_in.saturating_sub(TOKEN_REFRESH_MARGIN));
        tracing::debug!(?lifetime, "obtained an auth-service access token");
        let value = SecretString::from(response.access_token().secret().as_str());
        *cached = Some(CachedToken { value: value.clone(), refresh_at: Instant::now() + lifetime });
        Ok(value)
    }

    /// Drops the cached token if it is the one auth-service refused (another caller may have replaced it).
    async fn forget_token(&self, refused: &SecretString) {
        let mut cached = self.inner.token.lock().await;
        if cached.as_ref().is_some_and(|token| token.value.expose_secret() == refused.expose_secret()) {
            *cached = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use runner_contract::Cloud;

    use super::*;

    fn parse(json: serde_json::Value) -> Result<CloudCredential, String> {
        parse_credential("cred-1", json.to_string().as_bytes())
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

    #[test]
    fn client_file_errors_name_the_field() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("oauth.yaml");
        let cases = [
            ("data:\n  client_secret: s3cr3t\n  tokens_endpoint: http://h/token\n", "data.client_id is missing"),
            ("data:\n  client_id: c\n  tokens_endpoint: http://h/token\n", "data.client_secret is missing"),
            ("data:\n  client_id: c\n  client_secret: s3cr3t\n", "data.tokens_endpoint is missing"),
            (
                "data:\n  client_id: c\n  client_secret: ''\n  tokens_endpoint: http://h/t\n",
                "data.client_secret is empty",
            ),
            (
                "data:\n  client_id: c\n  client_secret: [s3cr3t]\n  tokens_endpoint: http://h/t\n",
                "data.client_secret must be a string",
            ),
            ("data:\n  client_id: c\n  client_secret: s3cr3t\n  tokens_endpoint: ftp://h/t\n", "data.tokens_endpoint"),
            ("data: [unclosed\n", ""),
        ];
        for (content, expected) in cases {
            std::fs::write(&path, content).unwrap();
            let message = read_client_file(&path).map(|_| ()).unwrap_err().to_string();
            assert!(message.starts_with("OAuth client file "), "{message}");
            assert!(message.contains(expected), "{content}: {message}");
            assert!(!message.contains("s3cr3t"), "{message}");
        }
        std::fs::write(&path, "data:\n  client_id: c\n  client_secret: s\n  tokens_endpoint: https://h/t\n").unwrap();
        assert!(read_client_file(&path).is_ok());
        let missing = read_client_file(&directory.path().join("absent.yaml")).map(|_| ()).unwrap_err();
        assert!(matches!(missing, Error::ClientFile { .. }), "{missing}");
    }

    #[test]
    fn credential_calls_can_be_spawned() {
        // Compiling is the test: see `send_token_request`.
        fn spawnable(_: impl Future + Send + 'static) {}
        let _ = |client: AuthClient| spawnable(async move { client.credential("id").await });
    }
}
