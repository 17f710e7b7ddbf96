// Drives Debian's Chromium (headless, through playwright-core) over the service's playground and REST reference,
// for tests/integration/playground.rs, which starts the service and asserts on what this prints: one JSON object
// with the texts the pages showed, every request that left loopback (each one blocked), and the pages' errors.
//
// Input, from the environment: PLAYWRIGHT_CORE (the installed package), CHROMIUM (the browser), BASE_URL (the
// service, on loopback), TOKEN (a bearer token the service allows), OPERATION_ID (a queued operation, cancelled
// here while the subscription follows it), SCREENSHOT_DIR (where the screenshots go).
"use strict";

const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const base = new URL(process.env.BASE_URL);
const token = process.env.TOKEN;
const operationId = process.env.OPERATION_ID;
const screenshots = process.env.SCREENSHOT_DIR;
const WAIT_MS = 30000;

function isLoopback(url) {
  const { hostname, protocol } = new URL(url);
  if (protocol === "data:" || protocol === "blob:" || protocol === "about:") return true;
  return hostname === "127.0.0.1" || hostname === "localhost" || hostname === "[::1]";
}

// The text the user sees in the result pane, once it contains `wanted`.
async function resultShowing(page, wanted) {
  await page.waitForFunction(
    (wanted) => (document.querySelector(".result-window")?.innerText ?? "").includes(wanted),
    wanted,
    { timeout: WAIT_MS },
  );
  return page.locator(".result-window").innerText();
}

// Replaces the text of one of GraphiQL's CodeMirror editors the way a user's paste does; `selector` names the
// editor's element. GraphiQL reads an edit (the operation's name, the headers) after a short debounce.
async function setEditor(page, selector, text) {
  const editor = page.locator(`${selector} .CodeMirror`);
  await editor.waitFor({ state: "visible", timeout: WAIT_MS });
  await editor.click();
  await page.keyboard.press("Control+A");
  await page.keyboard.insertText(text);
  await page.waitForTimeout(500);
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM,
    headless: true,
    // Nothing but loopback resolves, and Chromium's own background traffic is off.
    args: [
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ],
  });
  const outside = [];
  const pageErrors = [];
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  await context.route(
    (url) => !isLoopback(url.href),
    (route) => {
      outside.push(route.request().url());
      return route.abort("blockedbyclient");
    },
  );
  const page = await context.newPage();
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  const seen = {};
  try {
    // The playground, with the token in its Headers tab.
    await page.goto(new URL("/graphql", base).href);
    await page.waitForSelector(".graphiql-container", { timeout: WAIT_MS });
    await page.getByRole("button", { name: "Headers" }).click();
    // GraphiQL keeps the hidden one of its two tool editors in the page.
    await setEditor(page, ".graphiql-editor-tool .graphiql-editor:not(.hidden)", JSON.stringify({ Authorization: `Bearer ${token}` }));
    // Before the token, the schema's introspection was refused (401): expected, and not an error of the page.
    pageErrors.length = 0;

    await setEditor(
      page,
      ".graphiql-query-editor",
      `query Status {\n  runtimeOperationStatus(id: "${operationId}") {\n    id\n    operation\n    state\n  }\n}\n`,
    );
    await page.locator(".graphiql-execute-button").click();
    seen.query = await resultShowing(page, `"state": "Pending"`);

    // A subscription that follows the operation: its state now, then, once it is cancelled, its final state.
    await setEditor(
      page,
      ".graphiql-query-editor",
      `subscription Events {\n  operationEvents(id: "${operationId}") {\n    status {\n      state\n      lastError {\n        reason\n      }\n    }\n  }\n}\n`,
    );
    await page.locator(".graphiql-execute-button").click();
    seen.subscriptionFirst = await resultShowing(page, `"state": "Pending"`);
    const cancelled = await fetch(new URL(`/api/v1/operations/${operationId}/cancel`, base), {
      method: "POST",
      headers: { Authorization: `Bearer ${token}` },
    });
    seen.cancelStatus = cancelled.status;
    seen.subscriptionLast = await resultShowing(page, `"reason": "cancelled"`);
    await page.screenshot({ path: `${screenshots}/playground.png` });

    // The REST reference, loaded with the token.
    await page.goto(new URL("/api/v1/docs", base).href);
    await page.fill("#token", token);
    // Without the token the document was refused (401), as the API refuses it.
    pageErrors.length = 0;
    await page.click("#token-form button");
    await page.waitForSelector(".swagger-ui .opblock", { timeout: WAIT_MS });
    seen.referenceTitle = await page.locator(".swagger-ui .info .title").innerText();
    seen.referencePaths = await page.locator(".swagger-ui .opblock-summary-path").allInnerTexts();
    await page.screenshot({ path: `${screenshots}/api-reference.png`, fullPage: false });
  } catch (error) {
    seen.failure = String(error);
    await page.screenshot({ path: `${screenshots}/failure.png` }).catch(() => {});
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify({ ...seen, outside, pageErrors }) + "\n");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
