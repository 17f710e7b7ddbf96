# shellcheck shell=bash
# Sourced by tools that install npm packages from a committed lock file.
# npm_ci_cached SOURCE_DIR CACHE_NAME: installs SOURCE_DIR's package.json and package-lock.json with `npm ci`
# (every package's integrity hash checked, no install scripts) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/CACHE_NAME/<hash of both files>, once per lock file and one
# installation at a time per machine; sets NPM_CI_DIR to that folder (it holds node_modules).
npm_ci_cached() {
  local source_dir=$1 cache hash
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/$2"
  hash=$(cat "$source_dir/package.json" "$source_dir/package-lock.json" | sha256sum | cut -c1-16)
  NPM_CI_DIR="$cache/$hash"
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -f "$NPM_CI_DIR/node_modules/.installed" ]; then
      echo "installing $2 from the npm registry (lock file $hash)" >&2
      rm -rf "$NPM_CI_DIR"
      mkdir -p "$NPM_CI_DIR"
      cp "$source_dir/package.json" "$source_dir/package-lock.json" "$NPM_CI_DIR/"
      (cd "$NPM_CI_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
      touch "$NPM_CI_DIR/node_modules/.installed"
    fi
  ) 9>"$cache/.lock"
}
