#!/usr/bin/env bash
# Builds kubectl from the Go module proxy into a cache folder keyed by tools/kubectl and the Go version, for the
# integration tests (TEST_KUBECTL_BIN). Its Kubernetes version is the test control plane's (tools/k8s), so the
# client's minor is the server's and most of it comes from the Go build cache.
# Progress goes to stderr; the last line of stdout is the absolute path of the binary's folder:
#   dir=$(tools/build-kubectl.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

build() {
  local k8s_version minor ldflags package
  k8s_version=$(cd kubectl && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=${k8s_version#v1.}
  minor=${minor%%.*}
  # As Kubernetes' own build does (hack/lib/version.sh): `kubectl version` reads component-base's, the client's
  # User-Agent client-go's.
  ldflags="-s -w"
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $package.gitVersion=$k8s_version -X $package.gitMajor=1 -X $package.gitMinor=$minor"
  done
  echo "building kubectl ($k8s_version)..." >&2
  go_build kubectl k8s.io/kubernetes/cmd/kubectl "$1/kubectl" "$ldflags"
}

cached_go_build kubectl kubectl kubectl build
