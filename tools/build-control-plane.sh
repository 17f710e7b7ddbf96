#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the Go module proxy (no Docker, no
# release downloads) into a cache folder keyed by the wrapper modules and the Go version.
# Progress goes to stderr; the last line of stdout is the absolute path of the binaries' folder:
#   dir=$(tools/build-control-plane.sh | tail -n1)
set -euo pipefail

tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
binaries=(etcd kube-apiserver kube-controller-manager)

key=$(cd "$tools" && { cat k8s/go.mod k8s/go.sum etcd/go.mod etcd/go.sum; go version; } | sha256sum | cut -c1-16)
root="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/control-plane"
dir="$root/$key"

complete() {
  local b
  for b in "${binaries[@]}"; do [[ -x "$dir/$b" ]] || return 1; done
}

mkdir -p "$root"
# One build at a time per machine: a second caller waits, then finds the cache filled.
exec 9>"$root/.lock"
flock 9

if complete; then
  echo "control plane binaries already built in $dir" >&2
  echo "$dir"
  exit 0
fi

# Build into a temporary folder and rename it at the end, so an interrupted build leaves no half-filled cache.
# Holding the lock, any other temporary folder is a killed build's leftover.
rm -rf "$root"/.building.*
tmp=$(mktemp -d "$root/.building.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT

k8s_version=$(cd "$tools/k8s" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=${k8s_version#v1.}
minor=${minor%%.*}
version_pkg=k8s.io/component-base/version
k8s_ldflags="-s -w -X $version_pkg.gitVersion=$k8s_version -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$minor"

build() { # module folder, package, output name, ldflags
  local started=$SECONDS
  echo "building $3 ($2)..." >&2
  (cd "$tools/$1" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$4" -o "$tmp/$3" "$2")
  echo "built $3 in $((SECONDS - started))s" >&2
}

started=$SECONDS
# One binary at a time: linking the Kubernetes binaries in parallel needs several GB of memory.
build etcd go.etcd.io/etcd/server/v3 etcd "-s -w"
build k8s k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$k8s_ldflags"
build k8s k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$k8s_ldflags"

rm -rf "$dir"
mv -T "$tmp" "$dir"
trap - EXIT
echo "control plane binaries built in $((SECONDS - started))s into $dir" >&2
echo "$dir"
