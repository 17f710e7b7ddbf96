//! Cloud credentials from auth-service, which holds those that clusters are built with: the client ([`AuthClient`],
//! its settings and errors) and, in [`wire`], the format of auth-service's answers; or, without auth-service, from
//! the tenants' Kubernetes Secrets ([`secrets`], the same fields), as [`Credentials`] selects. Only a credential's id is ever
//! stored; the provisioner resolves it when a request arrives (to fail fast when it is missing) and again in the
//! worker once per run.
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
//! segment, with `Accept: application/json` and, when the runtime or request has a tenant, `Tenant: <tenant>`.
//!
//! **Tenants.** A credential is resolved within a tenant: one of tenant T is served only to requests with
//! `Tenant: T`, one with no tenant (the platform's own) only to requests without the header. For any other
//! credential auth-service answers 404, as for one that does not exist, so that a caller cannot tell another
//! tenant's id from an unknown one; the provisioner answers both the same way too.
//!
//! **Answer 200.** A JSON object whose `id` equals the requested id and whose `type` selects the other fields
//! (unknown fields are ignored):
//!
//! | `type` | Fields |
//! |---|---|
//! | `aws_access_key` | `accessKeyId`, `secretAccessKey`, optional `region` |
//! | `aws_assume_role` | `roleArn` (`arn:<partition>:iam::<12-digit account>:role/<name>`), optional `externalId`, optional `sessionDurationSeconds` (900 to 43200), optional `accessKeyId` and `secretAccessKey` together: the source credentials (without them the runner uses its own workload identity) |
//! | `gcp_service_account` | `projectId`, `serviceAccountKey` (the JSON key file, as an object), optional `projectIds`: the other projects requests may name in `gcp.projectId` (an array of project ids; without it only `projectId`) |
//!
//! **Errors.**
//!
//! | Answer | Result | Retried |
//! |---|---|---|
//! | 404 | `NotFound`: the credential does not exist, or belongs to another tenant | no |
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
use runner_contract::credential::CloudCredential;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::Mutex;

use crate::backoff::Backoff;
use crate::domain::Component;
use crate::domain::tenant::Tenant;

pub mod secrets;
mod source;
mod wire;

pub use secrets::SecretCredentials;
pub use source::{CredentialSource, Credentials};

