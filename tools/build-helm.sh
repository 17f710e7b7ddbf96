#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy into a cache folder keyed by tools/helm and the Go version, for the
# chart's tests and `make generate` (which renders resources/ from the chart). Its k8s.io modules are the control
# plane's, so most of it comes from the Go build cache.
# Progress goes to stderr; the last line of stdout is the absolute path of the binary's folder:
#   dir=$(tools/build-helm.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

build() {
  local version
  version=$(cd helm && go list -m -f '{{.Version}}' helm.sh/helm/v3)
  echo "building helm ($version)..." >&2
  go_build helm helm.sh/helm/v3/cmd/helm "$1/helm" "-s -w -X helm.sh/helm/v3/internal/version.version=$version"
}

cached_go_build helm helm helm build
