//! A real Kubernetes control plane on loopback, for the integration tests and for the README's
//! run command: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with one
//! simulated node, built by `dev/control-plane/build.sh`.

pub mod command;
pub mod control_plane;
pub mod images;
pub mod pki;
pub mod real_node;

pub use control_plane::{
    ControlPlane, NodeKind, Options, bin_dir, binary, free_port, kubectl_cache_dir,
};
