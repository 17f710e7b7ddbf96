#!/usr/bin/env bash
# Installs the playground's browser assets (GraphiQL with React, graphql-ws, Swagger UI) from the npm registry,
# exactly as assets/playground/package-lock.json pins them (`npm ci` checks every package's integrity hash; no
# install scripts run), and copies the files the service serves into one folder, keyed by the lock file:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/playground/<lock hash>/dist
# The service reads that folder (APP_PLAYGROUND_ASSETS_DIR); the image has it at /usr/local/share/kubeopera/playground.
# With a folder argument the files go there instead (the Dockerfile). Progress goes to stderr; the last line of
# stdout is the folder:  APP_PLAYGROUND_ASSETS_DIR=$(tools/build-playground.sh | tail -n1)
set -euo pipefail
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../assets/playground" && pwd)"

# What the service serves, as <installed path> <served name>; src/api/playground.rs lists the same names.
files=(
  "react/umd/react.production.min.js react.production.min.js"
  "react-dom/umd/react-dom.production.min.js react-dom.production.min.js"
  "graphiql/graphiql.min.js graphiql.min.js"
  "graphiql/graphiql.min.css graphiql.min.css"
  "graphql-ws/umd/graphql-ws.min.js graphql-ws.min.js"
  "swagger-ui-dist/swagger-ui-bundle.js swagger-ui-bundle.js"
  "swagger-ui-dist/swagger-ui.css swagger-ui.css"
)

hash=$(cat "$source_dir/package.json" "$source_dir/package-lock.json" | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/playground"
build="$cache/$hash"
out="${1:-$build/dist}"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

if [ ! -f "$build/node_modules/.installed" ]; then
  echo "installing the playground's assets from the npm registry (lock file $hash)" >&2
  rm -rf "$build"
  mkdir -p "$build"
  cp "$source_dir/package.json" "$source_dir/package-lock.json" "$build/"
  (cd "$build" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  touch "$build/node_modules/.installed"
fi
mkdir -p "$out"
for entry in "${files[@]}"; do
  read -r installed served <<<"$entry"
  cp "$build/node_modules/$installed" "$out/$served"
done
echo "playground assets in $out" >&2
echo "$out"
