//! The playground and the REST reference in a real browser: Debian's Chromium, headless, driven by
//! tests/browser/playground.cjs, with every request that would leave loopback blocked and recorded. The service
//! serves both pages and all their assets itself, with authentication on: the token goes into GraphiQL's Headers
//! tab (and a subscription's connection_init) and into the reference page's form.

use std::path::Path;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::Value;
use test_support::browser::{BrowserTools, browser_tools, playground_assets_dir};
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

    let address = serve(&setup).await;
    // Cargo's folder for test artifacts; the screenshots stay there.
    let screenshots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("playground");
    std::fs::create_dir_all(&screenshots).unwrap();
    let mut driver = node(&tools, address);
    driver
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/playground.cjs"))
        .env("TOKEN", &token)
        .env("OPERATION_ID", &operation_id)
        .env("SCREENSHOT_DIR", &screenshots);
    let seen = drive(driver).await;
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

/// As the chart installs it, with introspection off: GraphiQL still shows the schema, which it reads from the
/// playground's assets (public, as the page is), while an introspection query sent to the API is refused.
#[tokio::test]
async fn with_introspection_off_the_playground_shows_the_schema_and_the_api_still_refuses_introspection() {
    let tools = browser_tools();
    let assets = playground_assets_dir().display().to_string();
    let setup = Setup::start_with(
        "cluster-provisioner",
        &[("APP_PLAYGROUND_ASSETS_DIR", &assets), ("APP_GRAPHQL_INTROSPECTION", "false")],
    )
    .await;
    let token = setup.token("host-cluster-controller", AUDIENCE).await;
    let introspection = serde_json::json!({
        "query": "query IntrospectionQuery { __schema { queryType { name } } }",
        "operationName": "IntrospectionQuery",
    });
    let refused = setup.call("POST", "/graphql", Some(&introspection), Some(&token)).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert!(refused.text.contains("introspection is disabled"), "{}", refused.text);
    // The playground's file of it needs no token, as the page and its other assets.
    let file = setup.call("GET", "/playground/assets/introspection.json", None, None).await;
    assert_eq!(file.status, StatusCode::OK, "{}", file.text);
    assert!(file.json()["data"]["__schema"]["queryType"]["name"] == "Query", "{}", file.text);

    let address = serve(&setup).await;
    let mut driver = node(&tools, address);
    driver.arg("-e").arg(SCHEMA_DRIVER).env("TOKEN", &token);
    let seen = drive(driver).await;
    assert!(seen.get("failure").is_none(), "the playground did not show the schema: {seen:#}");
    let docs = seen["docs"].as_str().unwrap();
    assert!(docs.contains("runtimeStatus") && docs.contains("runtimeOperationStatus"), "{docs}");
    assert_eq!(seen["introspectionPosts"], serde_json::json!([]), "{seen:#}");
    assert_eq!(seen["failedRequests"], serde_json::json!([]), "{seen:#}");
    assert_eq!(seen["pageErrors"], serde_json::json!([]), "{seen:#}");
}

/// Opens the playground, puts the token into its Headers tab and fetches the schema again as a user would (so
/// that only introspection being off could keep it away), then opens the docs explorer on the Query type. Prints
/// the explorer's text, the POSTs that asked for `__schema`, the answers of 400 and above and the page's errors, as one JSON object.
const SCHEMA_DRIVER: &str = r#"
"use strict";
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const base = new URL(process.env.BASE_URL);
const WAIT_MS = 30000;
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, headless: true,
    args: ["--disable-gpu", "--no-first-run", "--disable-background-networking", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"] });
  const seen = { introspectionPosts: [], failedRequests: [], pageErrors: [] };
  const page = await browser.newPage();
  page.on("pageerror", (error) => seen.pageErrors.push(String(error)));
  page.on("response", (response) => {
    if (response.status() >= 400 && !response.url().endsWith("/favicon.ico")) seen.failedRequests.push(`${response.status()} ${response.url()}`);
  });
  page.on("request", (request) => {
    if (request.method() === "POST" && (request.postData() || "").includes("__schema")) seen.introspectionPosts.push(request.url());
  });
  try {
    await page.goto(new URL("/graphql", base).href);
    await page.waitForSelector(".graphiql-container", { timeout: WAIT_MS });
    await page.getByRole("button", { name: "Headers" }).click();
    const headers = page.locator(".graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror");
    await headers.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${process.env.TOKEN}` }));
    await page.waitForTimeout(500);
    await page.getByRole("button", { name: "Re-fetch GraphQL schema" }).click();
    await page.getByRole("button", { name: "Show Documentation Explorer" }).click();
    await page.locator(".graphiql-doc-explorer-type-name", { hasText: /^Query$/ }).first().click({ timeout: WAIT_MS });
    await page.waitForFunction(
      () => (document.querySelector(".graphiql-doc-explorer")?.innerText ?? "").includes("runtimeStatus"),
      null,
      { timeout: WAIT_MS },
    );
  } catch (error) {
    seen.failure = String(error);
  }
  seen.docs = await page.locator(".graphiql-doc-explorer").innerText({ timeout: 1000 }).catch(() => "");
  await browser.close();
  process.stdout.write(JSON.stringify(seen) + "\n");
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
"#;

/// Serves the app on a loopback port for the browser.
async fn serve(setup: &Setup) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(axum::serve(listener, setup.app.app.router.clone()).into_future());
    address
}

/// node with the browser and the service's address in its environment; the caller adds the script.
fn node(tools: &BrowserTools, address: std::net::SocketAddr) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("node");
    command
        .env("PLAYWRIGHT_CORE", &tools.playwright_core)
        .env("CHROMIUM", &tools.chromium)
        .env("BASE_URL", format!("http://{address}"))
        .kill_on_drop(true);
    command
}

/// Runs a driver to its end and returns the JSON object it printed.
async fn drive(mut driver: tokio::process::Command) -> Value {
    let output =
        tokio::time::timeout(Duration::from_secs(180), driver.output()).await.expect("the browser finishes").unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the browser driver failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!("the driver printed no JSON ({error}): {}{stderr}", String::from_utf8_lossy(&output.stdout))
    })
}
