#!/usr/bin/env bash
# Builds the provisioner binary of the previous release (the commit tests/fixtures/previous-release names, taken
# from this clone's history) once per machine, into ${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/
# previous-release/<commit>, for the mixed-version test. It shares the cargo target folder, so the dependencies
# both releases have are built once. Cargo names the artifacts of this repository's own crates by their place in
# the workspace, not by their folder, so the two releases would take each other's artifacts for fresh: a profile
# setting of no effect (one codegen unit less) on exactly those crates gives the old ones names of their own.
# The binary itself (target/debug/provisioner) is this release's again afterwards. Progress goes to stderr; the
# last line of stdout is the binary's folder:
#   TEST_PREVIOUS_RELEASE_BIN=$(tools/build-previous-release.sh | tail -n1)/provisioner
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
commit=$(grep -v '^#' "$root/tests/fixtures/previous-release" | head -n1)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/previous-release"
dir="$cache/$commit"
mkdir -p "$cache"
# One build at a time per machine: a second caller waits, then finds it built.
exec 9>"$cache/.lock"
flock 9
if [[ -x "$dir/provisioner" ]]; then
  echo "previous release ${commit:0:12} already built in $dir" >&2
  echo "$dir"
  exit 0
fi
git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null ||
  { echo "commit $commit of tests/fixtures/previous-release is not in this clone's history" >&2; exit 1; }
source=$(mktemp -d)
trap 'rm -rf "$source"' EXIT
echo "building the provisioner of the previous release (${commit:0:12})..." >&2
git -C "$root" archive "$commit" | tar -x -C "$source"
target="${CARGO_TARGET_DIR:-$root/target}"
own_names=()
for crate in provisioner runner-contract process-support migrations; do
  own_names+=(--config "profile.dev.package.$crate.codegen-units=255")
done
(cd "$source" && PROVISIONER_COMMIT="$commit" CARGO_TARGET_DIR="$target" \
  cargo build --locked --bin provisioner "${own_names[@]}" >&2)
rm -rf "$dir" "$dir.partial"
mkdir -p "$dir.partial"
cp "$target/debug/provisioner" "$dir.partial/provisioner"
mv "$dir.partial" "$dir"
(cd "$root" && CARGO_TARGET_DIR="$target" cargo build --locked --bin provisioner >&2)
echo "$dir"
