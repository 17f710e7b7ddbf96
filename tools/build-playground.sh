#!/usr/bin/env bash
# Installs the playground's browser assets (GraphiQL with React, graphql-ws, Swagger UI) from the npm registry,
# exactly as assets/playground/package-lock.json pins them (`npm ci` checks every package's integrity hash; no
# install scripts run), into ${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/playground/<lock hash>, and copies
# the files the service serves into one folder, <that>/dist by default or the folder given (the Dockerfile). The
# service reads it (APP_PLAYGROUND_ASSETS_DIR; the image has it at /usr/local/share/kubeopera/playground).
# Progress goes to stderr; the last line of stdout is the folder:
#   APP_PLAYGROUND_ASSETS_DIR=$(tools/build-playground.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/npm-ci-cached.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-ci-cached.sh"

# What the service serves, as <installed path> <served name>; src/api/playground.rs loads the same names.
files=(
  "react/umd/react.production.min.js react.production.min.js"
  "react-dom/umd/react-dom.production.min.js react-dom.production.min.js"
  "graphiql/graphiql.min.js graphiql.min.js"
  "graphiql/graphiql.min.css graphiql.min.css"
  "graphql-ws/umd/graphql-ws.min.js graphql-ws.min.js"
  "swagger-ui-dist/swagger-ui-bundle.js swagger-ui-bundle.js"
  "swagger-ui-dist/swagger-ui.css swagger-ui.css"
)

npm_ci_cached "$(cd "$(dirname "${BASH_SOURCE[0]}")/../assets/playground" && pwd)" playground
out="${1:-$NPM_CI_DIR/dist}"
mkdir -p "$out"
for entry in "${files[@]}"; do
  read -r installed served <<<"$entry"
  cp "$NPM_CI_DIR/node_modules/$installed" "$out/$served"
done
echo "playground assets in $out" >&2
echo "$out"
