//! An example REST client of the provisioner, written as host-cluster-controller would: it creates a runtime,
//! waits until it is ready, reads its kubeconfig, upgrades, hibernates, wakes and deletes it, waiting after each
//! change. It follows the rules of `docs/api/rest-client.md`:
//! - every change carries an `Idempotency-Key`, kept across the retries of that change, so a retry after a
//!   timeout or a dropped connection gets the first answer and never queues twice;
//! - an answer that says to try again (429, 503, 500: `Retry-After`) and a connection that failed are retried
//!   after a delay, until the step's deadline; every other error is final and its problem `code` says why;
//! - it waits by reading `GET /api/v1/runtimes/{id}` with `If-None-Match`, until the `Progressing` condition is
//!   `False`, and then reads the `state`.

use std::time::{Duration, Instant};

use reqwest::header::{ETAG, HeaderMap, IF_NONE_MATCH, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// How often to read a runtime while waiting for it.
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// The wait after a failed connection, before the next try.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// The longest `Retry-After` honoured; a longer one is cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The service refused the request; `problem` is its RFC 9457 body (`code`, `detail`, `errors`, ...).
    #[error("{method} {path} answered {status}: {problem}")]
    Refused { method: Method, path: String, status: StatusCode, problem: Value },
    #[error("{what} did not happen within {limit:?}: {last}")]
    Deadline { what: String, limit: Duration, last: String },
    #[error("{0} is not the JSON the service sends")]
    NotJson(String),
    #[error("{what} ended {state}, not {expected}: {runtime}")]
    Unexpected { what: &'static str, state: String, expected: &'static str, runtime: Value },
}

/// One step of a runtime's life, as the client went through it.
#[derive(Debug, Clone)]
pub enum Step {
    Created {
        id: String,
    },
    /// The runtime after a change ended, with the change's name (`provision`, `upgrade`, ...).
    Settled {
        change: &'static str,
        runtime: Value,
    },
    Kubeconfig {
        text: String,
    },
}

/// A REST caller with a bearer token (a ServiceAccount token of a user the service lets in).
pub struct Client {
    http: reqwest::Client,
    base_url: String,
    token: String,
    /// How long one step (a request with its retries, or a wait) may take.
    step_limit: Duration,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    text: String,
}

impl Client {
    pub fn new(base_url: impl Into<String>, token: impl Into<String>, step_limit: Duration) -> Client {
        Client { http: reqwest::Client::new(), base_url: base_url.into(), token: token.into(), step_limit }
    }

