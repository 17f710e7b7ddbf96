//! Google Cloud for terraform-runner over plain REST: an OAuth access token for the service account (a JWT
//! signed with its key, exchanged at the key's `token_uri`) and the cluster's GCS state bucket. Honours
//! `STORAGE_EMULATOR_HOST`, the convention of Google's client libraries for a local GCS, and, for the listings of
//! [`leftovers`], `GOOGLE_CONTAINER_CUSTOM_ENDPOINT` and `GOOGLE_COMPUTE_CUSTOM_ENDPOINT`, the variables the Google
//! provider reads for the same APIs.

mod leftovers;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use process_support::backoff::Backoff;
use reqwest::{Method, StatusCode, Url};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use runner_contract::redact::SharedRedactor;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Error, Result};

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
const STORAGE_URL: &str = "https://storage.googleapis.com";
const CONTAINER_URL: &str = "https://container.googleapis.com/v1/";
const COMPUTE_URL: &str = "https://compute.googleapis.com/compute/v1/";
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const ATTEMPTS: u32 = 4;
/// Runs take up to the provisioning timeout; the token only serves the bucket calls around them.
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

#[derive(Deserialize)]
struct ServiceAccountKey {
    client_email: String,
    private_key: SecretString,
    #[serde(default)]
    private_key_id: Option<String>,
    token_uri: String,
}

pub struct GcpSession {
    http: reqwest::Client,
    storage: Url,
    /// The GKE API's base, `…/v1/`.
    container: Url,
    /// The Compute Engine API's base, `…/compute/v1/`.
    compute: Url,
    key: ServiceAccountKey,
    /// Renewed when GCS refuses it: a destroy can outlast the token's hour before the bucket is removed.
    token: Mutex<SecretString>,
    project: String,
    region: String,
    key_file: PathBuf,
    /// Learns every token minted, so that none is ever printed.
    redactor: SharedRedactor,
}

fn gcp_error(operation: &'static str, message: impl Into<String>) -> Error {
    Error::Gcp { operation, message: message.into() }
}

impl GcpSession {
    /// Reads the mounted key file and gets an access token for it (which `redactor` learns, as every later one).
    pub async fn connect(key_file: &Path, project: &str, region: &str, redactor: SharedRedactor) -> Result<Self> {
        let text = std::fs::read_to_string(key_file)
            .map_err(|error| Error::Input(format!("reading {}: {error}", key_file.display())))?;
        // serde's messages could quote the key; say only which field is wrong.
        let key: ServiceAccountKey = serde_json::from_str(&text).map_err(|error| {
            Error::Input(format!("{} is not a service-account key file (line {})", key_file.display(), error.line()))
        })?;
        let http = reqwest::Client::builder()
            .connect_timeout(CALL_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|error| gcp_error("http client", error.to_string()))?;
        let token = access_token(&http, &key).await?;
        redactor.extend([token.expose_secret().to_owned()]);
        let storage = match std::env::var("STORAGE_EMULATOR_HOST").ok().filter(|host| !host.is_empty()) {
            Some(host) if host.contains("://") => host,
            Some(host) => format!("http://{host}"),
            None => STORAGE_URL.to_owned(),
        };
        let storage = Url::parse(&storage).map_err(|error| Error::Input(format!("STORAGE_EMULATOR_HOST: {error}")))?;
        Ok(GcpSession {
            http,
            storage,
            container: endpoint("GOOGLE_CONTAINER_CUSTOM_ENDPOINT", CONTAINER_URL)?,
            compute: endpoint("GOOGLE_COMPUTE_CUSTOM_ENDPOINT", COMPUTE_URL)?,
            key,
            token: Mutex::new(token),
            project: project.to_owned(),
            region: region.to_owned(),
            key_file: key_file.to_owned(),
            redactor,
        })
    }

    /// Terraform's Google provider and GCS backend read the same key file.
    pub fn terraform_env(&self) -> Vec<(String, String)> {
        vec![
            ("GOOGLE_APPLICATION_CREDENTIALS".to_owned(), self.key_file.display().to_string()),
            ("GOOGLE_PROJECT".to_owned(), self.project.clone()),
            ("GOOGLE_REGION".to_owned(), self.region.clone()),
        ]
    }

    fn bearer(&self) -> String {
        self.token.lock().expect("token lock").expose_secret().to_owned()
    }

