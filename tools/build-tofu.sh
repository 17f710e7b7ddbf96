#!/usr/bin/env bash
# Builds OpenTofu's CLI (`tofu`) from the Go module proxy (no release downloads) into a cache folder keyed by
# the wrapper module (tools/opentofu) and the Go version. The terraform-runner and Terraform module tests use it.
# Progress goes to stderr; the last line of stdout is the absolute path of the folder holding `tofu`:
#   dir=$(tools/build-tofu.sh | tail -n1)
set -euo pipefail

tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The wrapper's go directive is the one OpenTofu needs: never download another Go toolchain for it.
export GOTOOLCHAIN=local

key=$(cd "$tools" && { cat opentofu/go.mod opentofu/go.sum; go version; } | sha256sum | cut -c1-16)
root="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/tofu"
dir="$root/$key"

mkdir -p "$root"
# One build at a time per machine: a second caller waits, then finds the cache filled.
exec 9>"$root/.lock"
flock 9

if [[ -x "$dir/tofu" ]]; then
  echo "tofu already built in $dir" >&2
  echo "$dir"
  exit 0
fi

# Build into a temporary folder and rename it at the end, so an interrupted build leaves no half-filled cache.
# Holding the lock, any other temporary folder is a killed build's leftover.
rm -rf "$root"/.building.*
tmp=$(mktemp -d "$root/.building.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT

version=$(cd "$tools/opentofu" && go list -m -f '{{.Version}}' github.com/opentofu/opentofu)
started=$SECONDS
echo "building tofu $version (github.com/opentofu/opentofu/cmd/tofu)..." >&2
# version.dev=no: a release build (`tofu version` says v1.x.y, not v1.x.y-dev), as OpenTofu's own releases do.
# A private Go build cache, removed afterwards: the binary is cached here, so ~1.5 GB of compiled packages would
# only help a rebuild after the pins change.
(cd "$tools/opentofu" && CGO_ENABLED=0 GOCACHE="$tmp/gocache" go build -mod=readonly -trimpath -buildvcs=false \
  -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
  -o "$tmp/tofu" github.com/opentofu/opentofu/cmd/tofu)
rm -rf "$tmp/gocache"
TF_CLI_CONFIG_FILE=/dev/null "$tmp/tofu" version >&2

rm -rf "$dir"
mv -T "$tmp" "$dir"
trap - EXIT
echo "tofu $version built in $((SECONDS - started))s into $dir" >&2
echo "$dir"
