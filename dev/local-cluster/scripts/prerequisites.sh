#!/usr/bin/env bash
# Checks what `make run` and `make test` need before any long build starts, and says what is
# missing and how to get it. The control plane is built from Go modules only when it is not
# cached yet, so Go is needed only then.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$("$here/../../control-plane/build.sh" --print)
missing=0
need() { # command, what it is for, how to get it
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "missing: $1 ($2). $3" >&2
    missing=1
  fi
}
need cargo "builds the operator" "Install Rust with rustup (https://rustup.rs)."
need kubectl "applies the sample and is how you look at the cluster" "Install kubectl 1.30 or newer."
cached=1
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy etcd kwok helm promcheck; do
  [ -x "$bin/$b" ] || cached=0
done
if [ $cached = 0 ]; then
  need go "builds the control plane from its Go modules, once" "Install Go 1.26 or newer."
  if [ $missing = 0 ]; then
    echo "The control plane is not cached yet: building it from its Go modules into $bin" >&2
    echo "(once per machine; about 15 minutes on two cores, progress below)." >&2
  fi
fi
# The real node's parts from Debian (containerd, runc, the CNI plugins, iptables and nftables,
# conntrack, busybox-static for the pause image, debootstrap for the operand's image), installed
# when this runs as root and they are missing. Without them (or without root) `make run` falls
# back to the simulated node and says why; the real-node tests fail and say the same.
packages=(containerd runc containernetworking-plugins iptables nftables conntrack busybox-static debootstrap)
absent=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || absent+=("$p")
done
if [ ${#absent[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing the real node's Debian packages: ${absent[*]}" >&2
    if ! { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${absent[@]}" >/dev/null; }; then
      echo "missing: ${absent[*]} (apt-get install failed; the real node needs them)" >&2
      missing=1
    fi
  else
    echo "note: no real node here without root and the Debian packages ${absent[*]}: make run uses the simulated node" >&2
  fi
fi
exit $missing
