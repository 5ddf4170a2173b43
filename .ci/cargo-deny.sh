#!/usr/bin/env bash
# The dependency audit: licences (deny.toml's allow list), bans (duplicate versions, wildcard
# requirements) and sources (crates.io only). cargo-deny is built once into a versioned folder
# outside the repository, as the control plane is.
#
# Advisories are checked only when RustSec's advisory database can be fetched (it lives on
# github.com); without it the check is reported as not run, never as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.20.2
root="${XDG_CACHE_HOME:-$HOME/.cache}/trustyai-operator/tools/cargo-deny-$version"
if [[ ! -x "$root/bin/cargo-deny" ]]; then
  echo "building cargo-deny $version into $root" >&2
  cargo install cargo-deny --version "$version" --locked --root "$root" --quiet
fi
"$root/bin/cargo-deny" --workspace check --hide-inclusion-graph licenses bans sources
if timeout 20 git ls-remote https://github.com/rustsec/advisory-db HEAD > /dev/null 2>&1; then
  "$root/bin/cargo-deny" --workspace check advisories
else
  echo "cargo-deny: advisories NOT checked (github.com/rustsec/advisory-db is unreachable from here)" >&2
fi
