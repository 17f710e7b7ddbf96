#!/usr/bin/env bash
# Builds the Terraform providers the modules use (hashicorp/aws, hashicorp/google) from the Go module proxy (no
# registry downloads), each into a cache folder keyed by its wrapper module (tools/terraform-provider-*) and the
# Go version; lays them out as a tofu filesystem mirror under the versions the configurations pin
# (runner_contract::providers); and writes a tofu CLI configuration that installs providers from that mirror only.
# The Terraform tests point TF_CLI_CONFIG_FILE at it.
# The last line of stdout is that file:  export TF_CLI_CONFIG_FILE=$(tools/build-terraform-providers.sh | tail -n1)
#
# The proxy serves the providers only as pseudo-versions of their main branches (their module paths lack the
# /vN suffix, so no release tag is a Go module version). The pinned commits are a few days after the releases
# they are filed under here (aws 6.47.0 of 2026-05-27: commit 5f2286d6d836 of 2026-06-02; google 8.0.0 of
# 2026-08-26: commit f3721fb45fa3 of 2026-08-28); production mirrors the real releases (Dockerfile).
#
# The AWS provider is built with the service packages the modules use only (terraform-provider-aws/services and
# trim.py, which says why): 3 min on two cores instead of 28 to 37 for all 266. Each build runs once per machine, in
# a private Go build cache that is removed after linking.
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

# The registry host tofu resolves `hashicorp/<name>` to: the mirror must use it.
readonly REGISTRY=registry.opentofu.org
# The pins of crates/runner-contract/src/providers.rs (a test checks that they agree).
readonly AWS_VERSION=6.47.0 GOOGLE_VERSION=8.0.0

build_provider() { # wrapper folder and Go module, output folder
  local module=github.com/hashicorp/$1 commit
  commit=$(cd "$1" && go list -m -f '{{.Version}}' "$module")
  echo "building $module $commit..." >&2
  GOCACHE="$2/gocache" go_build "$1" "$module" "$2/$1" "-s -w"
  rm -rf "$2/gocache"
}

# The AWS provider's source is copied (hard links into the module cache), trimmed, and built through a copy of the
# wrapper module that replaces the published module by that copy.
build_aws() {
  local module=github.com/hashicorp/terraform-provider-aws published
  published=$(cd terraform-provider-aws && go mod download -json "$module" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  echo "building $module $(basename "$published") with the services of terraform-provider-aws/services..." >&2
  cp -al "$published" "$1/source" 2>/dev/null || cp -a "$published" "$1/source"
  chmod u+w "$1/source/internal/provider/sdkv2" "$1/source/internal/conns"
  mkdir "$1/wrapper" && cp terraform-provider-aws/go.mod terraform-provider-aws/go.sum "$1/wrapper/"
  (cd "$1/wrapper" && go mod edit -replace="$module=$1/source")
  terraform-provider-aws/trim.py "$1/source" "$1/wrapper" terraform-provider-aws/services
  GOCACHE="$1/gocache" go_build "$1/wrapper" "$module" "$1/terraform-provider-aws" "-s -w"
  chmod -R u+w "$1/source" && rm -rf "$1/source" "$1/wrapper" "$1/gocache"
}
build_google() { build_provider terraform-provider-google "$1"; }

aws=$(CACHE_KEY_FILES="terraform-provider-aws/trim.py terraform-provider-aws/services" \
  cached_go_build terraform-provider-aws terraform-provider-aws terraform-provider-aws build_aws | tail -n1)
google=$(cached_go_build terraform-provider-google terraform-provider-google terraform-provider-google build_google \
  | tail -n1)

# The mirror: hard links to the cached binaries (no copy of ~1 GB), named as tofu's unpacked layout expects.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner"
mirror="$cache/terraform-providers/$(basename "$aws")-$(basename "$google")-$AWS_VERSION-$GOOGLE_VERSION"
if [[ ! -d "$mirror/mirror" ]]; then
  rm -rf "$mirror.tmp" && mkdir -p "$mirror.tmp"
  link() { # binary, provider name, version
    local folder="$mirror.tmp/$REGISTRY/hashicorp/$2/$3/linux_amd64"
    mkdir -p "$folder"
    ln "$1" "$folder/terraform-provider-$2_v$3" 2>/dev/null || cp "$1" "$folder/terraform-provider-$2_v$3"
  }
  link "$aws/terraform-provider-aws" aws "$AWS_VERSION"
  link "$google/terraform-provider-google" google "$GOOGLE_VERSION"
  mkdir -p "$mirror" && mv -T "$mirror.tmp" "$mirror/mirror"
fi
# No `direct` block: a provider that is not in the mirror fails init instead of reaching a registry; and the
# registries' service discovery points at a closed loopback port, so that nothing could reach one anyway.
cat >"$mirror/tofurc.tmp" <<TOFURC
provider_installation {
  filesystem_mirror {
    path = "$mirror/mirror"
  }
}

host "registry.opentofu.org" {
  services = {
    "providers.v1" = "http://127.0.0.1:9/v1/providers/"
    "modules.v1"   = "http://127.0.0.1:9/v1/modules/"
  }
}

host "registry.terraform.io" {
  services = {
    "providers.v1" = "http://127.0.0.1:9/v1/providers/"
    "modules.v1"   = "http://127.0.0.1:9/v1/modules/"
  }
}
TOFURC
mv "$mirror/tofurc.tmp" "$mirror/tofurc"

# The lock file of each pin, named as the runner looks it up (ProviderVersion::lock_file_name), with the hashes of
# these builds (not the releases'): the tests install them, and the image built here carries them.
if [[ ! -d "$mirror/test-locks" ]]; then
  tofu="$("$(dirname "${BASH_SOURCE[0]}")/build-tofu.sh" | tail -n1)/tofu"
  rm -rf "$mirror/test-locks.tmp" && mkdir -p "$mirror/test-locks.tmp"
  for pin in "aws:$AWS_VERSION" "google:$GOOGLE_VERSION"; do
    name=${pin%%:*} version=${pin#*:}
    scratch=$(mktemp -d)
    printf 'terraform {\n  required_providers {\n    %s = {\n      source  = "hashicorp/%s"\n      version = "%s"\n    }\n  }\n}\n' \
      "$name" "$name" "$version" >"$scratch/main.tf"
    (cd "$scratch" && TF_CLI_CONFIG_FILE="$mirror/tofurc" "$tofu" init -input=false -no-color -backend=false >&2)
    cp "$scratch/.terraform.lock.hcl" "$mirror/test-locks.tmp/hashicorp-$name-$version.terraform.lock.hcl"
    rm -rf "$scratch"
  done
  mv -T "$mirror/test-locks.tmp" "$mirror/test-locks"
fi
echo "$mirror/tofurc"
