#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, kwok), the real node's kubelet, kube-proxy and CoreDNS, helm and promcheck
# (Prometheus' own scrape parser and rule checker, see prometheus/main.go) from their Go
# modules into a versioned cache folder outside the repository, skipping what is already there.
#
#   dev/control-plane/build.sh          build what is missing, print the bin folder
#   dev/control-plane/build.sh --print  only print the bin folder
#
# The folder is named after the pinned versions, so changing a pin builds anew.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

pin() { # module-file module-path -> version
  awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { for (i = 1; i <= NF; i++) if ($i ~ /^v[0-9]/) { print $i; exit } }' "$here/$1/go.mod"
}
k8s=$(pin kubernetes k8s.io/kubernetes)
etcd=$(pin etcd go.etcd.io/etcd/server/v3)
kwok=$(pin kwok sigs.k8s.io/kwok)
helm=$(pin helm helm.sh/helm/v3)
prom=$(pin prometheus github.com/prometheus/prometheus)
dns=$(pin coredns github.com/coredns/coredns)
recipe=2 # bump when the build flags below change
cache_root=${TRUSTYAI_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trustyai-operator/control-plane}
bin="$cache_root/k8s-$k8s-etcd-$etcd-kwok-$kwok-helm-$helm-prom-$prom-dns-$dns-r$recipe/bin"

if [ "${1:-}" = "--print" ]; then echo "$bin"; exit 0; fi
mkdir -p "$bin"
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"

# A folder with Go sources of its own (promcheck) is built anew when they change: the digest of
# its sources, go.mod and go.sum is kept beside the binary. The other folders only pin modules,
# whose versions name the cache folder.
sources_digest() { # dir
  local files=("$here/$1"/*.go)
  [ -e "${files[0]}" ] || return 0
  cat "${files[@]}" "$here/$1/go.mod" "$here/$1/go.sum" | sha256sum | cut -d' ' -f1
}

build() { # dir ldflags output-names... -- packages...
  local dir=$1 ldflags=$2; shift 2
  local outs=() pkgs=() missing=0 digest
  while [ "$1" != "--" ]; do outs+=("$1"); shift; done; shift; pkgs=("$@")
  digest=$(sources_digest "$dir")
  for o in "${outs[@]}"; do
    [ -x "$bin/$o" ] || missing=1
    if [ -n "$digest" ] && [ "$(cat "$bin/.$o.sources" 2>/dev/null)" != "$digest" ]; then missing=1; fi
  done
  if [ $missing = 0 ]; then echo "cached: ${outs[*]}" >&2; return; fi
  echo "building: ${outs[*]} (in $dir)" >&2
  local start=$SECONDS
  (cd "$here/$dir" && go build -ldflags "$ldflags" -o "$bin/.tmp-$dir/" "${pkgs[@]}")
  for o in "${outs[@]}"; do
    mv "$bin/.tmp-$dir/$o" "$bin/$o"
    if [ -n "$digest" ]; then echo "$digest" > "$bin/.$o.sources"; fi
  done
  rmdir "$bin/.tmp-$dir"
  echo "built: ${outs[*]} in $((SECONDS - start))s" >&2
}

minor=${k8s#v1.}; minor=${minor%%.*}
kver="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kver="$kver -X $p.gitVersion=$k8s -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
build kubernetes "$kver" kube-apiserver kube-controller-manager kube-scheduler -- \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
# The real node's kubelet and kube-proxy, from the same module (a separate step, so a cache
# made before them keeps its control-plane binaries).
build kubernetes "$kver" kubelet kube-proxy -- \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
build etcd "-s -w" etcd -- .
build kwok "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$kwok" kwok -- sigs.k8s.io/kwok/cmd/kwok
# kwok simulates nothing without Stage objects; take the "fast" set (nodes become Ready and keep
# a lease, pods become Running and Ready, deleted pods go away) from the pinned kwok module.
if [ ! -s "$bin/kwok-stages.yaml" ]; then
  stages=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"; cat "$stages/$f"
  done > "$bin/kwok-stages.yaml.tmp"
  mv "$bin/kwok-stages.yaml.tmp" "$bin/kwok-stages.yaml"
fi
# As helm's own Makefile does: the Kubernetes version helm assumes without a cluster
# (`helm template`, `helm lint`) is the one of its client-go module; without these flags it is
# 1.20 and charts that require a newer Kubernetes fail `helm template` without --kube-version.
client_go=$(cd "$here/helm" && go list -m -f '{{.Version}}' k8s.io/client-go)
kminor=${client_go#v0.}; kminor=${kminor%%.*} # client-go v0.N is Kubernetes 1.N
hver="-s -w -X helm.sh/helm/v3/internal/version.version=$helm"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  hver="$hver -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$kminor"
done
build helm "$hver" helm -- helm.sh/helm/v3/cmd/helm
build prometheus "-s -w" promcheck -- .
# The real node's cluster DNS.
build coredns "-s -w" coredns -- github.com/coredns/coredns
echo "$bin"
