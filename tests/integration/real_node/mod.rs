//! On a real node (kubelet, containerd, kube-proxy, a CNI bridge; `trustyai_local_cluster::
//! real_node`): containers really start from images made here, and what kwok never checks
//! (probes, security contexts, memory limits, Services routed by kube-proxy, SIGTERM) is in
//! force. Fails loudly on a machine that cannot run a real node.

mod access;
mod cert_modes;
mod chart;
mod database;
mod handover;
mod image_change;
mod images;
mod kserve_logger;
mod load;
mod metrics;
mod pods;
mod release;
mod scrape;
mod service;
mod service_api;
mod serving_secret;
mod single_writer;
mod uninstall;
mod upgrade;
