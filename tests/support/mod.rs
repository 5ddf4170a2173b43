//! Test support shared by the integration tests: a real local control plane on loopback.
#![allow(dead_code)] // each test binary uses a different part of the support code

pub mod control_plane;
pub mod pki;

pub use control_plane::ControlPlane;
