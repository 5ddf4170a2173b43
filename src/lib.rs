//! The trustyai-operator binary's library: CLI, wiring, reconcile loop, leader election and
//! metrics. The API types and pure rules live in `trustyai-crds`, the HTTPS handlers in
//! `trustyai-webhooks`, and TLS material in `trustyai-certs`.

pub mod cli;
pub mod telemetry;

/// The operator's version, from Cargo.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
mod controller;
pub mod crd_maintenance;
pub mod error_chain;
pub mod go_flags;
pub mod install_check;
mod kube_client;
mod leader_duties;
pub mod leader_election;
mod list_strategy;
mod metric_controller;
pub mod metrics;
pub mod offline;
pub mod run;
mod secret_cache;
mod shutdown;
pub mod storage_migration;
mod supervisor;
pub mod uninstall;
pub mod webhook_configurations;
