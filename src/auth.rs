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
//! **Runner files.** [`CloudCredential::secret_files`] is what the run's credentials Secret holds, mounted into
//! the terraform-runner: `credential_type` always; AWS: `aws_access_key_id` and `aws_secret_access_key` (when
//! there are keys), `aws_region` (when given), `role_arn`, `external_id` and `session_duration_seconds` (assume
//! role, when given); GCP: `service_account.json` and `project_id`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oauth2::basic::{BasicClient, BasicErrorResponse};
use oauth2::{ClientId, ClientSecret, EndpointNotSet, EndpointSet, RequestTokenError, TokenResponse, TokenUrl};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, de};
use tokio::sync::Mutex;

use crate::backoff::Backoff;
use crate::domain::Cloud;
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

/// The service-account key's file in the run's credentials Secret.
pub const GCP_KEY_FILE: &str = "service_account.json";

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
    /// The `type` of the credential in auth-service.
    pub fn kind(&self) -> &'static str {
        match self {
            CloudCredential::AwsAccessKey { .. } => "aws_access_key",
            CloudCredential::AwsAssumeRole { .. } => "aws_assume_role",
            CloudCredential::GcpServiceAccount { .. } => "gcp_service_account",
        }
    }

    pub fn cloud(&self) -> Cloud {
        match self {
            CloudCredential::AwsAccessKey { .. } | CloudCredential::AwsAssumeRole { .. } => Cloud::Aws,
            CloudCredential::GcpServiceAccount { .. } => Cloud::Gcp,
        }
    }

    /// File name → content of the run's credentials Secret, which is mounted into the terraform-runner.
    pub fn secret_files(&self) -> BTreeMap<String, SecretString> {
        let mut files = BTreeMap::new();
        let mut add = |name: &str, value: &str| {
            files.insert(name.to_owned(), SecretString::from(value));
        };
        add("credential_type", self.kind());
        match self {
            CloudCredential::AwsAccessKey { access_key_id, secret_access_key, region } => {
                add("aws_access_key_id", access_key_id);
                add("aws_secret_access_key", secret_access_key.expose_secret());
                if let Some(region) = region {
                    add("aws_region", region);
                }
            }
            CloudCredential::AwsAssumeRole { role_arn, external_id, session_duration_seconds, source } => {
                add("role_arn", role_arn);
                if let Some(external_id) = external_id {
                    add("external_id", external_id.expose_secret());
                }
                if let Some(seconds) = session_duration_seconds {
                    add("session_duration_seconds", &seconds.to_string());
                }
                if let Some(source) = source {
                    add("aws_access_key_id", &source.access_key_id);
                    add("aws_secret_access_key", source.secret_access_key.expose_secret());
                }
            }
            CloudCredential::GcpServiceAccount { project_id, service_account_key } => {
                add(GCP_KEY_FILE, service_account_key.expose_secret());
                add("project_id", project_id);
            }
        }
        files
    }

    /// Reads back what [`CloudCredential::secret_files`] wrote (terraform-runner, from the mounted Secret).
    /// The error names the missing or bad file.
    pub fn from_secret_files(files: &BTreeMap<String, SecretString>) -> Result<Self, String> {
        let text = |name: &str| files.get(name).map(|value| value.expose_secret().trim().to_owned());
        let required = |name: &str| text(name).filter(|value| !value.is_empty()).ok_or(format!("{name} is missing"));
        let secret = |name: &str| required(name).map(SecretString::from);
        let key_pair = || -> Result<Option<AwsKeyPair>, String> {
            match text("aws_access_key_id").filter(|id| !id.is_empty()) {
                None => Ok(None),
                Some(access_key_id) => {
                    Ok(Some(AwsKeyPair { access_key_id, secret_access_key: secret("aws_secret_access_key")? }))
                }
            }
        };
        match required("credential_type")?.as_str() {
            "aws_access_key" => {
                let AwsKeyPair { access_key_id, secret_access_key } =
                    key_pair()?.ok_or("aws_access_key_id is missing")?;
                Ok(CloudCredential::AwsAccessKey { access_key_id, secret_access_key, region: text("aws_region") })
            }
            "aws_assume_role" => Ok(CloudCredential::AwsAssumeRole {
                role_arn: required("role_arn")?,
                external_id: text("external_id").filter(|id| !id.is_empty()).map(SecretString::from),
                session_duration_seconds: text("session_duration_seconds")
                    .map(|seconds| {
                        seconds.parse().map_err(|_| format!("session_duration_seconds {seconds:?} is not a number"))
                    })
                    .transpose()?,
                source: key_pair()?,
            }),
            "gcp_service_account" => Ok(CloudCredential::GcpServiceAccount {
                project_id: required("project_id")?,
                service_account_key: secret(GCP_KEY_FILE)?,
            }),
            other => Err(format!(
                "credential_type {other:?} is not one of aws_access_key, aws_assume_role, gcp_service_account"
            )),
        }
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

fn required<T>(value: Option<T>, field: &str, kind: &str) -> Result<T, String> {
    value.ok_or_else(|| format!("{field} is required for type {kind}"))
}

fn required_text(value: Option<String>, field: &str, kind: &str) -> Result<String, String> {
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
        let kind = self.kind.as_str();
        match kind {
            "aws_access_key" => Ok(CloudCredential::AwsAccessKey {
                access_key_id: required_text(self.access_key_id, "accessKeyId", kind)?,
                secret_access_key: required(self.secret_access_key, "secretAccessKey", kind)?.0,
                region: self.region.filter(|region| !region.is_empty()),
            }),
            "aws_assume_role" => {
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
            "gcp_service_account" => Ok(CloudCredential::GcpServiceAccount {
                project_id: required_text(self.project_id, "projectId", kind)?,
                service_account_key: required(self.service_account_key, "serviceAccountKey", kind)?.0,
            }),
            other => Err(format!("unknown credential type {other:?}")),
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
                    tracing::debug!(kind = credential.kind(), "resolved the credential");
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
    use super::*;

    fn parse(json: serde_json::Value) -> Result<CloudCredential, String> {
        parse_credential("cred-1", json.to_string().as_bytes())
    }

    fn json_credential(json: serde_json::Value) -> CloudCredential {
        parse_credential("c", json.to_string().as_bytes()).expect("a valid credential")
    }

    #[test]
    fn secret_files_read_back_into_the_same_credential() {
        let credentials = [
            json_credential(serde_json::json!({
                "id": "c", "type": "aws_access_key", "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "k", "region": "eu-west-1",
            })),
            json_credential(serde_json::json!({
                "id": "c", "type": "aws_assume_role", "roleArn": "arn:aws:iam::123456789012:role/p",
                "externalId": "ext", "sessionDurationSeconds": 3600, "accessKeyId": "AKIASOURCE", "secretAccessKey": "s",
            })),
            json_credential(serde_json::json!({
                "id": "c", "type": "aws_assume_role", "roleArn": "arn:aws:iam::123456789012:role/p",
            })),
            json_credential(serde_json::json!({
                "id": "c", "type": "gcp_service_account", "projectId": "p", "serviceAccountKey": {"private_key": "k"},
            })),
        ];
        for credential in credentials {
            let files = credential.secret_files();
            let read = CloudCredential::from_secret_files(&files).unwrap();
            let exposed = |files: BTreeMap<String, SecretString>| -> BTreeMap<String, String> {
                files.into_iter().map(|(name, value)| (name, value.expose_secret().to_owned())).collect()
            };
            assert_eq!(exposed(read.secret_files()), exposed(files), "{}", credential.kind());
        }
    }

    #[test]
    fn unreadable_secret_files_name_the_file() {
        let files = |pairs: &[(&str, &str)]| -> BTreeMap<String, SecretString> {
            pairs.iter().map(|(name, value)| (name.to_string(), SecretString::from(*value))).collect()
        };
        let error = |pairs| CloudCredential::from_secret_files(&files(pairs)).unwrap_err();
        assert_eq!(error(&[]), "credential_type is missing");
        assert_eq!(error(&[("credential_type", "aws_access_key")]), "aws_access_key_id is missing");
        assert_eq!(
            error(&[("credential_type", "aws_access_key"), ("aws_access_key_id", "A")]),
            "aws_secret_access_key is missing"
        );
        assert_eq!(error(&[("credential_type", "aws_assume_role")]), "role_arn is missing");
        // Empty optional files (a Secret key with no value) count as absent, not as empty values for STS.
        let read = CloudCredential::from_secret_files(&files(&[
            ("credential_type", "aws_assume_role"),
            ("role_arn", "arn:aws:iam::123456789012:role/p"),
            ("external_id", ""),
            ("aws_access_key_id", "\n"),
        ]))
        .unwrap();
        assert!(matches!(read, CloudCredential::AwsAssumeRole { external_id: None, source: None, .. }), "{read:?}");
        assert!(error(&[("credential_type", "azure")]).starts_with("credential_type \"azure\""));
    }

    #[test]
    fn parses_an_aws_access_key() {
        let credential = parse(serde_json::json!({
            "id": "cred-1", "type": "aws_access_key",
            "accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "s3cr3t-key", "region": "eu-west-1",
        }))
        .unwrap();
        assert_eq!(credential.kind(), "aws_access_key");
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
        assert_eq!(credential.kind(), "aws_assume_role");
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
        assert_eq!(credential.kind(), "gcp_service_account");
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
