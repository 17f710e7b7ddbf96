#!/usr/bin/env bash
# Builds what the test control plane's real node runs (test-control-plane's real_node.rs) into a cache folder keyed by
# the wrapper modules and the Go version: kubelet (tools/k8s, the control plane's module, so most of it comes from the
# Go build cache), containerd, containerd-shim-runc-v2 and ctr (tools/node/containerd), the CNI loopback plugin
# (tools/node/cni-plugins), and two OCI image archives for `ctr images import`, as the node pulls from no registry:
# pause.tar (tools/node/pause, the sandbox image) and busybox.tar (Debian's busybox-static, for test containers).
# runc is Debian's (/usr/sbin/runc), installed here if missing. Everything is static (CGO_ENABLED=0).
# Progress goes to stderr; the last line of stdout is the absolute path of the folder:
#   dir=$(tools/build-node.sh | tail -n1)
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

build_kubelet() {
  local k8s_version minor version_pkg=k8s.io/component-base/version
  k8s_version=$(cd k8s && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=${k8s_version#v1.}
  minor=${minor%%.*}
  echo "building kubelet ($k8s_version)..." >&2
  go_build k8s k8s.io/kubernetes/cmd/kubelet "$1/kubelet" \
    "-s -w -X $version_pkg.gitVersion=$k8s_version -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$minor"
}

# Tags as containerd's Makefile (the shim also without gRPC); btrfs needs cgo and drops out by itself, the devmapper
# and zfs snapshotters are left out.
build_containerd() {
  local version pkg=github.com/containerd/containerd/v2 tags=urfave_cli_no_docs,no_devmapper,no_zfs ldflags
  version=$(cd node/containerd && go list -m -f '{{.Version}}' $pkg)
  ldflags="-s -w -X $pkg/version.Version=$version -X $pkg/version.Revision=module-proxy -X $pkg/version.Package=$pkg"
  echo "building containerd, containerd-shim-runc-v2, ctr ($version)..." >&2
  go_build node/containerd $pkg/cmd/containerd "$1/containerd" "$ldflags" -tags "$tags"
  go_build node/containerd $pkg/cmd/containerd-shim-runc-v2 "$1/containerd-shim-runc-v2" "$ldflags" -tags "$tags,no_grpc"
  go_build node/containerd $pkg/cmd/ctr "$1/ctr" "$ldflags" -tags "$tags"
}

build_images() {
  local deb=$1/busybox-static applet links=()
  echo "building the pause and busybox images..." >&2
  go_build node/pause . "$1/images/pause" "-s -w"
  node/make-oci-image.py "$1/pause.tar" localhost/test-node/pause:1 --entrypoint '["/pause"]' \
    "$1/images/pause:/pause:755" >&2
  mkdir "$deb"
  (cd "$deb" && apt-get download busybox-static >&2 && dpkg-deb -x busybox-static_*.deb root)
  for applet in sh echo sleep cat ls; do links+=(--symlink "/bin/$applet=busybox"); done
  node/make-oci-image.py "$1/busybox.tar" localhost/test-node/busybox:1 --cmd '["sh"]' \
    "$deb/root/bin/busybox:/bin/busybox:755" "${links[@]}" >&2
  rm -rf "$deb" "$1/images"
}

build() {
  build_kubelet "$1"
  build_containerd "$1"
  echo "building the CNI loopback plugin..." >&2
  go_build node/cni-plugins github.com/containernetworking/plugins/plugins/main/loopback "$1/cni/loopback" "-s -w"
  build_images "$1"
}

if [[ ! -x /usr/sbin/runc ]]; then
  echo "installing runc from Debian..." >&2
  apt-get install -y runc >&2
fi
# The image archives are made last, by the same build: a folder with every binary has them too.
# The pause program and the image script are part of what is built, so part of the key.
CACHE_KEY_FILES="node/pause/pause.go node/make-oci-image.py" \
  cached_go_build node "k8s node/containerd node/cni-plugins node/pause" \
    "kubelet containerd containerd-shim-runc-v2 ctr cni/loopback" build
