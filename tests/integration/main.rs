#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! The integration tests: the operator binary, its CLI and its Helm chart against a real local
//! control plane (`support::control_planes`: one per concern, one at a time), and the CLI
//! commands that need none. One module per concern; `support` holds what they share.

mod support;

mod admission;
mod cli_convert;
mod cli_convert_corpus;
mod cli_validate;
mod control_plane;
mod conversion;
mod graceful_stop;
mod helm_chart;
mod helm_rbac;
mod host_footprint;
mod leader_election;
mod operand_ca_rotation;
mod operations;
mod real_node;
mod reconcile;
mod webhook_tls;
