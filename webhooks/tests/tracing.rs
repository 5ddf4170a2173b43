//! Request tracing of `serve_https`. A test binary of its own: tracing caches whether a
//! callsite is enabled across threads, so a test on another thread without a subscriber could
//! disable the request span here before this test's subscriber is installed.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[allow(dead_code)]
#[path = "server/common.rs"]
mod common;

use std::sync::Arc;

use hyper::StatusCode;
use trustyai_webhooks::HttpsOptions;

use common::{HttpClient, TestServer, client_config};

const HTTP11: &[u8] = b"http/1.1";

/// Collects formatted tracing output of the current thread.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

// The current-thread runtime of `#[tokio::test]` keeps every server task on this thread, where
// the subscriber is installed.
#[tokio::test]
async fn every_request_is_traced_in_one_line_with_its_outcome() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (ca, server, _control) = TestServer::for_new_ca(HttpsOptions::default()).await;
    let mut client = HttpClient::connect(
        server.addr,
        client_config(&ca.cert_der, &[HTTP11], rustls::ALL_VERSIONS),
    )
    .await;
    assert_eq!(client.status("/version").await, StatusCode::OK);
    assert_eq!(client.status("/nowhere").await, StatusCode::NOT_FOUND);

    let logs = captured.text();
    let line = |path: &str| {
        logs.lines()
            .find(|line| line.contains("http_request") && line.contains(&format!("path={path}")))
            .unwrap_or_else(|| panic!("no request line for {path} in:\n{logs}"))
            .to_owned()
    };
    let served = line("/version");
    for field in [
        "method=GET",
        "status=200",
        "latency_ms=",
        "remote=127.0.0.1:",
        "request served",
    ] {
        assert!(served.contains(field), "{field} missing from {served}");
    }
    let rejected = line("/nowhere");
    assert!(rejected.contains("status=404"), "{rejected}");
}
