#!/bin/sh
# mmdebstrap --customize-hook of tools/image/mkrootfs.sh: $1 is the new root; runs on the host, outside the chroot.
# SHELL_LESS=1 also removes sh/bash/dash, perl-base, debconf and dpkg's own programs (dpkg's status database stays,
# so image scanners still see an accurate package list).
set -eu
root=$1
purge() { chroot "$root" dpkg --purge --force-depends --force-remove-essential "$@"; }
# shellcheck disable=SC2046,SC2016 # one word per package name; ${Package} is dpkg-query's, not the shell's
# git's Perl side (git add -i, send-email, svn...) and the manuals; awscli's help renderer (groff).
purge git-man liberror-perl perl libperl5.40 perl-modules-5.40 libperl5.36 perl-modules-5.36 groff-base 2>/dev/null \
  || purge git-man liberror-perl perl groff-base $(chroot "$root" dpkg-query -W -f='${Package}\n' 'libperl5*' 'perl-modules-*')
# The non-root user of the image: 65532, home /workspace (an emptyDir in the Job).
grep -q '^nonroot:' "$root/etc/group"  || echo 'nonroot:x:65532:' >> "$root/etc/group"
grep -q '^nonroot:' "$root/etc/passwd" || echo 'nonroot:x:65532:65532:nonroot:/workspace:/usr/sbin/nologin' >> "$root/etc/passwd"
install -d -o 65532 -g 65532 -m 0755 "$root/workspace"
if [ "${SHELL_LESS:-0}" = 1 ]; then
  purge debconf perl-base
  # Without a shell their maintainer scripts cannot run; dpkg skips scripts that do not exist.
  for p in bash dash dpkg; do rm -f "$root/var/lib/dpkg/info/$p.prerm" "$root/var/lib/dpkg/info/$p.postrm"; done
  purge bash
  # debianutils' trigger (update-shells) would need the shell that is being removed: leave it pending, fix by hand.
  # dpkg refuses to run without `sh` in PATH, so the last two are purged by the host's dpkg on the new root; their
  # prerm/postrm were deleted above, so no maintainer script runs (on the host or anywhere).
  for p in dash dpkg; do
    dpkg --root="$root" --force-script-chrootless --force-remove-essential --force-depends --no-triggers --purge "$p"
  done
  sed -i -e '\|/bin/sh$|d' -e '\|/bin/dash$|d' -e '\|/bin/bash$|d' -e '\|/bin/rbash$|d' "$root/etc/shells"
fi
# Caches and logs of the bootstrap.
rm -rf "$root/var/cache/apt"/* "$root/var/lib/apt/lists"/* "$root/var/log"/* "$root/var/cache/debconf"/*-old
