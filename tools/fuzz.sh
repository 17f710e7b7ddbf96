#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ (`validate`, `render`) for a fixed number of runs each (first argument,
# default 50000), from their corpus in fuzz/corpus/<target> (created when missing, not committed). Needs the
# nightly toolchain; installs cargo-fuzz into ~/.cache/kubeopera-provisioner/cargo-fuzz once. Exits non-zero on a
# crash (libFuzzer writes the input to fuzz/artifacts/<target>/).
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-50000}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner"
CARGO_FUZZ_VERSION=0.13.2
export PATH="$cache/cargo-fuzz/bin:$PATH"

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    cargo install --quiet --locked --root "$cache/cargo-fuzz" --version "$CARGO_FUZZ_VERSION" cargo-fuzz
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi

cd fuzz
cargo +nightly fuzz build -O
# A valid request per topology gives `validate` a start past the JSON syntax.
mkdir -p corpus/validate
if [ -z "$(ls -A corpus/validate)" ]; then
    aws='"workerPool": {"machineType": "t3.large", "minSize": 1, "maxSize": 3, "diskSizeGb": 50}, "aws": {"zones": ["eu-central-1a"]}'
    for topology in eks vanilla_kubeadm gke; do
        case "$topology" in
            eks) cluster="\"topology\": \"eks\", \"region\": \"eu-central-1\", $aws" ;;
            vanilla_kubeadm) cluster="\"topology\": \"vanilla_kubeadm\", \"region\": \"eu-central-1\", $aws, \"controlPlane\": {\"count\": 3, \"machineType\": \"t3.large\"}, \"network\": {\"vpcCidr\": \"10.0.0.0/16\", \"podCidr\": \"192.168.0.0/16\", \"serviceCidr\": \"10.96.0.0/12\"}" ;;
            gke) cluster='"topology": "gke", "region": "europe-west3", "workerPool": {"machineType": "e2-standard-4", "minSize": 1, "maxSize": 3, "diskSizeGb": 50}, "gcp": {"projectId": "my-project-1", "zones": ["europe-west3-a"]}' ;;
        esac
        printf '{"runtimeInput": {"name": "demo", "description": "first", "labels": {"team": "platform"}}, "clusterConfig": {"credentialId": "dev-aws", "kubernetesVersion": "1.34", "environment": "dev", %s}}' \
            "$cluster" >"corpus/validate/seed-$topology.json"
    done
fi

for target in validate render; do
    mkdir -p "corpus/$target"
    echo "fuzz target $target: $runs runs" >&2
    # -seed: the same inputs on every run; the corpus grows between runs and makes later runs reach further.
    cargo +nightly fuzz run -O "$target" "corpus/$target" -- -runs="$runs" -seed=1 -max_len=4096 -print_final_stats=1
done
