#!/usr/bin/env bash
# Installs what the browser test (tests/integration/playground.rs) needs: Chromium from Debian's packages when it
# is missing (uses sudo when not root), and playwright-core, which drives it, from the npm registry exactly as
# tests/browser/package-lock.json pins it (`npm ci`, integrity checked, no install scripts: it never downloads a
# browser of its own), into ${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/browser-tools/<lock hash>.
# Progress goes to stderr; the last line of stdout is the folder holding node_modules:
#   TEST_BROWSER_TOOLS_DIR=$(tools/browser-test-tools.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/npm-ci-cached.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-ci-cached.sh"
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version 2>/dev/null >&2

npm_ci_cached "$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/browser" && pwd)" browser-tools
echo "$NPM_CI_DIR"
