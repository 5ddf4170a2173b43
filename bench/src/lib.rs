//! Shared pieces of the operator's benchmarks (`make bench`): the TrustyAIService fixtures and
//! review bodies, a TLS client for the webhook server, latency statistics, and the report.
//!
//! Nothing here asserts a timing: the harness measures and reports.

pub mod client;
pub mod cluster;
pub mod fixtures;
pub mod http_load;
pub mod proxy;
pub mod report;
pub mod server_process;
pub mod side_by_side;
pub mod stats;
