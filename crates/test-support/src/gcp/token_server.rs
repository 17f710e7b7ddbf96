//! Google's OAuth 2.0 token endpoint for service accounts, verifying assertions as Google does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::service_account::unix_now;
use super::{CLIENT_EMAIL, JWT_BEARER_GRANT, SCOPE_CLOUD_PLATFORM, SCOPE_DEVSTORAGE_READ_WRITE};

struct TokenState {
    public_key_der: Vec<u8>,
    token_uri: String,
    requests: AtomicUsize,
    issued: Mutex<Vec<String>>,
    accepted_claims: Mutex<Vec<Value>>,
    refusals: Mutex<Vec<String>>,
}

/// Google's OAuth 2.0 token endpoint for service accounts, on 127.0.0.1: `POST /token` with the form
/// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`. It verifies the assertion as Google
/// does (RS256 signature with the key's public half, iss = [`CLIENT_EMAIL`], aud = [`GoogleTokenServer::token_uri`],
/// a storage or cloud-platform scope, iat/exp sane and at most an hour apart) and answers
/// `{"access_token": "ya29.kubeopera-test-...", "expires_in": 3599, "token_type": "Bearer"}`, or 400
/// `{"error": "invalid_grant" (or "invalid_request", "unsupported_grant_type"), "error_description": ...}`.
/// Stops on drop.
pub struct GoogleTokenServer {
    state: Arc<TokenState>,
    task: tokio::task::JoinHandle<()>,
}

impl GoogleTokenServer {
    /// `public_key_der`: PKCS#1 `RSAPublicKey` DER ([`super::TestKeyPair::public_key_der`]).
    pub async fn start(public_key_der: &[u8]) -> GoogleTokenServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the token server");
        let address = listener.local_addr().expect("token server address");
        let state = Arc::new(TokenState {
            public_key_der: public_key_der.to_vec(),
            token_uri: format!("http://{address}/token"),
            requests: AtomicUsize::new(0),
            issued: Mutex::new(Vec::new()),
            accepted_claims: Mutex::new(Vec::new()),
            refusals: Mutex::new(Vec::new()),
        });
        let router = Router::new().route("/token", post(token)).with_state(state.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("token server");
        });
        GoogleTokenServer { state, task }
    }

    /// `http://127.0.0.1:PORT/token`: the key file's `token_uri`, and the audience the assertion must name.
    pub fn token_uri(&self) -> String {
        self.state.token_uri.clone()
    }

    /// How many requests reached `/token`, accepted or not.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// The access tokens handed out, in order.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.state.issued.lock().unwrap().clone()
    }

    /// The claims of every accepted assertion, in order.
    pub fn accepted_claims(&self) -> Vec<Value> {
        self.state.accepted_claims.lock().unwrap().clone()
    }

    /// Why requests were refused (`error: error_description`), in order.
    pub fn refusals(&self) -> Vec<String> {
        self.state.refusals.lock().unwrap().clone()
    }
}

impl Drop for GoogleTokenServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn token(
    State(state): State<Arc<TokenState>>,
    form: Result<Form<HashMap<String, String>>, FormRejection>,
) -> Response {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let refuse = |error: &str, description: String| {
        state.refusals.lock().unwrap().push(format!("{error}: {description}"));
        let body = json!({ "error": error, "error_description": description });
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
    };
    let Form(form) = match form {
        Ok(form) => form,
        Err(rejection) => {
            return refuse("invalid_request", format!("not an application/x-www-form-urlencoded body: {rejection}"));
        }
    };
    match form.get("grant_type").map(String::as_str) {
        Some(JWT_BEARER_GRANT) => {}
        Some(other) => return refuse("unsupported_grant_type", format!("Invalid grant_type: {other}")),
        None => return refuse("invalid_request", "Missing required parameter: grant_type".to_owned()),
    }
    let Some(assertion) = form.get("assertion") else {
        return refuse("invalid_request", "Missing required parameter: assertion".to_owned());
    };
    let claims = match verify_assertion(&state, assertion) {
        Ok(claims) => claims,
        Err(description) => return refuse("invalid_grant", description),
    };
    let access_token = format!("ya29.kubeopera-test-{}", uuid::Uuid::new_v4().simple());
    state.issued.lock().unwrap().push(access_token.clone());
    state.accepted_claims.lock().unwrap().push(claims);
    axum::Json(json!({ "access_token": access_token, "expires_in": 3599, "token_type": "Bearer" })).into_response()
}

/// The claims of a valid assertion, or why it is not one.
fn verify_assertion(state: &TokenState, assertion: &str) -> Result<Value, String> {
    let parts: Vec<&str> = assertion.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(format!("Invalid JWT: expected 3 parts separated by '.', found {}", parts.len()));
    };
    let decode = |part: &str, what: &str| {
        URL_SAFE_NO_PAD.decode(part).map_err(|error| format!("Invalid JWT: {what} is not unpadded base64url: {error}"))
    };
    let header: Value = serde_json::from_slice(&decode(header, "the header")?)
        .map_err(|error| format!("Invalid JWT: the header is not JSON: {error}"))?;
    if header["alg"] != "RS256" {
        return Err(format!("Invalid JWT: alg must be RS256, is {}", header["alg"]));
    }
    let signature = decode(signature, "the signature")?;
    let signing_input = &assertion[..assertion.rfind('.').expect("three parts")];
    ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, &state.public_key_der)
        .verify(signing_input.as_bytes(), &signature)
        .map_err(|_| "Invalid JWT Signature.".to_owned())?;
    let claims: Value = serde_json::from_slice(&decode(claims, "the claims")?)
        .map_err(|error| format!("Invalid JWT: the claims are not JSON: {error}"))?;
    if claims["iss"] != CLIENT_EMAIL {
        return Err(format!("Invalid JWT: iss must be {CLIENT_EMAIL}, is {}", claims["iss"]));
    }
    if claims["aud"] != state.token_uri.as_str() {
        return Err(format!("Invalid JWT: aud must be {}, is {}", state.token_uri, claims["aud"]));
    }
    let scopes: Vec<&str> = claims["scope"].as_str().unwrap_or_default().split(' ').collect();
    if !scopes.iter().any(|scope| [SCOPE_DEVSTORAGE_READ_WRITE, SCOPE_CLOUD_PLATFORM].contains(scope)) {
        return Err(format!(
            "Invalid JWT: scope must include {SCOPE_DEVSTORAGE_READ_WRITE} or {SCOPE_CLOUD_PLATFORM}, is {}",
            claims["scope"]
        ));
    }
    let (Some(iat), Some(exp)) = (claims["iat"].as_i64(), claims["exp"].as_i64()) else {
        return Err("Invalid JWT: iat and exp must be integers (seconds since the epoch)".to_owned());
    };
    let now = unix_now();
    if exp <= iat || exp - iat > 3600 {
        return Err(format!("Invalid JWT: exp - iat must be in (0, 3600], is {}", exp - iat));
    }
    if iat > now + 300 || exp < now - 300 {
        return Err(format!(
            "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe (iat {iat}, \
             exp {exp}, now {now})"
        ));
    }
    Ok(claims)
}
