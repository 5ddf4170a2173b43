//! Test support shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different part of the support code

pub mod cli;
pub mod cluster;
pub mod helm;
pub mod operator;
pub mod proxy;
pub mod samples;
pub mod test_pods;
pub mod wait;

#[allow(unused_imports)] // as for dead_code: not every test binary uses it
pub use trustyai_local_cluster::ControlPlane;

/// Serializes the tests of one binary that run an operator: the CRD's conversion webhook and
/// the webhook registrations are cluster-wide, so two operators would fight over them.
pub static CLUSTER_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
