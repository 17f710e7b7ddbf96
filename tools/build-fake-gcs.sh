#!/usr/bin/env bash
# Builds fake-gcs-server (a local Google Cloud Storage: the JSON API, in memory) from the Go module proxy (no
# release downloads) into a cache folder keyed by the wrapper module (tools/fake-gcs-server) and the Go version.
# The terraform-runner's GCP tests use it (STORAGE_EMULATOR_HOST).
# Progress goes to stderr; the last line of stdout is the absolute path of the folder holding `fake-gcs-server`:
#   dir=$(tools/build-fake-gcs.sh | tail -n1)
set -euo pipefail

tools=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The wrapper's go directive is the one fake-gcs-server needs: never download another Go toolchain for it.
export GOTOOLCHAIN=local

key=$(cd "$tools" && { cat fake-gcs-server/go.mod fake-gcs-server/go.sum; go version; } | sha256sum | cut -c1-16)
root="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/fake-gcs-server"
dir="$root/$key"

mkdir -p "$root"
# One build at a time per machine: a second caller waits, then finds the cache filled.
exec 9>"$root/.lock"
flock 9

if [[ -x "$dir/fake-gcs-server" ]]; then
  echo "fake-gcs-server already built in $dir" >&2
  echo "$dir"
  exit 0
fi

# Build into a temporary folder and rename it at the end, so an interrupted build leaves no half-filled cache.
# Holding the lock, any other temporary folder is a killed build's leftover.
rm -rf "$root"/.building.*
tmp=$(mktemp -d "$root/.building.XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT

version=$(cd "$tools/fake-gcs-server" && go list -m -f '{{.Version}}' github.com/fsouza/fake-gcs-server)
started=$SECONDS
echo "building fake-gcs-server $version (github.com/fsouza/fake-gcs-server)..." >&2
# A private Go build cache, removed afterwards: the binary is cached here, so the compiled packages would only
# help a rebuild after the pins change.
(cd "$tools/fake-gcs-server" && CGO_ENABLED=0 GOCACHE="$tmp/gocache" go build -mod=readonly -trimpath \
  -buildvcs=false -ldflags "-s -w" -o "$tmp/fake-gcs-server" github.com/fsouza/fake-gcs-server)
rm -rf "$tmp/gocache"
usage=$("$tmp/fake-gcs-server" -help 2>&1) || true
[[ "$usage" == *-backend* ]] || { echo "the built fake-gcs-server does not run: $usage" >&2; exit 1; }

rm -rf "$dir"
mv -T "$tmp" "$dir"
trap - EXIT
echo "fake-gcs-server $version built in $((SECONDS - started))s into $dir" >&2
echo "$dir"
