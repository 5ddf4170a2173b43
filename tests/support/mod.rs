//! Test support shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different part of the support code

pub use trustyai_local_cluster::ControlPlane;
