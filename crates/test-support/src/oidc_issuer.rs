//! An OpenID Connect issuer on loopback, for sign-in tests against a real API server: HTTPS with a certificate of a
//! CA of its own, discovery (`/.well-known/openid-configuration`) and a JWKS with one ES256 key, which signs the
//! tokens tests ask for. It counts JWKS requests, so that a test can show a verifier really fetched the keys.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use provisioner::listener_tls::{TlsFiles, TlsListener};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

use crate::pki::server_certificates;

/// The `kid` of the one signing key, in the JWKS and in every token's header.
const KEY_ID: &str = "oidc-issuer-test-key";
const JWKS_PATH: &str = "/keys";

pub struct OidcIssuer {
    address: SocketAddr,
    ca_pem: String,
    key: EcdsaKeyPair,
    random: SystemRandom,
    jwks_requests: Arc<AtomicUsize>,
    serving: tokio::task::JoinHandle<()>,
    _certificates: tempfile::TempDir,
}

impl OidcIssuer {
    /// Serves on a free loopback port, on the current runtime, until dropped.
    pub async fn start() -> Self {
        let random = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &random).expect("a P-256 key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &random)
            .expect("the generated key loads");

        let certificates = server_certificates();
        let folder = tempfile::tempdir().expect("a folder for the certificates");
        let (cert, key_file) = (folder.path().join("tls.crt"), folder.path().join("tls.key"));
        std::fs::write(&cert, &certificates.cert).unwrap();
        std::fs::write(&key_file, &certificates.key).unwrap();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let address = tcp.local_addr().unwrap();
        let files = TlsFiles { cert, key: key_file, reload_interval: Duration::from_secs(3600), max_handshakes: 64 };
        let listener = TlsListener::new(tcp, files).expect("the test certificate loads");

        let issuer = issuer_url(address);
        let discovery = json!({
            "issuer": issuer,
            "jwks_uri": format!("{issuer}{JWKS_PATH}"),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        });
        let jwks = json!({ "keys": [public_jwk(&key)] });
        let jwks_requests = Arc::new(AtomicUsize::new(0));
        let counter = jwks_requests.clone();
        let serve_jwks = async move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Json(jwks)
        };
        let router = axum::Router::new()
            .route("/.well-known/openid-configuration", get(async move || Json(discovery)))
            .route(JWKS_PATH, get(serve_jwks));
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        OidcIssuer { address, ca_pem: certificates.ca, key, random, jwks_requests, serving, _certificates: folder }
    }

    /// `https://127.0.0.1:<port>`, exactly as discovery and the tokens' `iss` name it (no trailing slash).
    pub fn issuer_url(&self) -> String {
        issuer_url(self.address)
    }

    /// The PEM certificate of the CA that signed the server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A JWT of `claims` (an object; `iss` is this issuer's unless given) signed with the key of the JWKS.
    pub fn token(&self, mut claims: Value) -> String {
        let object = claims.as_object_mut().expect("the claims are a JSON object");
        object.entry("iss").or_insert_with(|| json!(self.issuer_url()));
        let header = json!({ "alg": "ES256", "typ": "JWT", "kid": KEY_ID });
        let signing_input =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = self.key.sign(&self.random, signing_input.as_bytes()).expect("sign the JWT");
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
    }

    /// How many times the JWKS was asked for.
    pub fn jwks_requests(&self) -> usize {
        self.jwks_requests.load(Ordering::SeqCst)
    }
}

impl Drop for OidcIssuer {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

fn issuer_url(address: SocketAddr) -> String {
    format!("https://127.0.0.1:{}", address.port())
}

/// The public half of `key` as a JWK: ring gives the uncompressed point, `04 || x || y`.
fn public_jwk(key: &EcdsaKeyPair) -> Value {
    let point = key.public_key().as_ref();
    let (x, y) = point[1..].split_at(32);
    json!({
        "kty": "EC",
        "crv": "P-256",
        "x": URL_SAFE_NO_PAD.encode(x),
        "y": URL_SAFE_NO_PAD.encode(y),
        "kid": KEY_ID,
        "use": "sig",
        "alg": "ES256",
    })
}
