#!/usr/bin/env bash
# The Debian 13 (trixie) base every Debian-based image made here starts from: a minbase root
# from Debian's mirror, written as one tar (numeric owners kept).
#
#   dev/images/debian-base.sh OUT.tar
#
# TRUSTYAI_DEBIAN_MIRROR overrides the mirror (default http://deb.debian.org/debian). Needs root
# and Debian's debootstrap (make prerequisites installs it).
set -euo pipefail
out=$1
mirror=${TRUSTYAI_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d "${out}.root.XXXXXX")
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2; rm -f "$root.log"; exit 1
}
rm -f "$root.log"
chmod 755 "$root" # mktemp made it private; it is the image's /
# apt's downloaded archives are not part of a base.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" --numeric-owner -cf "$out.partial" .
mv "$out.partial" "$out"
