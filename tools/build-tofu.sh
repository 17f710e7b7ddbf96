#!/usr/bin/env bash
# Builds OpenTofu's CLI (`tofu`) from the Go module proxy (no release downloads) into a cache folder keyed by
# the wrapper module (tools/opentofu) and the Go version. The terraform-runner and Terraform module tests use it.
# The last line of stdout is the folder holding `tofu`:  dir=$(tools/build-tofu.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

build() {
  local version
  version=$(cd opentofu && go list -m -f '{{.Version}}' github.com/opentofu/opentofu)
  echo "building tofu $version (github.com/opentofu/opentofu/cmd/tofu)..." >&2
  # version.dev=no: a release build (`tofu version` says v1.x.y, not v1.x.y-dev), as OpenTofu's own releases do.
  # A private Go build cache, removed afterwards: the binary is cached, so ~1.5 GB of compiled packages would
  # only help a rebuild after the pins change.
  GOCACHE="$1/gocache" go_build opentofu github.com/opentofu/opentofu/cmd/tofu "$1/tofu" \
    "-s -w -X github.com/opentofu/opentofu/version.dev=no"
  rm -rf "$1/gocache"
  TF_CLI_CONFIG_FILE=/dev/null "$1/tofu" version >&2
}

cached_go_build tofu opentofu tofu build
