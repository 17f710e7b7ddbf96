//! The playground's browser test parts: the installed playground assets (`TEST_PLAYGROUND_ASSETS_DIR`,
//! tools/build-playground.sh), Debian's Chromium (`TEST_CHROMIUM_BIN`, default /usr/bin/chromium) and
//! playwright-core, which drives it (`TEST_BROWSER_TOOLS_DIR`, tools/browser-test-tools.sh). Each one panics when
//! missing: the test fails, never skips.

use std::path::PathBuf;

pub const PLAYGROUND_ASSETS_VARIABLE: &str = "TEST_PLAYGROUND_ASSETS_DIR";

/// The folder tools/build-playground.sh printed.
pub fn playground_assets_dir() -> PathBuf {
    let dir = std::env::var_os(PLAYGROUND_ASSETS_VARIABLE).map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "{PLAYGROUND_ASSETS_VARIABLE} is not set: install the playground's assets with tools/build-playground.sh and \
             set it to the folder it prints (`make test-really-local` does both)"
        )
    });
    assert!(
        dir.join("graphiql.min.js").is_file(),
        "{PLAYGROUND_ASSETS_VARIABLE}={} has no graphiql.min.js",
        dir.display()
    );
    dir
}

pub struct BrowserTools {
    pub chromium: PathBuf,
    /// The installed playwright-core package, for `require`.
    pub playwright_core: PathBuf,
}

pub fn browser_tools() -> BrowserTools {
    let chromium =
        std::env::var_os("TEST_CHROMIUM_BIN").map(PathBuf::from).unwrap_or_else(|| "/usr/bin/chromium".into());
    assert!(chromium.is_file(), "no Chromium at {}: install it with tools/browser-test-tools.sh", chromium.display());
    let tools = std::env::var_os("TEST_BROWSER_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TEST_BROWSER_TOOLS_DIR is not set: install playwright-core with tools/browser-test-tools.sh and set it to \
             the folder it prints (`make test-really-local` does both)"
        )
    });
    let playwright_core = tools.join("node_modules/playwright-core");
    assert!(playwright_core.is_dir(), "TEST_BROWSER_TOOLS_DIR={} has no node_modules/playwright-core", tools.display());
    BrowserTools { chromium, playwright_core }
}
