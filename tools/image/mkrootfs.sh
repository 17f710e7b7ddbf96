#!/bin/sh
# The image's base root filesystem from Debian's packages (mmdebstrap, variant essential: no apt in it):
# ca-certificates, git and awscli (AWS CLI v2), trimmed like Debian's -slim images, without perl, a shell or dpkg's
# programs (slim-hook.sh), and the user 65532 with /workspace.
#   tools/image/mkrootfs.sh SUITE OUT.tar
set -eu
suite=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
exec nice -n 10 mmdebstrap --mode=root --variant=essential --include=ca-certificates,git,awscli \
  --aptopt='Apt::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/groff/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --customize-hook="SHELL_LESS=1 $here/slim-hook.sh \"\$1\"" \
  "$suite" "$out" http://deb.debian.org/debian
