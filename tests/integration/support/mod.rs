//! Test support shared by the integration tests.

pub mod cli;
pub mod cluster;
pub mod control_planes;
pub mod helm;
pub mod host_footprint;
pub mod https;
pub mod operator;
pub mod proxy;
pub mod real_pods;
pub mod samples;
pub mod temp;
pub mod wait;

pub use trustyai_local_cluster::ControlPlane;
