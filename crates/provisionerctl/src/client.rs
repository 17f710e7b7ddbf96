//! The provisioner's REST API over HTTP: a refusal (4xx) carries the server's problem, in words; a server that
//! cannot be reached or fails (5xx) is told apart, since a retry may help there.

use std::io::Write;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::Error;
use crate::plain_http::check_token_transport;
use crate::tls::Tls;

/// Every request gives up after this long: a wait asks again on its own schedule.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Client {
    http: reqwest::Client,
    /// For followed logs: no overall timeout.
    streaming: reqwest::Client,
    server: Url,
    token: Option<SecretString>,
    tenant: Option<String>,
}

/// What a request answered, once it succeeded.
pub enum Body {
    Json(Value),
    Text(String),
}

/// A server's URL, which must be http or https.
pub fn server_url(text: &str) -> Result<Url, String> {
    Url::parse(text)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .ok_or_else(|| format!("{text:?} is not an http(s) URL"))
}

impl Client {
    /// A client of `server` that sends `token` with every request; refused before any connection when the token
    /// would cross plain HTTP where it may not (`plain_http.rs`).
    pub fn new(server: Url, token: Option<SecretString>, plain_http_allowed: bool) -> Result<Client, Error> {
        Client::with_tls(server, token, plain_http_allowed, &Tls::default())
    }

    /// [`Client::new`], checking the server's certificate as `tls` says.
    pub fn with_tls(
        server: Url,
        token: Option<SecretString>,
        plain_http_allowed: bool,
        tls: &Tls,
    ) -> Result<Client, Error> {
        if token.is_some() {
            check_token_transport(&server, plain_http_allowed)?;
        }
        let failed = |error: reqwest::Error| Error::Local(format!("cannot set up HTTP: {error}"));
        let http = tls.apply(reqwest::Client::builder().timeout(REQUEST_TIMEOUT))?.build().map_err(failed)?;
        let streaming =
            tls.apply(reqwest::Client::builder().connect_timeout(REQUEST_TIMEOUT))?.build().map_err(failed)?;
        Ok(Client { http, streaming, server, token, tenant: None })
    }

    /// This client, naming `tenant` in every request's `Tenant` header.
    pub fn acting_for(self, tenant: Option<String>) -> Client {
        Client { tenant, ..self }
    }

    /// A JSON answer to `method path?query` with `body`.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        match self.send(method, path, query, body).await? {
            Body::Json(value) => Ok(value),
            Body::Text(text) => Err(self.unavailable(format!("answered with no JSON: {}", shortened(&text)))),
        }
    }

    /// The answer to `method path` as text.
    pub async fn text(&self, method: Method, path: &str) -> Result<String, Error> {
        match self.send(method, path, &[], None).await? {
            Body::Text(text) => Ok(text),
            Body::Json(value) => Ok(value.to_string()),
        }
    }

    /// Copies the answer to `GET path?query` to `out` as it arrives (a followed log), without the request
    /// timeout: a followed run may print nothing for long.
    pub async fn stream(&self, path: &str, query: &[(&str, &str)], out: &mut dyn Write) -> Result<(), Error> {
        let mut response = self
            .request(&self.streaming, Method::GET, path, query, None)
            .send()
            .await
            .map_err(|error| self.unavailable(with_causes(&error)))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.map_err(|error| self.unavailable(error.to_string()))?;
            return Err(self.failure(status, &text));
        }
        while let Some(chunk) = response.chunk().await.map_err(|error| self.unavailable(error.to_string()))? {
            out.write_all(&chunk)
                .and_then(|()| out.flush())
                .map_err(|error| Error::Local(format!("cannot print: {error}")))?;
        }
        Ok(())
    }

    fn request(
        &self,
        http: &reqwest::Client,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> reqwest::RequestBuilder {
        let mut url = self.server.clone();
        url.set_path(path);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let mut request = http.request(method, url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose_secret());
        }
        if let Some(tenant) = &self.tenant {
            request = request.header("Tenant", tenant);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        request
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Body, Error> {
        let request = self.request(&self.http, method, path, query, body);
        let response = request.send().await.map_err(|error| self.unavailable(with_causes(&error)))?;
        let status = response.status();
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.contains("json"));
        let text = response.text().await.map_err(|error| self.unavailable(error.to_string()))?;
        if status.is_success() {
            return Ok(match serde_json::from_str(&text) {
                Ok(value) if is_json => Body::Json(value),
                _ => Body::Text(text),
            });
        }
        Err(self.failure(status, &text))
    }

    /// A refusal (4xx) or a failure of the server, with its problem in words.
    fn failure(&self, status: StatusCode, text: &str) -> Error {
        let problem = problem_text(status, text);
        if status.is_client_error() {
            Error::Refused { status: status.as_u16(), message: problem }
        } else {
            self.unavailable(problem)
        }
    }

    fn unavailable(&self, message: String) -> Error {
        Error::Unavailable { server: self.server.to_string(), message }
    }
}

/// `/api/v1/<collection>/<id><rest>`; an id is checked here, so that it cannot name another path.
pub fn path(collection: &str, id: &str, rest: &str) -> Result<String, Error> {
    let plain =
        !id.is_empty() && id.chars().all(|character| character.is_ascii_alphanumeric() || "-_.".contains(character));
    if !plain || id.starts_with('.') {
        return Err(Error::Local(format!("{id:?} is not an id (letters, digits, '-', '_' and '.')")));
    }
    Ok(format!("/api/v1/{collection}/{id}{rest}"))
}

/// A problem (RFC 9457) in words: its title and detail, and the field it names.
fn problem_text(status: StatusCode, text: &str) -> String {
    let Ok(problem) = serde_json::from_str::<Value>(text) else {
        return format!("{status}: {}", shortened(text));
    };
    let field = |key: &str| problem.get(key).and_then(Value::as_str);
    let mut message = match (field("code"), field("title"), field("detail")) {
        (code, Some(title), Some(detail)) => {
            format!("{}{title}: {detail}", code.map(|c| format!("{c}: ")).unwrap_or_default())
        }
        _ => shortened(text),
    };
    if let Some(name) = field("field") {
        message.push_str(&format!(" (field {name})"));
    }
    message
}

/// An error with its causes (a refused certificate is a cause of "error sending request").
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text.push_str(&format!(": {error}"));
        cause = error.source();
    }
    text
}

fn shortened(text: &str) -> String {
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_reads_as_its_code_title_detail_and_field() {
        let problem = r#"{"type":"/api/v1/problems/invalid_input","title":"Invalid input","status":400,
            "detail":"runtimeInput.name must not be empty","code":"invalid_input","field":"runtimeInput.name"}"#;
        assert_eq!(
            problem_text(StatusCode::BAD_REQUEST, problem),
            "invalid_input: Invalid input: runtimeInput.name must not be empty (field runtimeInput.name)"
        );
        assert_eq!(problem_text(StatusCode::BAD_GATEWAY, "upstream down"), "502 Bad Gateway: upstream down");
    }

    #[test]
    fn an_id_cannot_name_another_path() {
        assert_eq!(path("runtimes", "0190b8a6-7f3e", "/wake").unwrap(), "/api/v1/runtimes/0190b8a6-7f3e/wake");
        for id in ["", "..", "a/b", "a?b", "a b", ".hidden"] {
            assert!(path("runtimes", id, "").is_err(), "{id:?}");
        }
    }
}
