#!/usr/bin/env bash
# The TrustyAI service's image root, from its source, without a registry: the same steps as the
# source's Containerfile, on Debian 13 (Python 3.13; the service needs >= 3.12).
#
#   dev/images/trustyai-service.sh SOURCE BASE.tar VERSION OUT_ROOT
#
# SOURCE is the service's source (pyproject.toml, the hashed requirements files, src/, LICENSE);
# BASE.tar the Debian 13 base (debian-base.sh); VERSION the version the package reports.
# A build root gets the compiler, Connector/C's headers and a venv at /opt/app-root with the
# hashed requirements (mariadb and goodpoints are sdists and compile here) and the service; the
# result is a fresh base with only the runtime packages and that venv: no compiler, uid 1001,
# the service's LICENSE at /licenses/LICENSE.
#
# Runs in its own mount namespace, so the /proc and /dev it mounts for the build go with it.
# pip reaches its index with the host's CA store, copied into the build root only.
set -euo pipefail
src=$(cd "$1" && pwd) base=$2 version=$3 out=$4
if [ -z "${TRUSTYAI_IMAGE_NS:-}" ]; then
  exec env TRUSTYAI_IMAGE_NS=1 unshare --mount --propagation private "$0" "$@"
fi
work=$(mktemp -d "${out}.work.XXXXXX")
chmod 755 "$work" # apt downloads as _apt
cleanup() {
  for m in "$work"/build/proc "$work"/build/dev "$work"/run/proc "$work"/run/dev; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
unpack() { # root
  mkdir -p "$1"
  tar -C "$1" --numeric-owner -xf "$base"
  chmod 755 "$1"
  cp /etc/resolv.conf "$1/etc/resolv.conf"
  mount -t proc proc "$1/proc"
  mount --rbind /dev "$1/dev"
}
in_root() { # root command...
  local root=$1; shift
  chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 "$@"
}
apt_install() { # root packages...
  local root=$1; shift
  in_root "$root" apt-get update -qq
  in_root "$root" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

runtime_packages=(python3 libmariadb3 ca-certificates)

# The build root.
b=$work/build
unpack "$b"
apt_install "$b" "${runtime_packages[@]}" python3-venv python3-dev gcc libc6-dev libmariadb-dev pkgconf
mkdir -p "$b/opt/app-root/src"
cp "$src"/pyproject.toml "$src"/README.md "$src"/requirements.txt "$src"/requirements-build.txt "$b/opt/app-root/src/"
cp -r "$src/src" "$b/opt/app-root/src/src"
cp /etc/ssl/certs/ca-certificates.crt "$b/tmp/host-ca.crt"
pip() {
  chroot "$b" env -i PATH=/opt/app-root/bin:/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 \
    PIP_CERT=/tmp/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    SETUPTOOLS_SCM_PRETEND_VERSION="$version" \
    sh -c "cd /opt/app-root/src && pip $*"
}
in_root "$b" python3 -m venv /opt/app-root
pip install -q --no-deps --require-hashes -r requirements-build.txt
pip install -q --no-deps --no-build-isolation --require-hashes -r requirements.txt
pip install -q --no-deps --no-build-isolation .
pip uninstall -q -y hatchling hatch-vcs setuptools setuptools-scm vcs-versioning trove-classifiers pathspec pluggy cython
rm -rf "$b/opt/app-root/src"

# The runtime root: the base, the runtime packages, the venv.
r=$work/run
unpack "$r"
apt_install "$r" "${runtime_packages[@]}"
in_root "$r" apt-get clean
rm -rf "$r"/var/lib/apt/lists/* "$r"/var/log/apt "$r"/var/log/dpkg.log "$r"/var/cache/debconf/*-old \
  "$r"/usr/share/locale "$r"/usr/share/man "$r"/usr/share/info
umount -l "$r/proc" "$r/dev"
cp -a "$b/opt/app-root" "$r/opt/app-root"
mkdir -p "$r/opt/app-root/src" "$r/licenses"
cp "$src/LICENSE" "$r/licenses/LICENSE"
echo "default:x:1001:0:TrustyAI service:/opt/app-root/src:/usr/sbin/nologin" >>"$r/etc/passwd"
: >"$r/etc/resolv.conf"
rm -rf "$out"
mv "$r" "$out"
