//! The webhook server under hostile input, as a separate process (`bench-server`: the operator's
//! `serve_https` and `webhook_router` with the chart's default limits) over real TLS on
//! loopback. Each test sends what an attacker or a careless client would and asserts that the
//! server answers it well-formed, keeps answering valid requests, and that its peak resident
//! memory (`VmHWM`) stays within the bound its limits promise. Timings are not asserted.

mod bodies;
mod connections;
mod memory;
mod support;
