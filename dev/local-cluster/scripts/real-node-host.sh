#!/usr/bin/env bash
# The host changes a real node needs, each recorded in a journal before it is made, and undone
# from the journal. One real node per machine: the journal's folder holds its lock.
#
#   real-node-host.sh setup WORKDIR   replay what a crashed run left, then make the changes
#   real-node-host.sh undo            kill what the node left running and undo every change
#
# The journal is one line per change, "kind argument...", undone last line first:
#   addr CIDR DEV          an address added to DEV
#   link NAME              a link created
#   route DST DEV          a route added
#   sysctl KEY VALUE       KEY's value before the node (restored; the kubelet and CNI set some)
#   ruleset FILE           the nftables ruleset before the node (kube-proxy's and CNI's rules
#                          are iptables-nft rules: restoring the ruleset removes them all)
#   path PATH              a path that did not exist and is removed
#   cgroup DIR             a cgroup folder that did not exist (containerd's namespace under each
#                          controller): every process in it is killed (the containers: their
#                          roots and command lines do not name the working folder), then it
#                          is removed
#   netns-before FILE      the network namespaces that existed before (newer cni-* ones go)
#   workdir DIR            the node's working folder: processes rooted or running there are
#                          killed and its mounts are unmounted first
set -uo pipefail

state=/run/trustyai-local-cluster
journal=$state/real-node.journal

# The node's fixed addresses (dev/local-cluster/src/real_node.rs has the same).
node_cidr=10.87.0.1/32
bridge=trustyai0
bridge_cidr=10.88.0.1/16
service_cidr=10.96.0.0/16

# Paths the node's parts write whatever their configuration says.
# The kubelet makes its device-plugin socket there whatever its root folder; parents first.
fixed_paths=(/var/log/containers /var/log/pods /var/lib/cni /run/containerd /run/netns
             /var/lib/kubelet /var/lib/kubelet/device-plugins
             /var/lib/kubelet/device-plugins/kubelet.sock)
# Kernel settings the kubelet, the bridge plugin and kube-proxy may change.
sysctls=(kernel.panic kernel.panic_on_oops vm.overcommit_memory net.ipv4.ip_forward
         net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables)

record() { echo "$*" >> "$journal"; }

# Every process whose root or working folder is below DIR, or whose command line names it
# (containerd's shims, the containers themselves).
processes_of() {
  local dir=$1 pid
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    [ "$pid" = $$ ] && continue
    local root cwd
    root=$(readlink "/proc/$pid/root" 2>/dev/null) || continue
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || cwd=
    if [[ $root == "$dir"/* || $cwd == "$dir"/* ]] || tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/"; then
      echo "$pid"
    fi
  done
}

undo_line() {
  local kind=$1; shift
  case $kind in
    workdir)
      local dir=$1 pids
      pids=$(processes_of "$dir")
      [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
      # Wait for them to go, so their mounts can be removed.
      for _ in $(seq 50); do [ -z "$(processes_of "$dir")" ] && break; sleep 0.1; done
      findmnt -rn -o TARGET | grep -F "$dir/" | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null
      done ;;
    addr) ip addr del "$1" dev "$2" 2>/dev/null ;;
    link) ip link del "$1" 2>/dev/null ;;
    route) ip route del "$1" dev "$2" 2>/dev/null ;;
    sysctl) sysctl -q -w "$1=$2" >/dev/null 2>&1 ;;
    ruleset)
      nft flush ruleset 2>/dev/null
      nft -f "$1" 2>/dev/null
      rm -f "$1" ;;
    netns-before)
      local ns
      for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-'); do
        grep -qx "$ns" "$1" || ip netns delete "$ns" 2>/dev/null
      done
      rm -f "$1" ;;
    cgroup)
      [ -d "$1" ] || return 0
      local pids
      for _ in $(seq 50); do
        pids=$(find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null)
        [ -z "$pids" ] && break
        kill -KILL $pids 2>/dev/null
        sleep 0.1
      done
      find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null ;;
    path)
      findmnt -rn -o TARGET | grep -F "$1/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
      rm -rf "$1" ;;
  esac
}

undo() {
  [ -s "$journal" ] || { rm -f "$journal"; return 0; }
  # Last change first.
  tac "$journal" | while read -r line; do
    # shellcheck disable=SC2086
    undo_line $line
  done
  rm -f "$journal"
}

setup() {
  local workdir=$1
  mkdir -p "$state"
  # What a crashed run left.
  if [ -s "$journal" ]; then
    echo "undoing what an earlier real node left on this host ($journal)" >&2
    undo
  fi
  : > "$journal"
  record workdir "$workdir"
  local p
  for p in "${fixed_paths[@]}"; do
    [ -e "$p" ] || record path "$p"
  done
  local controller
  for controller in /sys/fs/cgroup/*/; do
    [ -e "${controller}k8s.io" ] || record cgroup "${controller}k8s.io"
  done
  local before=$state/netns-before
  ip netns list 2>/dev/null | awk '{print $1}' > "$before"
  record netns-before "$before"
  local rules=$state/ruleset-before.nft
  nft list ruleset > "$rules" || { echo "cannot read the nftables ruleset" >&2; return 1; }
  record ruleset "$rules"
  local key value
  for key in "${sysctls[@]}"; do
    value=$(sysctl -n "$key" 2>/dev/null) && record sysctl "$key" "$value"
  done
  record addr "$node_cidr" lo
  ip addr add "$node_cidr" dev lo || return 1
  record link "$bridge"
  ip link add name "$bridge" type bridge || return 1
  ip addr add "$bridge_cidr" dev "$bridge" || return 1
  ip link set "$bridge" up || return 1
  # Traffic from the host to ClusterIPs leaves by the bridge, with the bridge's address, before
  # and after kube-proxy's rules: never by the default route.
  record route "$service_cidr" "$bridge"
  ip route add "$service_cidr" dev "$bridge" src "${bridge_cidr%/*}" || return 1
  # The bridge forwards between pods and the host's Service rules.
  sysctl -q -w net.ipv4.ip_forward=1 >/dev/null || return 1
}

case ${1:-} in
  setup) [ $# = 2 ] || { echo "usage: $0 setup WORKDIR" >&2; exit 2; }; setup "$2" ;;
  undo) undo ;;
  *) echo "usage: $0 setup WORKDIR | undo" >&2; exit 2 ;;
esac
