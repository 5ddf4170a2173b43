//! The trustyai-operator binary's library: CLI, wiring, reconcile loop, leader election and
//! metrics. The API types and pure rules live in `trustyai-crds`, the HTTPS handlers in
//! `trustyai-webhooks`, and TLS material in `trustyai-certs`.

pub mod cli;
pub mod telemetry;

/// The operator's version, from Cargo.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub mod controller;
pub mod crd_maintenance;
pub mod error_chain;
pub mod go_flags;
pub mod install_check;
pub mod kube_client;
pub mod leader_duties;
pub mod leader_election;
pub mod list_strategy;
pub mod metrics;
pub mod offline;
pub mod run;
pub mod secret_cache;
pub mod shutdown;
pub mod storage_migration;
pub mod supervisor;
pub mod uninstall;
pub mod webhook_configurations;