    fn url(&self, segments: &[&str]) -> Url {
        joined(&self.storage, segments)
    }

    /// One JSON API call, retried on 429, 5xx and connection failures. Returns the status and the body.
    async fn call(
        &self,
        operation: &'static str,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value)> {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(8));
        let mut renewed = false;
        loop {
            let mut request = self.http.request(method.clone(), url.clone()).bearer_auth(self.bearer());
            if let Some(body) = body {
                request = request.json(body);
            }
            let failure = match request.send().await {
                Ok(response)
                    if response.status() == StatusCode::TOO_MANY_REQUESTS || response.status().is_server_error() =>
                {
                    format!("{} {}", response.status(), response.text().await.unwrap_or_default())
                }
                Ok(response) if response.status() == StatusCode::UNAUTHORIZED && !renewed => {
                    renewed = true;
                    let token = access_token(&self.http, &self.key).await?;
                    self.redactor.extend([token.expose_secret().to_owned()]);
                    *self.token.lock().expect("token lock") = token;
                    continue;
                }
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    let value = if text.trim().is_empty() {
                        Value::Null
                    } else {
                        serde_json::from_str(&text).unwrap_or(Value::String(text))
                    };
                    return Ok((status, value));
                }
                Err(error) => error.to_string(),
            };
            if backoff.attempts() + 1 >= ATTEMPTS {
                return Err(gcp_error(operation, failure));
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    /// Whether the state bucket exists; one that belongs to another project fails the run
    /// ([`Error::ForeignBucket`]): bucket names are global, so the name may be someone else's.
    pub async fn state_bucket_exists(&self, bucket: &str) -> Result<bool> {
        match self.call("storage.buckets.get", Method::GET, self.url(&["storage", "v1", "b", bucket]), None).await? {
            (status, _) if status.is_success() && self.owns(bucket).await? => Ok(true),
            (status, _) if status.is_success() || status == StatusCode::FORBIDDEN => Err(self.foreign(bucket)),
            (StatusCode::NOT_FOUND, _) => Ok(false),
            (status, body) => Err(gcp_error("storage.buckets.get", describe(status, &body))),
        }
    }

    /// Whether the bucket is among the credential's project's buckets.
    async fn owns(&self, bucket: &str) -> Result<bool> {
        let mut url = self.url(&["storage", "v1", "b"]);
        url.query_pairs_mut().append_pair("project", &self.project).append_pair("prefix", bucket);
        match self.call("storage.buckets.list", Method::GET, url, None).await? {
            (status, listing) if status.is_success() => {
                let items = listing["items"].as_array().map(Vec::as_slice).unwrap_or_default();
                Ok(items.iter().any(|item| item["name"].as_str() == Some(bucket)))
            }
            (status, body) => Err(gcp_error("storage.buckets.list", describe(status, &body))),
        }
    }

    fn foreign(&self, bucket: &str) -> Error {
        Error::ForeignBucket { bucket: bucket.to_owned(), expected_owner: format!("project {}", self.project) }
    }

    /// Creates the state bucket if needed and (re)applies its protection: versioning, uniform bucket-level
    /// access and public access prevention. Safe to repeat.
    pub async fn ensure_state_bucket(&self, bucket: &str) -> Result<()> {
        let protection = json!({
            "versioning": {"enabled": true},
            "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": true}, "publicAccessPrevention": "enforced"},
        });
        if !self.state_bucket_exists(bucket).await? {
            let mut create = protection.clone();
            create["name"] = json!(bucket);
            create["location"] = json!(self.region);
            let mut url = self.url(&["storage", "v1", "b"]);
            url.query_pairs_mut().append_pair("project", &self.project);
            match self.call("storage.buckets.insert", Method::POST, url, Some(&create)).await? {
                (status, _) if status.is_success() => tracing::info!(bucket, "created the state bucket"),
                // Created between the check and now: by an earlier attempt of this run, or by someone else.
                (StatusCode::CONFLICT, _) => {
                    if !self.state_bucket_exists(bucket).await? {
                        return Err(self.foreign(bucket));
                    }
                }
                (status, body) => return Err(gcp_error("storage.buckets.insert", describe(status, &body))),
            }
        }
        match self
            .call("storage.buckets.patch", Method::PATCH, self.url(&["storage", "v1", "b", bucket]), Some(&protection))
            .await?
        {
            (status, _) if status.is_success() => Ok(()),
            (status, body) => Err(gcp_error("storage.buckets.patch", describe(status, &body))),
        }
    }

