//! The playground and the REST reference in a real browser: Debian's Chromium, headless, driven by
//! tests/browser/playground.cjs, with every request that would leave loopback blocked and recorded. The service
//! serves both pages and all their assets itself, with authentication on: the token goes into GraphiQL's Headers
//! tab (and a subscription's connection_init) and into the reference page's form.

use std::path::Path;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::Value;
use test_support::browser::{browser_tools, playground_assets_dir};
use test_support::provision_body;

use crate::authn::{AUDIENCE, Setup};

#[tokio::test]
async fn the_playground_runs_a_query_and_a_subscription_and_the_reference_loads_with_nothing_from_outside() {
    let tools = browser_tools();
    let assets = playground_assets_dir().display().to_string();
    let setup = Setup::start_with(
        "cluster-provisioner",
        &[("APP_PLAYGROUND_ASSETS_DIR", &assets), ("APP_GRAPHQL_INTROSPECTION", "true")],
    )
    .await;
    let token = setup.token("host-cluster-controller", AUDIENCE).await;
    let accepted = setup.call("POST", "/api/v1/provisions", Some(&provision_body("browser-test")), Some(&token)).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    let operation_id = accepted.json()["operationId"].as_str().unwrap().to_owned();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(axum::serve(listener, setup.app.app.router.clone()).into_future());
    // Cargo's folder for test artifacts; the screenshots stay there.
    let screenshots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("playground");
    std::fs::create_dir_all(&screenshots).unwrap();
    let driver = tokio::process::Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/playground.cjs"))
        .env("PLAYWRIGHT_CORE", &tools.playwright_core)
        .env("CHROMIUM", &tools.chromium)
        .env("BASE_URL", format!("http://{address}"))
        .env("TOKEN", &token)
        .env("OPERATION_ID", &operation_id)
        .env("SCREENSHOT_DIR", &screenshots)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), driver).await.expect("the browser finishes").unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the browser driver failed: {stderr}");
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!("the driver printed no JSON ({error}): {}{stderr}", String::from_utf8_lossy(&output.stdout))
    });
    eprintln!("screenshots in {}", screenshots.display());
    assert!(seen.get("failure").is_none(), "the pages did not show what was asked: {seen:#}");

    // Nothing was asked of anyone but the service, and the pages ran without errors.
    assert_eq!(seen["outside"], serde_json::json!([]), "requests that left loopback: {seen:#}");
    assert_eq!(seen["pageErrors"], serde_json::json!([]), "{seen:#}");
    // The query's answer, then the subscription's first event and its last, after the cancel.
    let query = seen["query"].as_str().unwrap();
    assert!(query.contains(&operation_id) && query.contains(r#""operation": "Provision""#), "{query}");
    assert!(seen["subscriptionFirst"].as_str().unwrap().contains(r#""state": "Pending""#), "{seen:#}");
    assert_eq!(seen["cancelStatus"], 202, "{seen:#}");
    let last = seen["subscriptionLast"].as_str().unwrap();
    assert!(last.contains(r#""state": "Failed""#) && last.contains(r#""reason": "cancelled""#), "{last}");
    // The reference shows the API's document, loaded with the token.
    assert!(seen["referenceTitle"].as_str().unwrap().contains("cluster-provisioner"), "{seen:#}");
    let paths: Vec<&str> = seen["referencePaths"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(paths.iter().any(|path| path.contains("/api/v1/provisions/{id}/kubeconfig")), "{paths:?}");
    for screenshot in ["playground.png", "api-reference.png"] {
        let image = std::fs::read(screenshots.join(screenshot)).unwrap();
        assert!(image.starts_with(b"\x89PNG") && image.len() > 10_000, "{screenshot} is a real screenshot");
    }
}
