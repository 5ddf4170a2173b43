#!/usr/bin/env bash
# Builds the Go operator's conversion webhook on its own (main.go here) into a cache folder
# outside the repository named after the digest of its sources, and prints the binary's path.
#
#   bench/go-conversion/build.sh          build if missing, print the binary
#   bench/go-conversion/build.sh --print  only print the binary
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
digest=$(cat "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
bin="${XDG_CACHE_HOME:-$HOME/.cache}/trustyai-operator/go-conversion/$digest/go-conversion"
if [ "${1:-}" = "--print" ]; then echo "$bin"; exit 0; fi
if [ ! -x "$bin" ]; then
  echo "building: go-conversion" >&2
  (cd "$here" && CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" go build -o "$bin.tmp" .)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