    /// Removes the state bucket with every generation of every object in it. A bucket already gone is fine.
    pub async fn delete_state_bucket(&self, bucket: &str) -> Result<()> {
        let mut page_token: Option<String> = None;
        loop {
            let mut url = self.url(&["storage", "v1", "b", bucket, "o"]);
            url.query_pairs_mut().append_pair("versions", "true");
            if let Some(token) = &page_token {
                url.query_pairs_mut().append_pair("pageToken", token);
            }
            let listing = match self.call("storage.objects.list", Method::GET, url, None).await? {
                (status, body) if status.is_success() => body,
                (StatusCode::NOT_FOUND, _) => return Ok(()),
                (status, body) => return Err(gcp_error("storage.objects.list", describe(status, &body))),
            };
            for item in listing["items"].as_array().into_iter().flatten() {
                let (Some(name), Some(generation)) = (item["name"].as_str(), generation(item)) else { continue };
                let mut url = self.url(&["storage", "v1", "b", bucket, "o", name]);
                url.query_pairs_mut().append_pair("generation", &generation);
                match self.call("storage.objects.delete", Method::DELETE, url, None).await? {
                    (status, _) if status.is_success() || status == StatusCode::NOT_FOUND => {}
                    (status, body) => return Err(gcp_error("storage.objects.delete", describe(status, &body))),
                }
            }
            page_token = listing["nextPageToken"].as_str().map(str::to_owned);
            if page_token.is_none() {
                break;
            }
        }
        match self
            .call("storage.buckets.delete", Method::DELETE, self.url(&["storage", "v1", "b", bucket]), None)
            .await?
        {
            (status, _) if status.is_success() || status == StatusCode::NOT_FOUND => {
                tracing::info!(bucket, "removed the state bucket");
                Ok(())
            }
            (status, body) => Err(gcp_error("storage.buckets.delete", describe(status, &body))),
        }
    }

    /// An object of the state bucket as JSON (text that is not JSON as a JSON string), or `None` when there is no
    /// such object.
    pub async fn read_json_object(&self, bucket: &str, name: &str) -> Result<Option<Value>> {
        let mut url = self.url(&["storage", "v1", "b", bucket, "o", name]);
        url.query_pairs_mut().append_pair("alt", "media");
        match self.call("storage.objects.get", Method::GET, url, None).await? {
            (status, body) if status.is_success() => Ok(Some(body)),
            (StatusCode::NOT_FOUND, _) => Ok(None),
            (status, body) => Err(gcp_error("storage.objects.get", describe(status, &body))),
        }
    }

    /// Terraform's lock object as JSON, with its `ID` set to the object's generation: tofu's GCS backend unlocks a
    /// lock by that generation (it cannot know it when it writes the JSON, whose own ID it ignores). The content is
    /// read at that generation, so that both belong to the same lock.
    pub async fn read_lock_object(&self, bucket: &str, name: &str) -> Result<Option<Value>> {
        let metadata = match self
            .call("storage.objects.get", Method::GET, self.url(&["storage", "v1", "b", bucket, "o", name]), None)
            .await?
        {
            (status, body) if status.is_success() => body,
            (StatusCode::NOT_FOUND, _) => return Ok(None),
            (status, body) => return Err(gcp_error("storage.objects.get", describe(status, &body))),
        };
        let generation = generation(&metadata)
            .ok_or_else(|| gcp_error("storage.objects.get", format!("{name} has no generation")))?;
        let mut url = self.url(&["storage", "v1", "b", bucket, "o", name]);
        url.query_pairs_mut().append_pair("alt", "media").append_pair("generation", &generation);
        match self.call("storage.objects.get", Method::GET, url, None).await? {
            (status, mut lock) if status.is_success() => {
                if let Some(fields) = lock.as_object_mut() {
                    fields.insert("ID".to_owned(), Value::String(generation));
                }
                Ok(Some(lock))
            }
            // Released in between.
            (StatusCode::NOT_FOUND, _) => Ok(None),
            (status, body) => Err(gcp_error("storage.objects.get", describe(status, &body))),
        }
    }

