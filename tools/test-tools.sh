#!/usr/bin/env bash
# Installs what the terraform-runner and Terraform module tests need besides tofu (tools/build-tofu.sh):
#   - a venv with moto's server (a local AWS: S3, SSM, ...) and the AWS CLI v1, both pinned, at
#     ${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/venv-aws (reinstalled only when the pins change);
#   - shellcheck, from Debian's packages, when it is missing (uses sudo when not root).
# Progress goes to stderr; the last line of stdout is the absolute path of the venv's bin folder:
#   TEST_AWS_TOOLS_BIN_DIR=$(tools/test-tools.sh | tail -n1)
set -euo pipefail

MOTO_VERSION=5.2.5
AWSCLI_VERSION=1.46.3

cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner"
venv="$cache/venv-aws"
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

mkdir -p "$cache"
# One installation at a time per machine: a second caller waits, then finds the venv ready.
exec 9>"$cache/.venv-aws.lock"
flock 9

installed() {
  [[ -x "$venv/bin/moto_server" && -x "$venv/bin/aws" ]] || return 1
  local versions
  versions=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("moto"), m.version("awscli"))' \
    2>/dev/null) || return 1
  [[ "$versions" == "$MOTO_VERSION $AWSCLI_VERSION" ]]
}

if installed; then
  echo "moto $MOTO_VERSION and awscli $AWSCLI_VERSION already installed in $venv" >&2
else
  echo "installing moto[server] $MOTO_VERSION and awscli $AWSCLI_VERSION into $venv" >&2
  python3 -m venv --clear "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
    "moto[server]==$MOTO_VERSION" "awscli==$AWSCLI_VERSION"
  installed || { echo "the venv in $venv does not have the pinned versions after installing" >&2; exit 1; }
fi

if ! command -v shellcheck >/dev/null 2>&1; then
  echo "installing shellcheck from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null
fi
echo "shellcheck: $(shellcheck --version | sed -n 's/^version: //p')" >&2

echo "$venv/bin"
