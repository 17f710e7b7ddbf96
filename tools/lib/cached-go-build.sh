# shellcheck shell=bash
# Sourced by the tools/build-*.sh scripts: builds Go binaries from the module proxy into a cache folder keyed by
# the wrapper modules' go.mod/go.sum and the Go version, once per machine.
#
#   [CACHE_KEY_FILES="FILES"] cached_go_build NAME "WRAPPER DIRS" "BINARIES" BUILD_FUNCTION
#
# BUILD_FUNCTION is called with a temporary folder to build BINARIES into; the folder becomes
# ~/.cache/kubeopera-provisioner/NAME/<key> only once every binary is there, so an interrupted build leaves no
# half-filled cache. Progress goes to stderr; the last line of stdout is the cache folder.

# Wrapper modules name the Go version they need: never download another toolchain for them.
export GOTOOLCHAIN=local

go_build() { # module folder, package, output path, ldflags, extra go build flags...
  local module=$1 package=$2 output=$3 ldflags=$4
  shift 4
  (cd "$module" && CGO_ENABLED=0 go build -mod=readonly -trimpath -buildvcs=false -ldflags "$ldflags" "$@" \
    -o "$output" "$package")
}

cached_go_build() {
  local name=$1 wrappers=$2 binaries=$3 build=$4
  local tools key root dir wrapper binary
  tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  # CACHE_KEY_FILES: further files (relative to tools/) whose content the build depends on.
  key=$(cd "$tools" && { for wrapper in $wrappers; do cat "$wrapper/go.mod" "$wrapper/go.sum"; done;
    for file in ${CACHE_KEY_FILES:-}; do cat "$file"; done; go version; } | sha256sum | cut -c1-16)
  root="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/$name"
  dir="$root/$key"

  mkdir -p "$root"
  # One build at a time per machine: a second caller waits, then finds the cache filled.
  exec 9>"$root/.lock"
  flock 9

  local complete=1
  for binary in $binaries; do [[ -x "$dir/$binary" ]] || complete=0; done
  if ((complete)); then
    echo "$name already built in $dir" >&2
    echo "$dir"
    return
  fi

  # Holding the lock, any other temporary folder is a killed build's leftover.
  rm -rf "$root"/.building.*
  BUILD_TMP=$(mktemp -d "$root/.building.XXXXXX")
  chmod 755 "$BUILD_TMP"
  trap 'rm -rf "$BUILD_TMP"' EXIT
  local started=$SECONDS
  (cd "$tools" && "$build" "$BUILD_TMP")
  for binary in $binaries; do
    [[ -x "$BUILD_TMP/$binary" ]] || { echo "the build of $name made no $binary" >&2; return 1; }
  done
  rm -rf "$dir"
  mv -T "$BUILD_TMP" "$dir"
  trap - EXIT
  echo "$name built in $((SECONDS - started))s into $dir" >&2
  echo "$dir"
}
