#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the Go module proxy (no Docker, no
# release downloads) into a cache folder keyed by the wrapper modules and the Go version.
# Progress goes to stderr; the last line of stdout is the absolute path of the binaries' folder:
#   dir=$(tools/build-control-plane.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

build() {
  local k8s_version minor k8s_ldflags version_pkg=k8s.io/component-base/version
  k8s_version=$(cd k8s && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=${k8s_version#v1.}
  minor=${minor%%.*}
  k8s_ldflags="-s -w -X $version_pkg.gitVersion=$k8s_version -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$minor"
  # One binary at a time: linking the Kubernetes binaries in parallel needs several GB of memory. The default Go
  # build cache is kept: the three share most packages.
  echo "building etcd, kube-apiserver, kube-controller-manager ($k8s_version)..." >&2
  go_build etcd go.etcd.io/etcd/server/v3 "$1/etcd" "-s -w"
  go_build k8s k8s.io/kubernetes/cmd/kube-apiserver "$1/kube-apiserver" "$k8s_ldflags"
  go_build k8s k8s.io/kubernetes/cmd/kube-controller-manager "$1/kube-controller-manager" "$k8s_ldflags"
}

cached_go_build control-plane "k8s etcd" "etcd kube-apiserver kube-controller-manager" build
