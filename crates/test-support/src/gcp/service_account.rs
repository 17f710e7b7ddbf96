//! The service-account key file and the RSA key pair that signs its assertions.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use super::{CLIENT_EMAIL, PROJECT_ID};

/// The RSA-2048 key pair every [`ServiceAccountKey`] of this test binary uses.
#[derive(Debug)]
pub struct TestKeyPair {
    pub private_key_id: String,
    pub client_id: String,
    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as in Google's key files.
    pub private_key_pem: String,
    /// The same key as PKCS#8 DER, for `ring::signature::RsaKeyPair::from_pkcs8`.
    pub private_key_pkcs8_der: Vec<u8>,
    /// PKCS#1 `RSAPublicKey` DER: what `ring::signature::UnparsedPublicKey` with `RSA_PKCS1_2048_8192_SHA256` takes.
    pub public_key_der: Vec<u8>,
    /// SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
    pub public_key_pem: String,
}

const GENERATE_KEY_PAIR: &str = r#"
import base64, json, secrets
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
public = key.public_key()
print(json.dumps({
    "private_key_pem": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode(),
    "private_key_pkcs8_der": base64.b64encode(key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())).decode(),
    "public_key_der": base64.b64encode(public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.PKCS1)).decode(),
    "public_key_pem": public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
    "private_key_id": secrets.token_hex(20),
    "client_id": str(10**20 + secrets.randbelow(9 * 10**20)),
}))
"#;

/// The key pair of this test binary, generated on first use with the venv's Python `cryptography`.
pub fn test_key_pair() -> &'static TestKeyPair {
    static KEY_PAIR: OnceLock<TestKeyPair> = OnceLock::new();
    KEY_PAIR.get_or_init(|| {
        let python = crate::moto::aws_tools_bin_dir().join("python");
        let output = Command::new(&python)
            .args(["-c", GENERATE_KEY_PAIR])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));
        assert!(
            output.status.success(),
            "generating an RSA key with {} failed ({}); does the venv have `cryptography` (run `make test-tools`)?\n{}",
            python.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let generated: Value = serde_json::from_slice(&output.stdout).expect("the key generator prints JSON");
        let text = |field: &str| generated[field].as_str().expect(field).to_owned();
        let bytes = |field: &str| STANDARD.decode(text(field)).expect(field);
        TestKeyPair {
            private_key_id: text("private_key_id"),
            client_id: text("client_id"),
            private_key_pem: text("private_key_pem"),
            private_key_pkcs8_der: bytes("private_key_pkcs8_der"),
            public_key_der: bytes("public_key_der"),
            public_key_pem: text("public_key_pem"),
        }
    })
}

/// A service-account JSON key file for [`PROJECT_ID`] / [`CLIENT_EMAIL`] whose `token_uri` is the test's.
#[derive(Debug, Clone)]
pub struct ServiceAccountKey {
    /// The whole key file, as Google's console downloads it.
    pub json: String,
    pub token_uri: String,
    pub client_email: String,
    pub key: &'static TestKeyPair,
}

impl ServiceAccountKey {
    /// The key file for `token_uri` (the key pair is generated once per test binary, see [`test_key_pair`]).
    pub fn generate(token_uri: &str) -> ServiceAccountKey {
        let key = test_key_pair();
        let json = json!({
            "type": "service_account",
            "project_id": PROJECT_ID,
            "private_key_id": key.private_key_id,
            "private_key": key.private_key_pem,
            "client_email": CLIENT_EMAIL,
            "client_id": key.client_id,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": format!(
                "https://www.googleapis.com/robot/v1/metadata/x509/{}",
                CLIENT_EMAIL.replace('@', "%40")
            ),
            "universe_domain": "googleapis.com"
        });
        ServiceAccountKey {
            json: serde_json::to_string_pretty(&json).expect("key JSON"),
            token_uri: token_uri.to_owned(),
            client_email: CLIENT_EMAIL.to_owned(),
            key,
        }
    }

    /// PKCS#1 DER of the public key, for [`super::GoogleTokenServer::start`].
    pub fn public_key_der(&self) -> &'static [u8] {
        &self.key.public_key_der
    }

    /// A signed RS256 JWT with these claims (header `{"alg":"RS256","typ":"JWT","kid":<private_key_id>}`).
    pub fn sign_jwt(&self, claims: &Value) -> String {
        sign_rs256(self.key, claims)
    }

    /// The assertion Google's client libraries send: iss = client_email, aud = token_uri, the scope, iat = now,
    /// exp = now + 1 h.
    pub fn assertion(&self, scope: &str) -> String {
        let now = unix_now();
        self.sign_jwt(&json!({
            "iss": self.client_email,
            "aud": self.token_uri,
            "scope": scope,
            "iat": now,
            "exp": now + 3600,
        }))
    }
}

/// An RS256 JWT signed with the test key pair.
pub fn sign_rs256(key: &TestKeyPair, claims: &Value) -> String {
    let header = json!({ "alg": "RS256", "typ": "JWT", "kid": key.private_key_id });
    let signing_input =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&key.private_key_pkcs8_der).expect("the test key is PKCS#8");
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .expect("sign the JWT");
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs() as i64
}
