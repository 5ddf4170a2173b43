#!/usr/bin/env bash
# Builds the workspace with the toolchain of the declared `rust-version`, so the promise in
# Cargo.toml is checked rather than assumed. Fails when that toolchain cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[[ -n "$msrv" ]] || { echo "no rust-version in Cargo.toml" >&2; exit 1; }
rustup toolchain list | grep -q "^$msrv" || rustup toolchain install "$msrv" --profile minimal
# A separate target directory: the stable build's artefacts stay warm.
cargo "+$msrv" check --workspace --all-targets --locked --target-dir target/msrv
