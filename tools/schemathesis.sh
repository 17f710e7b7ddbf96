#!/usr/bin/env bash
# Fuzzes the REST API with Schemathesis against its own OpenAPI document (/api/v1/openapi.json), on a real
# server: target/debug/provisioner on free loopback ports, SQLite in a temporary folder, authentication off, the
# development auth-service, no Kubernetes cluster (operations stay queued). Exits non-zero when Schemathesis finds
# a failure. Installs Schemathesis into a venv under ~/.cache (once).
#
# SCHEMATHESIS_MAX_EXAMPLES (default 50 per operation) and SCHEMATHESIS_SEED (default 1) tune the run;
# SCHEMATHESIS_ARGS passes extra flags.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
max_examples="${SCHEMATHESIS_MAX_EXAMPLES:-50}"
seed="${SCHEMATHESIS_SEED:-1}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner"
venv="$cache/venv"

if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
    echo "installing schemathesis $SCHEMATHESIS_VERSION into $venv" >&2
    mkdir -p "$cache"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

cargo build --quiet --locked --bin provisioner
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
binary="$target_dir/debug/provisioner"

work="$(mktemp -d)"
pids=()
cleanup() {
    status=$?
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ "$status" -ne 0 ] && [ -f "$work/provisioner.log" ]; then
        echo "--- last lines of the provisioner's log ---" >&2
        tail -n 40 "$work/provisioner.log" >&2
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
api_port="$(free_port)"
metrics_port="$(free_port)"
auth_port="$(free_port)"

tools/dev-auth-service.py --port "$auth_port" >"$work/auth-service.log" 2>&1 &
pids+=($!)
cat >"$work/auth-oauth.yaml" <<EOF
data:
  client_id: cluster-provisioner
  client_secret: change-me
  tokens_endpoint: http://127.0.0.1:$auth_port/oauth2/token
EOF

# env -i: nothing from the caller's environment (a KUBECONFIG, a DATABASE_URL, APP_* variables) leaks in.
env -i PATH="$PATH" HOME="$work" KUBECONFIG="$work/no-kubeconfig" \
    DATABASE_URL="sqlite://$work/provisioner.db?mode=rwc" \
    APP_ADDRESS="127.0.0.1:$api_port" \
    APP_METRICS_ADDRESS="127.0.0.1:$metrics_port" \
    APP_AUTH_ENABLED=false \
    APP_API_ALLOWED_CIDRS=127.0.0.0/8 \
    AUTH_SERVICE_BASE_URL="http://127.0.0.1:$auth_port" \
    APP_AUTH_OAUTH_PATH="$work/auth-oauth.yaml" \
    APP_AUTH_TIMEOUT=5s \
    APP_LOG_FORMAT=text \
    APP_LOG_LEVEL=warn \
    APP_MAX_CONCURRENT_REQUESTS=1024 \
    "$binary" >"$work/provisioner.log" 2>&1 &
pids+=($!)

base="http://127.0.0.1:$api_port"
for _ in $(seq 1 100); do
    if curl -fsS "$base/healthz" >/dev/null 2>&1; then
        break
    fi
    if ! kill -0 "${pids[1]}" 2>/dev/null; then
        echo "the provisioner exited before it was healthy" >&2
        exit 1
    fi
    sleep 0.2
done
curl -fsS "$base/healthz" >/dev/null

# Checks: no 5xx, answers that match the documented schemas, status codes and content types, and headers the
# document declares. The server keeps its state across examples (runtimes created by earlier POSTs exist).
# From the temporary folder: Schemathesis writes its replay cache (.schemathesis/) into the working directory.
cd "$work"
# The event stream of an operation ends only with the operation, which nothing runs here: it is tested by the
# integration tests (events::) instead.
"$venv/bin/schemathesis" run "$base/api/v1/openapi.json" \
    --url "$base" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
    --max-examples "$max_examples" \
    --seed "$seed" \
    --workers 1 \
    --generation-database none \
    --exclude-path '/api/v1/operations/{operationId}/events' \
    --no-color \
    ${SCHEMATHESIS_ARGS:-}
