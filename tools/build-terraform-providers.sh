#!/usr/bin/env bash
# Builds the Terraform providers the modules use (hashicorp/aws, hashicorp/google) from the Go module proxy (no
# registry downloads), each into a cache folder keyed by its wrapper module (tools/terraform-provider-*) and the
# Go version, laid out as a tofu filesystem mirror, and writes a tofu CLI configuration that installs providers
# from these mirrors only. The Terraform module tests and the pipeline test point TF_CLI_CONFIG_FILE at it.
# The last line of stdout is that file:  export TF_CLI_CONFIG_FILE=$(tools/build-terraform-providers.sh | tail -n1)
#
# The versions are the ones the providers' own version files name at the pinned commits; the configurations pin
# exactly these (resources/terraform/versions.json). The AWS build is long (about 37 min on two cores, ~10 GB of
# compiled packages in a private Go build cache that is removed after linking); it runs once per machine.
set -euo pipefail
# shellcheck source=lib/cached-go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cached-go-build.sh"

# The registry host tofu resolves `hashicorp/<name>` to: the mirror must use it.
readonly REGISTRY=registry.opentofu.org
readonly AWS_VERSION=6.47.1 GOOGLE_VERSION=8.0.0
readonly AWS_BINARY=$REGISTRY/hashicorp/aws/$AWS_VERSION/linux_amd64/terraform-provider-aws_v$AWS_VERSION
readonly GOOGLE_BINARY=$REGISTRY/hashicorp/google/$GOOGLE_VERSION/linux_amd64/terraform-provider-google_v$GOOGLE_VERSION

build_provider() { # wrapper folder, Go module, output path, version variable, version
  local wrapper=$1 module=$2 output=$3 variable=$4 version=$5 commit
  commit=$(cd "$wrapper" && go list -m -f '{{.Version}}' "$module")
  echo "building $module $commit as $version..." >&2
  mkdir -p "$(dirname "$output")"
  GOCACHE="$(dirname "$output")/gocache" go_build "$wrapper" "$module" "$output" \
    "-s -w -X $module/version.$variable=$version"
  rm -rf "$(dirname "$output")/gocache"
}

build_aws() {
  build_provider terraform-provider-aws github.com/hashicorp/terraform-provider-aws "$1/$AWS_BINARY" \
    ProviderVersion "$AWS_VERSION"
}

build_google() {
  build_provider terraform-provider-google github.com/hashicorp/terraform-provider-google "$1/$GOOGLE_BINARY" \
    ProviderVersion "$GOOGLE_VERSION"
}

aws_mirror=$(cached_go_build terraform-provider-aws terraform-provider-aws "$AWS_BINARY" build_aws | tail -n1)
google_mirror=$(cached_go_build terraform-provider-google terraform-provider-google "$GOOGLE_BINARY" build_google \
  | tail -n1)

config="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/terraform-providers.$(basename "$aws_mirror")-$(basename "$google_mirror").tofurc"
# No `direct` block: a provider that is not in a mirror fails init instead of reaching a registry.
cat >"$config.tmp" <<TOFURC
provider_installation {
  filesystem_mirror {
    path    = "$aws_mirror"
    include = ["$REGISTRY/hashicorp/aws"]
  }
  filesystem_mirror {
    path    = "$google_mirror"
    include = ["$REGISTRY/hashicorp/google"]
  }
}
TOFURC
mv "$config.tmp" "$config"
echo "$config"
