#!/usr/bin/env bash
# Builds fake-gcs-server (a local Google Cloud Storage: the JSON API, in memory) from the Go module proxy (no
# release downloads) into a cache folder keyed by the wrapper module (tools/fake-gcs-server) and the Go version.
# The terraform-runner's GCP tests use it (STORAGE_EMULATOR_HOST).
# The last line of stdout is the folder holding `fake-gcs-server`:  dir=$(tools/build-fake-gcs.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

build() {
  local version usage
  version=$(cd fake-gcs-server && go list -m -f '{{.Version}}' github.com/fsouza/fake-gcs-server)
  echo "building fake-gcs-server $version (github.com/fsouza/fake-gcs-server)..." >&2
  # A private Go build cache, removed afterwards (see tools/build-tofu.sh).
  GOCACHE="$1/gocache" go_build fake-gcs-server github.com/fsouza/fake-gcs-server "$1/fake-gcs-server" "-s -w"
  rm -rf "$1/gocache"
  usage=$("$1/fake-gcs-server" -help 2>&1) || true
  [[ "$usage" == *-backend* ]] || { echo "the built fake-gcs-server does not run: $usage" >&2; exit 1; }
}

cached_go_build fake-gcs-server fake-gcs-server fake-gcs-server build
