#!/usr/bin/env bash
# MariaDB's image root, from Debian 13's packages, for the TrustyAI service's DATABASE mode.
#
#   dev/images/mariadb.sh BASE.tar OUT_ROOT
#
# The server runs as the image's user (mysql, uid 999) with its data in /var/lib/mysql, a
# volume's mount point (under a read-only root, /tmp needs one too); /entrypoint.sh initialises an empty data folder and creates the database
# and user the environment names (MARIADB_DATABASE, MARIADB_USER, MARIADB_PASSWORD) before it
# starts the server on 0.0.0.0:3306. Runs in its own mount namespace, like trustyai-service.sh.
set -euo pipefail
base=$1 out=$2
if [ -z "${TRUSTYAI_IMAGE_NS:-}" ]; then
  exec env TRUSTYAI_IMAGE_NS=1 unshare --mount --propagation private "$0" "$@"
fi
r=$(mktemp -d "${out}.work.XXXXXX")
chmod 755 "$r" # apt downloads as _apt
trap 'umount -l "$r/proc" "$r/dev" 2>/dev/null || true; rm -rf "$r"' EXIT
tar -C "$r" --numeric-owner -xf "$base"
chmod 755 "$r"
cp /etc/resolv.conf "$r/etc/resolv.conf"
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
in_root() {
  chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"
}
# The package's user gets a fixed id, so pods can name it (runAsUser, fsGroup).
in_root groupadd --system --gid 999 mysql
in_root useradd --system --uid 999 --gid 999 --home-dir /var/lib/mysql --shell /usr/sbin/nologin mysql
in_root apt-get update -qq
# A policy that starts no service while packages install (there is no init in a chroot).
printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
chmod 755 "$r/usr/sbin/policy-rc.d"
in_root apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null
rm -f "$r/usr/sbin/policy-rc.d"
in_root apt-get clean
umount -l "$r/proc" "$r/dev"
rm -rf "$r"/var/lib/apt/lists/* "$r"/var/log/apt "$r"/var/log/dpkg.log "$r"/var/cache/debconf/*-old \
  "$r"/usr/share/locale "$r"/usr/share/man "$r"/usr/share/info "$r"/var/lib/mysql/*
# The server listens on every address; the socket and pid file live in the data folder, the one
# writable place.
cat >"$r/etc/mysql/mariadb.conf.d/99-image.cnf" <<'CNF'
[mariadbd]
bind-address = 0.0.0.0
datadir = /var/lib/mysql
socket = /var/lib/mysql/mysqld.sock
pid-file = /var/lib/mysql/mysqld.pid
skip-name-resolve
[client]
socket = /var/lib/mysql/mysqld.sock
CNF
cat >"$r/entrypoint.sh" <<'SH'
#!/bin/sh
# Initialises an empty data folder with the database and user the environment names, then runs
# the server in the foreground.
set -eu
data=/var/lib/mysql
if [ ! -d "$data/mysql" ]; then
  : "${MARIADB_DATABASE:?}" "${MARIADB_USER:?}" "${MARIADB_PASSWORD:?}"
  mariadb-install-db --datadir="$data" --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve --force >/dev/null
  esc() { printf '%s' "$1" | sed "s/'/''/g"; }
  init="$data/.init.sql"
  cat >"$init" <<SQL
-- Bootstrap mode starts without the grant tables; load them first.
FLUSH PRIVILEGES;
CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;
CREATE USER '$(esc "$MARIADB_USER")'@'%' IDENTIFIED BY '$(esc "$MARIADB_PASSWORD")';
GRANT ALL ON \`$MARIADB_DATABASE\`.* TO '$(esc "$MARIADB_USER")'@'%';
SQL
  mariadbd --datadir="$data" --bootstrap <"$init"
  rm -f "$init"
fi
exec mariadbd
SH
chmod 755 "$r/entrypoint.sh"
: >"$r/etc/resolv.conf"
rm -rf "$out"
mv "$r" "$out"
trap - EXIT