    /// Writes (or overwrites) a JSON object of the state bucket.
    pub async fn write_json_object(&self, bucket: &str, name: &str, body: &Value) -> Result<()> {
        let mut url = self.url(&["upload", "storage", "v1", "b", bucket, "o"]);
        url.query_pairs_mut().append_pair("uploadType", "media").append_pair("name", name);
        match self.call("storage.objects.insert", Method::POST, url, Some(body)).await? {
            (status, _) if status.is_success() => Ok(()),
            (status, body) => Err(gcp_error("storage.objects.insert", describe(status, &body))),
        }
    }

    /// Deletes an object of the state bucket (its live generation; the bucket keeps the history). A missing
    /// object is fine.
    pub async fn delete_object(&self, bucket: &str, name: &str) -> Result<()> {
        let url = self.url(&["storage", "v1", "b", bucket, "o", name]);
        match self.call("storage.objects.delete", Method::DELETE, url, None).await? {
            (status, _) if status.is_success() || status == StatusCode::NOT_FOUND => Ok(()),
            (status, body) => Err(gcp_error("storage.objects.delete", describe(status, &body))),
        }
    }

    pub fn project(&self) -> &str {
        &self.project
    }
}

/// An API's base URL from `variable`, or `default`.
fn endpoint(variable: &str, default: &str) -> Result<Url> {
    let base = std::env::var(variable).ok().filter(|base| !base.is_empty()).unwrap_or_else(|| default.to_owned());
    match Url::parse(&base) {
        Ok(url) if url.scheme() == "http" || url.scheme() == "https" => Ok(url),
        Ok(_) => Err(Error::Input(format!("{variable}: not an http(s) URL"))),
        Err(error) => Err(Error::Input(format!("{variable}: {error}"))),
    }
}

/// `base` with `segments` appended to its path, each percent-encoded.
fn joined(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    url.path_segments_mut().expect("an http(s) URL takes a path").pop_if_empty().extend(segments);
    url
}

/// GCS writes generations as strings; accept numbers too.
fn generation(item: &Value) -> Option<String> {
    match &item["generation"] {
        Value::String(generation) => Some(generation.clone()),
        Value::Number(generation) => Some(generation.to_string()),
        _ => None,
    }
}

fn describe(status: StatusCode, body: &Value) -> String {
    let message = body["error"]["message"].as_str().map(str::to_owned).unwrap_or_else(|| body.to_string());
    format!("{status}: {}", message.chars().take(300).collect::<String>())
}

/// The OAuth 2.0 JWT-bearer grant (RFC 7523) Google's token endpoint takes for service accounts.
async fn access_token(http: &reqwest::Client, key: &ServiceAccountKey) -> Result<SecretString> {
    let assertion = signed_assertion(key, SystemTime::now())?;
    let response = http
        .post(&key.token_uri)
        .form(&[("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", &assertion)])
        .send()
        .await
        .map_err(|error| gcp_error("oauth2 token", error.to_string()))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    match body["access_token"].as_str() {
        Some(token) if status.is_success() => Ok(SecretString::from(token)),
        _ => Err(gcp_error(
            "oauth2 token",
            format!(
                "{status}: {}",
                body["error_description"].as_str().or(body["error"].as_str()).unwrap_or("no token")
            ),
        )),
    }
}

fn signed_assertion(key: &ServiceAccountKey, now: SystemTime) -> Result<String> {
    let issued = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let mut header = json!({"alg": "RS256", "typ": "JWT"});
    if let Some(id) = &key.private_key_id {
        header["kid"] = json!(id);
    }
    let claims = json!({
        "iss": key.client_email,
        "scope": SCOPE,
        "aud": key.token_uri,
        "iat": issued,
        "exp": issued + TOKEN_LIFETIME.as_secs(),
    });
    let message =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let bad_key = |what: &str| Error::Input(format!("the service-account key's private_key {what}"));
    let pem = key.private_key.expose_secret();
    let body: String = pem.lines().filter(|line| !line.starts_with("-----")).map(str::trim).collect();
    let der = STANDARD.decode(body).map_err(|_| bad_key("is not PEM"))?;
    let key_pair = RsaKeyPair::from_pkcs8(&der).map_err(|_| bad_key("is not a PKCS#8 RSA key"))?;
    let mut signature = vec![0; key_pair.public().modulus_len()];
    key_pair
        .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), message.as_bytes(), &mut signature)
        .map_err(|_| bad_key("cannot sign"))?;
    Ok(format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature)))
}
