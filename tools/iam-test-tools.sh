#!/usr/bin/env bash
# Installs what the IAM policy test (tests/integration/modules.rs) needs: @cloud-copilot/iam-simulate, an IAM policy
# simulator that evaluates conditions (moto does not), from the npm registry exactly as tests/iam/package-lock.json
# pins it (`npm ci`, integrity checked, no install scripts), into
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/iam-tools/<lock hash>, once per lock file.
# Progress goes to stderr; the last line of stdout is the folder holding node_modules:
#   TEST_IAM_TOOLS_DIR=$(tools/iam-test-tools.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/npm-ci-cached.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-ci-cached.sh"

npm_ci_cached "$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/iam" && pwd)" iam-tools
echo "$NPM_CI_DIR"