    /// Sends one request, again and again while the service says to try later or cannot be reached.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Result<Answer, Error> {
        let deadline = Instant::now() + self.step_limit;
        loop {
            let mut request =
                self.http.request(method.clone(), format!("{}{path}", self.base_url)).bearer_auth(&self.token);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let (delay, last) = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    let headers = response.headers().clone();
                    let text = response.text().await.unwrap_or_default();
                    let retryable = [StatusCode::TOO_MANY_REQUESTS, StatusCode::SERVICE_UNAVAILABLE].contains(&status)
                        || status == StatusCode::INTERNAL_SERVER_ERROR;
                    if !retryable {
                        return Ok(Answer { status, headers, text });
                    }
                    (retry_after(&headers), format!("{status}: {text}"))
                }
                Err(error) => (RECONNECT_DELAY, error.to_string()),
            };
            if Instant::now() + delay > deadline {
                return Err(Error::Deadline { what: format!("{method} {path}"), limit: self.step_limit, last });
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// A request whose answer must be one of `expected`; any other is the service's refusal.
    async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
        expected: &[StatusCode],
    ) -> Result<Answer, Error> {
        let answer = self.send(method.clone(), path, body, headers).await?;
        if expected.contains(&answer.status) {
            return Ok(answer);
        }
        let problem = serde_json::from_str(&answer.text).unwrap_or(Value::String(answer.text));
        Err(Error::Refused { method, path: path.to_owned(), status: answer.status, problem })
    }

    /// Queues a change under a fresh Idempotency-Key, the same for each retry; returns the operation.
    async fn change(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, Error> {
        let key = uuid::Uuid::new_v4().to_string();
        let accepted = [StatusCode::ACCEPTED, StatusCode::OK];
        let answer = self.expect(method, path, body, &[("idempotency-key", &key)], &accepted).await?;
        json(&answer.text)
    }

    /// Creates a runtime (the body of `POST /api/v1/runtimes`); returns its id.
    pub async fn create(&self, request: &Value) -> Result<String, Error> {
        let operation = self.change(Method::POST, "/api/v1/runtimes", Some(request)).await?;
        let id = operation["runtimeId"].as_str().ok_or_else(|| Error::NotJson(operation.to_string()))?;
        Ok(id.to_owned())
    }

    /// Reads the runtime until no change is in progress; returns it as it then is.
    pub async fn wait(&self, id: &str) -> Result<Value, Error> {
        let path = format!("/api/v1/runtimes/{id}");
        let deadline = Instant::now() + self.step_limit;
        let mut seen: Option<(String, Value)> = None;
        loop {
            let etag = seen.as_ref().map(|(etag, _)| etag.as_str());
            let headers: Vec<(&str, &str)> = etag.map(|etag| (IF_NONE_MATCH.as_str(), etag)).into_iter().collect();
            let answer =
                self.expect(Method::GET, &path, None, &headers, &[StatusCode::OK, StatusCode::NOT_MODIFIED]).await?;
            if answer.status == StatusCode::OK {
                let etag = answer.headers.get(ETAG).and_then(|etag| etag.to_str().ok()).unwrap_or_default();
                seen = Some((etag.to_owned(), json(&answer.text)?));
            }
            let runtime = seen.as_ref().map(|(_, runtime)| runtime.clone()).unwrap_or_default();
            if !progressing(&runtime) {
                return Ok(runtime);
            }
            if Instant::now() > deadline {
                let last = runtime["state"].to_string();
                return Err(Error::Deadline { what: format!("{id} settling"), limit: self.step_limit, last });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    pub async fn kubeconfig(&self, id: &str) -> Result<String, Error> {
        let path = format!("/api/v1/provisions/{id}/kubeconfig");
        Ok(self.expect(Method::GET, &path, None, &[], &[StatusCode::OK]).await?.text)
    }

    /// Sends a change of the runtime (`PATCH` with an upgrade, `POST .../hibernate`, `DELETE`, ...) and waits until
    /// it ended; the runtime must then be in `expected`.
    pub async fn change_and_wait(
        &self,
        id: &str,
        (method, suffix, body): (Method, &str, Option<&Value>),
        change: &'static str,
        expected: &'static str,
    ) -> Result<Value, Error> {
        self.change(method, &format!("/api/v1/runtimes/{id}{suffix}"), body).await?;
        let runtime = self.wait(id).await?;
        settled_as(change, runtime, expected)
    }
}

/// A runtime's whole life: create, wait, kubeconfig, upgrade, hibernate, wake, delete, each change waited for.
/// `observe` sees every step as it happens (a controller would update its own resource there).
pub async fn lifecycle(
    client: &Client,
    request: &Value,
    upgrade: &Value,
    mut observe: impl AsyncFnMut(&Step),
) -> Result<(), Error> {
    let id = client.create(request).await?;
    observe(&Step::Created { id: id.clone() }).await;
    let runtime = settled_as("provision", client.wait(&id).await?, "Ready")?;
    observe(&Step::Settled { change: "provision", runtime }).await;
    observe(&Step::Kubeconfig { text: client.kubeconfig(&id).await? }).await;
    let changes = [
        ((Method::PATCH, "", Some(upgrade)), "upgrade", "Ready"),
        ((Method::POST, "/hibernate", None), "hibernate", "Hibernated"),
        ((Method::POST, "/wake", None), "wake_up", "Ready"),
        ((Method::DELETE, "", None), "deprovision", "Deleted"),
    ];
    for (request, change, expected) in changes {
        let runtime = client.change_and_wait(&id, request, change, expected).await?;
        observe(&Step::Settled { change, runtime }).await;
    }
    Ok(())
}

fn settled_as(what: &'static str, runtime: Value, expected: &'static str) -> Result<Value, Error> {
    match runtime["state"].as_str() {
        Some(state) if state == expected => Ok(runtime),
        state => {
            let state = state.unwrap_or("without a state").to_owned();
            Err(Error::Unexpected { what, state, expected, runtime })
        }
    }
}

/// Whether the runtime's `Progressing` condition is `True`: a change is queued or running.
fn progressing(runtime: &Value) -> bool {
    let conditions = runtime["conditions"].as_array().map(Vec::as_slice).unwrap_or_default();
    conditions.iter().any(|condition| condition["type"] == "Progressing" && condition["status"] == "True")
}

/// `Retry-After` in seconds, within bounds; a second when it is missing.
fn retry_after(headers: &HeaderMap) -> Duration {
    let seconds = headers.get(RETRY_AFTER).and_then(|value| value.to_str().ok()?.parse::<u64>().ok()).unwrap_or(1);
    Duration::from_secs(seconds).min(MAX_RETRY_AFTER)
}

fn json(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|_| Error::NotJson(text.chars().take(200).collect()))
}
