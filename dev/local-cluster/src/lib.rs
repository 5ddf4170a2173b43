//! A real Kubernetes control plane on loopback, for the integration tests and for the README's
//! run command: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built by
//! `dev/control-plane/build.sh`, with kwok's simulated node or a real one ([`real_node`]:
//! containerd, the kubelet, kube-proxy, CoreDNS) running images made here ([`images`]).

pub mod command;
pub mod control_plane;
pub mod images;
pub mod pki;
pub mod real_node;

pub use control_plane::{
    ControlPlane, NodeKind, Options, bin_dir, binary, free_port, kubectl_cache_dir, readyz_ok,
};
