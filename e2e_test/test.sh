#!/usr/bin/env bash
# End-to-end test against a running provisioner and a real cloud account: provisions a cluster through the
# GraphQL API, polls runtimeOperationStatus until it ends, checks the kubeconfig over REST, then deprovisions.
# It creates real (billable) cloud resources, so it never runs in CI. The variables it needs are listed below;
# it says which ones are missing. Authentication is on by default in a deployment: the bearer token of an allowed
# caller comes from PROVISIONER_TOKEN or a file named by PROVISIONER_TOKEN_FILE (for example a projected
# ServiceAccount token for the audience APP_AUTH_AUDIENCE).
set -euo pipefail

required=(PROVISIONER_SERVER CREDENTIAL_ID TOPOLOGY REGION ZONES)
missing=()
for variable in "${required[@]}"; do [ -n "${!variable:-}" ] || missing+=("$variable"); done
if [ ${#missing[@]} -gt 0 ]; then
  cat >&2 <<USAGE
missing: ${missing[*]}
  PROVISIONER_SERVER base URL of the service (as provisionerctl reads it), for example http://127.0.0.1:3000
  CREDENTIAL_ID    auth-service credential to build with
  TOPOLOGY         VANILLA_KUBEADM, EKS or GKE
  REGION           for example eu-central-1 or europe-west3
  ZONES            comma-separated zones, for example eu-central-1a,eu-central-1b
  PROVISIONER_TOKEN or PROVISIONER_TOKEN_FILE
                   bearer token of a caller in APP_AUTH_ALLOWED_USERS (not needed with APP_AUTH_ENABLED=false)
optional: GCP_PROJECT_ID (GKE), KUBERNETES_VERSION (1.34), MACHINE_TYPE, NAME, TIMEOUT_MINUTES (60),
          API_ALLOWED_CIDRS (comma-separated IPv4 ranges that may reach the cluster's API; unset: the
          service's APP_API_ALLOWED_CIDRS, which must then be set)
USAGE
  exit 2
fi

token="${PROVISIONER_TOKEN:-}"
if [ -z "$token" ] && [ -n "${PROVISIONER_TOKEN_FILE:-}" ]; then token=$(<"$PROVISIONER_TOKEN_FILE"); fi
# Sent only when there is one; curl reads the header from a private file, so the token is not on a command line.
temporary_files=()
trap 'rm -f "${temporary_files[@]}"' EXIT
auth=()
if [ -n "$token" ]; then
  header_file=$(mktemp)
  temporary_files+=("$header_file")
  printf 'Authorization: Bearer %s\n' "$token" >"$header_file"
  auth=(-H "@$header_file")
fi

name="${NAME:-e2e-$(date +%s | tail -c 7)}"
timeout_minutes="${TIMEOUT_MINUTES:-60}"

graphql() { # query, variables (JSON) -> response JSON
  python3 -c 'import json,sys; print(json.dumps({"query": sys.argv[1], "variables": json.loads(sys.argv[2])}))' "$1" "$2" \
    | curl -sS -X POST "${auth[@]}" -H 'Content-Type: application/json' --data-binary @- "$PROVISIONER_SERVER/graphql"
}
field() { python3 -c 'import json,sys; d=json.load(sys.stdin)
for k in sys.argv[1].split("."): d=d[k] if d is not None else None
print("" if d is None else d)' "$1"; }

input=$(python3 - <<PY
import json, os
zones = os.environ["ZONES"].split(",")
topology = os.environ["TOPOLOGY"]
machine = os.environ.get("MACHINE_TYPE") or ("e2-standard-4" if topology == "GKE" else "t3.large")
config = {
    "topology": topology, "credentialId": os.environ["CREDENTIAL_ID"], "region": os.environ["REGION"],
    "kubernetesVersion": os.environ.get("KUBERNETES_VERSION", "1.34"), "environment": "e2e",
    "workerPool": {"machineType": machine, "minSize": 1, "maxSize": 2, "diskSizeGb": 50},
}
if topology == "GKE":
    config["gcp"] = {"projectId": os.environ["GCP_PROJECT_ID"], "zones": zones}
else:
    config["aws"] = {"zones": zones}
if topology == "VANILLA_KUBEADM":
    config["controlPlane"] = {"count": 1, "machineType": machine}
if os.environ.get("API_ALLOWED_CIDRS"):
    config["apiAllowedCidrs"] = os.environ["API_ALLOWED_CIDRS"].split(",")
print(json.dumps({"config": {"runtimeInput": {"name": "$name"}, "clusterConfig": config}}))
PY
)

wait_for() { # operation id
  local deadline=$((SECONDS + timeout_minutes * 60)) state
  while [ $SECONDS -lt $deadline ]; do
    status=$(graphql 'query($id: String!) { runtimeOperationStatus(id: $id) { state message lastError { errMessage reason } } }' "{\"id\": \"$1\"}")
    state=$(echo "$status" | field data.runtimeOperationStatus.state)
    echo "$(date +%T) $state: $(echo "$status" | field data.runtimeOperationStatus.message)"
    case "$state" in
      Succeeded) return 0 ;;
      Failed) echo "$status" >&2; return 1 ;;
    esac
    sleep 30
  done
  echo "timed out after ${timeout_minutes} minutes" >&2
  return 1
}

response=$(graphql 'mutation($config: ProvisionRuntimeInput!) { provisionRuntime(config: $config) { id runtimeID } }' "$input")
operation=$(echo "$response" | field data.provisionRuntime.id)
runtime=$(echo "$response" | field data.provisionRuntime.runtimeID)
[ -n "$operation" ] || { echo "provisioning refused: $response" >&2; exit 1; }
echo "provisioning runtime $runtime (operation $operation)"
wait_for "$operation"

kubeconfig=$(mktemp)
temporary_files+=("$kubeconfig")
curl -sSf "${auth[@]}" "$PROVISIONER_SERVER/api/v1/provisions/$runtime/kubeconfig" -o "$kubeconfig"
if command -v kubectl >/dev/null; then KUBECONFIG="$kubeconfig" kubectl get nodes; fi

operation=$(graphql 'mutation($id: String!) { deprovisionRuntime(id: $id) }' "{\"id\": \"$runtime\"}" | field data.deprovisionRuntime)
echo "deprovisioning runtime $runtime (operation $operation)"
wait_for "$operation"
echo "e2e passed"