/// The request header that names the tenant a credential is resolved for.
const TENANT_HEADER: &str = "Tenant";

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
    /// A value of the credential does not have its format (it is never written anywhere).
    #[error("credential {id:?} from auth-service has an invalid {invalid}")]
    InvalidCredential { id: String, invalid: runner_contract::credential_check::InvalidField },
    #[error("OAuth client file {}: {message}", path.display())]
    ClientFile { path: PathBuf, message: String },
    #[error("the token endpoint refused the OAuth client: {message}")]
    Token { message: String },
    /// The HTTP client cannot be built or the base URL cannot take a path.
    #[error("the auth-service client cannot be set up: {message}")]
    Setup { message: String },
    /// No Secret of that name labelled a credential in the tenant's namespace ([`secrets`]).
    #[error(
        "credential {id:?} does not exist: no Secret of that name labelled {} in the tenant's namespace",
        secrets::CREDENTIAL_LABEL
    )]
    SecretNotFound { id: String },
    /// The credential's Secret lacks a key or has one of the wrong shape (named, never its value).
    #[error("credential {id:?} is not a valid credential Secret: {message}")]
    InvalidSecret { id: String, message: String },
    /// The provisioner may not read the Secrets of the tenant's namespace.
    #[error("the provisioner may not read credential Secrets here: {message}")]
    Forbidden { message: String },
    /// The API server refused the read for another reason.
    #[error("reading the credential Secret failed: {message}")]
    Kubernetes { message: String },
    /// The API server did not answer (or answered 5xx): tried again later.
    #[error("the Kubernetes API is unavailable: {message}")]
    KubernetesUnavailable { message: String },
}

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable { .. } | Error::KubernetesUnavailable { .. })
    }

    /// Whether the credential does not exist for the tenant (or is another tenant's: the two are not told apart).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. } | Error::SecretNotFound { .. })
    }

    /// Whether the credential exists but is not one the runner can use.
    pub fn is_invalid_credential(&self) -> bool {
        matches!(self, Error::InvalidCredential { .. } | Error::InvalidSecret { .. })
    }

    /// Where the credential was looked for: auth-service, or the Kubernetes API for a Secret.
    pub fn component(&self) -> Component {
        match self {
            Error::SecretNotFound { .. }
            | Error::InvalidSecret { .. }
            | Error::Forbidden { .. }
            | Error::Kubernetes { .. }
            | Error::KubernetesUnavailable { .. } => Component::Kubernetes,
            _ => Component::AuthService,
        }
    }

    /// What callers and operation statuses may show: the component and what went wrong, never auth-service's
    /// address or the operating system's error text (those go to the log).
    pub fn public_message(&self) -> String {
        match self {
            Error::NotFound { .. }
            | Error::InvalidCredential { .. }
            | Error::SecretNotFound { .. }
            | Error::InvalidSecret { .. } => self.to_string(),
            Error::Forbidden { .. } => "the provisioner may not read the tenant's credential Secrets".to_owned(),
            Error::Kubernetes { .. } => "reading the credential Secret failed".to_owned(),
            Error::KubernetesUnavailable { .. } => "the Kubernetes API is unavailable".to_owned(),
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

/// A credential as auth-service answered it.
#[derive(Debug)]
pub struct Resolved {
    /// What the runner gets.
    pub credential: CloudCredential,
    /// `projectIds`: the GCP projects besides the credential's own that a request may build in (empty for AWS).
    pub project_ids: Vec<String>,
}

/// Where auth-service is and how the provisioner signs in to it (`AUTH_SERVICE_BASE_URL`, `APP_AUTH_OAUTH_PATH`,
/// `APP_AUTH_TIMEOUT`, read in crate::settings).
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub service_base_url: Url,
    pub oauth_client_file: PathBuf,
    /// Time limit of one call to auth-service or its token endpoint.
    pub timeout: Duration,
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

    /// Resolves the credential `id` within `tenant` (see the contract: another tenant's is `NotFound`), retrying
    /// while auth-service is unavailable.
    #[tracing::instrument(skip_all, fields(credential_id = %id, tenant = tenant.map(Tenant::as_str)))]
    pub async fn credential(&self, id: &str, tenant: Option<&Tenant>) -> Result<Resolved> {
        let mut url = self.inner.credentials_url.clone();
        url.path_segments_mut().expect("new() checked that the URL takes a path").push(id);
        let mut attempt = 1;
        let mut backoff = Backoff::new(RETRY_BASE_DELAY, RETRY_MAX_DELAY);
        loop {
            match self.attempt(id, &url, tenant).await {
                Err(error) if error.is_transient() && attempt < MAX_ATTEMPTS => {
                    let delay = backoff.next_delay();
                    tracing::warn!(attempt, ?delay, %error, "auth-service call failed, retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Ok(resolved) => {
                    tracing::debug!(kind = resolved.credential.kind().as_str(), "resolved the credential");
                    return Ok(resolved);
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn attempt(&self, id: &str, url: &Url, tenant: Option<&Tenant>) -> Result<Resolved> {
        let token = self.token().await?;
        let mut response = self.get(url, &token, tenant).await?;
        if response.status() == StatusCode::UNAUTHORIZED {
            tracing::debug!("auth-service refused the access token, retrying with a fresh one");
            self.forget_token(&token).await;
            let token = self.token().await?;
            response = self.get(url, &token, tenant).await?;
        }
        let status = response.status();
        let body = response.bytes().await.map_err(unavailable)?;
        match status {
            StatusCode::OK => wire::parse_credential(id, &body),
            StatusCode::NOT_FOUND => Err(Error::NotFound { id: id.to_owned() }),
            status if status.is_client_error() => Err(Error::Rejected { status, message: excerpt(&body) }),
            status if status.is_server_error() => {
                Err(Error::Unavailable { message: format!("auth-service answered {status}") })
            }
            status => Err(Error::InvalidResponse { message: format!("unexpected status {status}") }),
        }
    }

    /// The call joins the current trace (W3C `traceparent`) when traces are on.
    async fn get(&self, url: &Url, token: &SecretString, tenant: Option<&Tenant>) -> Result<reqwest::Response> {
        let mut request = (self.inner.http.get(url.clone()))
            .bearer_auth(token.expose_secret())
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(tenant) = tenant {
            request = request.header(TENANT_HEADER, tenant.as_str());
        }
        if let Some(traceparent) = crate::telemetry::current_traceparent() {
            request = request.header("traceparent", traceparent);
        }
        request.send().await.map_err(unavailable)
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
        let _ = |client: AuthClient| spawnable(async move { client.credential("id", None).await });
    }
}
