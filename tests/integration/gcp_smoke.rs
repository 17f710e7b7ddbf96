//! The GCP test tooling works: fake-gcs-server answers the GCS JSON API behind the recording proxy, and the token
//! server accepts a properly signed service-account assertion and refuses a tampered one.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use test_support::gcp::{
    CLIENT_EMAIL, FakeGcs, GoogleTokenServer, JWT_BEARER_GRANT, PROJECT_ID, SCOPE_DEVSTORAGE_READ_WRITE,
    ServiceAccountKey, test_key_pair,
};

fn client() -> reqwest::Client {
    provisioner::install_crypto_provider();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[tokio::test]
async fn fake_gcs_round_trip_through_the_json_api() {
    let gcs = FakeGcs::start().await;
    let client = client();
    let base = gcs.base_url();
    assert_eq!(base, format!("http://{}", gcs.emulator_host()));

    // Create through the proxy, as the runner would.
    let body = json!({
        "name": "smoke-state",
        "versioning": { "enabled": true },
        "iamConfiguration": { "uniformBucketLevelAccess": { "enabled": true } }
    });
    let created = client
        .post(format!("{base}/storage/v1/b?project={PROJECT_ID}"))
        .bearer_auth("ya29.smoke")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    let again = client.post(format!("{base}/storage/v1/b?project={PROJECT_ID}")).json(&body).send().await.unwrap();
    assert_eq!(again.status(), 409, "a second create of the same name conflicts");

    let bucket = gcs.bucket("smoke-state").await.expect("the bucket exists");
    assert_eq!(bucket["name"], "smoke-state");
    assert_eq!(bucket["versioning"]["enabled"], true);
    assert!(gcs.bucket("no-such-bucket").await.is_none());

    // Two generations of one object, plus another object.
    let first = gcs.put_object("smoke-state", "state/default.tfstate", "v1").await;
    gcs.put_object("smoke-state", "state/default.tfstate", "v2").await;
    gcs.put_object("smoke-state", "other", b"x".to_vec()).await;
    assert_eq!(gcs.object_names("smoke-state").await, ["other", "state/default.tfstate"]);
    assert_eq!(gcs.object_versions("smoke-state").await.len(), 3);
    assert_eq!(gcs.object("smoke-state", "state/default.tfstate").await.unwrap(), b"v2");

    // A non-empty bucket is not deleted (fake-gcs-server answers 412 where GCS answers 409).
    let refused = client.delete(format!("{base}/storage/v1/b/smoke-state")).send().await.unwrap();
    assert!(refused.status().is_client_error(), "{}", refused.status());

    // Delete every version through the API, then the bucket.
    let listing: Value = client
        .get(format!("{base}/storage/v1/b/smoke-state/o?versions=true"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let items = listing["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert!(items.iter().any(|item| item["generation"] == first["generation"]));
    for item in items {
        let mut url = reqwest::Url::parse(&format!("{base}/storage/v1/b/smoke-state/o")).unwrap();
        url.path_segments_mut().unwrap().push(item["name"].as_str().unwrap());
        url.query_pairs_mut().append_pair("generation", item["generation"].as_str().unwrap());
        let deleted = client.delete(url).send().await.unwrap();
        assert!(deleted.status().is_success(), "{}", deleted.status());
    }
    assert!(gcs.object_versions("smoke-state").await.is_empty());
    let deleted = client.delete(format!("{base}/storage/v1/b/smoke-state")).send().await.unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert!(gcs.bucket("smoke-state").await.is_none());

    // The proxy saw the client's requests (not the helpers'), with their Authorization header.
    let requests = gcs.requests();
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path_and_query, format!("/storage/v1/b?project={PROJECT_ID}"));
    assert_eq!(requests[0].authorization.as_deref(), Some("Bearer ya29.smoke"));
    assert_eq!(requests[0].status, 200);
    assert!(requests.iter().any(|request| request.method == "DELETE"
        && request.path_and_query.starts_with("/storage/v1/b/smoke-state/o/state%2Fdefault.tfstate?generation=")));
    assert_eq!(requests.iter().filter(|request| request.method == "DELETE").count(), 5);
}

#[tokio::test]
async fn dropping_fake_gcs_stops_it() {
    let gcs = FakeGcs::start().await;
    let backend = gcs.backend_url();
    let proxy = gcs.emulator_host();
    drop(gcs);
    // The proxy task is cancelled on drop and goes away when the runtime next runs it.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(std::net::TcpStream::connect(backend.trim_start_matches("http://")).is_err(), "{backend} still answers");
    assert!(std::net::TcpStream::connect(&proxy).is_err(), "the proxy {proxy} still answers");
}

async fn ask_for_token(tokens: &GoogleTokenServer, assertion: &str) -> (u16, Value) {
    let body = format!("grant_type={}&assertion={assertion}", JWT_BEARER_GRANT.replace(':', "%3A"));
    let answer = client()
        .post(tokens.token_uri())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

#[tokio::test]
async fn token_server_accepts_a_signed_assertion_and_refuses_a_tampered_one() {
    let tokens = GoogleTokenServer::start(&test_key_pair().public_key_der).await;
    let key = ServiceAccountKey::generate(&tokens.token_uri());

    let file: Value = serde_json::from_str(&key.json).unwrap();
    assert_eq!(file["type"], "service_account");
    assert_eq!(file["project_id"], PROJECT_ID);
    assert_eq!(file["client_email"], CLIENT_EMAIL);
    assert_eq!(file["token_uri"], tokens.token_uri());
    assert!(file["private_key"].as_str().unwrap().starts_with("-----BEGIN PRIVATE KEY-----\n"));
    assert_eq!(file["private_key_id"].as_str().unwrap().len(), 40);

    // A JWT signed here with ring (as the runner does) is accepted.
    let assertion = key.assertion(SCOPE_DEVSTORAGE_READ_WRITE);
    let (status, answer) = ask_for_token(&tokens, &assertion).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["token_type"], "Bearer");
    assert_eq!(answer["expires_in"], 3599);
    let access_token = answer["access_token"].as_str().unwrap();
    assert!(access_token.starts_with("ya29.kubeopera-test-"), "{access_token}");
    assert_eq!(tokens.issued_tokens(), [access_token]);
    assert_eq!(tokens.accepted_claims()[0]["iss"], CLIENT_EMAIL);

    // The same claims with another payload under the original signature are refused.
    let mut parts: Vec<String> = assertion.split('.').map(str::to_owned).collect();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
    claims["iss"] = json!("attacker@evil.iam.gserviceaccount.com");
    parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
    let (status, answer) = ask_for_token(&tokens, &parts.join(".")).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"], "invalid_grant");

    // Properly signed, but for the wrong audience, without a storage scope, or too long-lived.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    for claims in [
        json!({"iss": CLIENT_EMAIL, "aud": "https://oauth2.googleapis.com/token", "scope": SCOPE_DEVSTORAGE_READ_WRITE, "iat": now, "exp": now + 3600}),
        json!({"iss": CLIENT_EMAIL, "aud": tokens.token_uri(), "scope": "https://www.googleapis.com/auth/compute", "iat": now, "exp": now + 3600}),
        json!({"iss": CLIENT_EMAIL, "aud": tokens.token_uri(), "scope": SCOPE_DEVSTORAGE_READ_WRITE, "iat": now, "exp": now + 7200}),
    ] {
        let (status, answer) = ask_for_token(&tokens, &key.sign_jwt(&claims)).await;
        assert_eq!((status, &answer["error"]), (400, &json!("invalid_grant")), "{claims}: {answer}");
    }

    // Another grant type.
    let answer = client()
        .post(tokens.token_uri())
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    assert_eq!(tokens.requests(), 6);
    assert_eq!(tokens.issued_tokens().len(), 1);
    assert_eq!(tokens.refusals().len(), 5);
}
