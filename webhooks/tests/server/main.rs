//! Integration tests of the webhook HTTPS server and the ops server, over real sockets on
//! 127.0.0.1 with certificates made by rcgen.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod client_trust;
mod common;
mod https;
mod ops;
