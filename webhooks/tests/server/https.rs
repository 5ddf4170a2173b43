//! `serve_https` over real TLS connections on 127.0.0.1.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::stream;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Method, StatusCode, Version};
use rustls::ProtocolVersion;
use rustls::version::{TLS12, TLS13};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use trustyai_webhooks::{HttpsOptions, ServingCertificate, TlsError, routes};

use crate::common::{
    HoldControl, HttpClient, Leaf, PATIENCE, TestCa, TestResponse, TestServer, client_config, full,
    hold, presented_leaf, test_router, tls_connect,
};

const H2: &[u8] = b"h2";
const HTTP11: &[u8] = b"http/1.1";
const BOTH_VERSIONS: &[&rustls::SupportedProtocolVersion] = &[&TLS13, &TLS12];

async fn start_default() -> (TestCa, TestServer) {
    let (ca, server, _control) = TestServer::for_new_ca(HttpsOptions::default()).await;
    (ca, server)
}

/// A server of the test router with the default options, presenting `cert`.
async fn serve(cert: Arc<ServingCertificate>) -> TestServer {
    let (hold, _control) = hold();
    TestServer::start(test_router(hold), cert, HttpsOptions::default()).await
}

/// A server presenting a new leaf of `ca`, and that leaf.
async fn serve_a_leaf_of(ca: &TestCa) -> (Leaf, TestServer) {
    let leaf = ca.leaf();
    let server = serve(leaf.serving_certificate()).await;
    (leaf, server)
}

/// A connection trusting `ca`, offering `alpn`.
async fn connect(server: &TestServer, ca: &TestCa, alpn: &[u8]) -> HttpClient {
    HttpClient::connect(
        server.addr,
        client_config(&ca.cert_der, &[alpn], BOTH_VERSIONS),
    )
    .await
}

/// A connection trusting `ca`, offering `alpn`, to a server that presents `leaf`.
async fn connect_to(server: &TestServer, ca: &TestCa, alpn: &[u8], leaf: &Leaf) -> HttpClient {
    let stream = tls_connect(
        server.addr,
        client_config(&ca.cert_der, &[alpn], BOTH_VERSIONS),
    )
    .await
    .expect("TLS connection");
    assert_eq!(presented_leaf(&stream), leaf.cert_der);
    HttpClient::handshake(stream).await
}

/// Whether the listener at `addr` closes (within five seconds).
async fn listener_closes(addr: std::net::SocketAddr) -> bool {
    for _ in 0..500 {
        match TcpStream::connect(addr).await {
            Err(_) => return true,
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    false
}

/// ALPN offered, ALPN negotiated, response version, version the handler saw.
type AlpnCase = (
    &'static [&'static [u8]],
    Option<&'static [u8]>,
    Version,
    &'static str,
);

#[tokio::test]
async fn the_http_version_follows_alpn() {
    let (ca, server) = start_default().await;

    let cases: [AlpnCase; 4] = [
        (&[H2, HTTP11], Some(H2), Version::HTTP_2, "HTTP/2.0"),
        (&[H2], Some(H2), Version::HTTP_2, "HTTP/2.0"),
        (&[HTTP11], Some(HTTP11), Version::HTTP_11, "HTTP/1.1"),
        (&[], None, Version::HTTP_11, "HTTP/1.1"),
    ];
    for (offered, negotiated, version, seen) in cases {
        let stream = tls_connect(
            server.addr,
            client_config(&ca.cert_der, offered, BOTH_VERSIONS),
        )
        .await
        .expect("TLS connection");
        assert_eq!(stream.get_ref().1.alpn_protocol(), negotiated);
        let mut client = HttpClient::handshake(stream).await;
        // Two requests on one connection: keep-alive (HTTP/1.1) and streams (HTTP/2).
        for _ in 0..2 {
            let response = client.get("/version").await.expect("response");
            assert_eq!(response.status, StatusCode::OK);
            assert_eq!(response.version, version);
            assert_eq!(response.body, seen);
        }
    }
}

/// The send window an HTTP/2 client gets for a request body on a new connection to `server`:
/// a first request's answer comes after the server's SETTINGS, so the second request's stream
/// has the server's window. The connection stays open until the returned guard is dropped.
async fn stream_window_of_a_new_connection(ca: &TestCa, server: &TestServer) -> (usize, impl Drop) {
    let stream = tls_connect(
        server.addr,
        client_config(&ca.cert_der, &[H2], BOTH_VERSIONS),
    )
    .await
    .expect("TLS connection");
    let (client, connection) = h2::client::handshake(stream).await.expect("h2 handshake");
    let driver = tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let first = hyper::Request::get("/version").body(()).expect("request");
    let (answer, _) = client.send_request(first, true).expect("first request");
    assert_eq!(answer.await.expect("answer").status(), StatusCode::OK);
    let mut client = client.ready().await.expect("ready");
    // A declared length keeps its reservation from the memory budget small (see limits.rs).
    let second = hyper::Request::post(routes::VALIDATE)
        .header(hyper::header::CONTENT_LENGTH, 128 * 1024)
        .body(())
        .expect("request");
    let (_answer, mut body) = client.send_request(second, false).expect("second request");
    body.reserve_capacity(1 << 20);
    let window = std::future::poll_fn(|cx| body.poll_capacity(cx))
        .await
        .expect("capacity")
        .expect("capacity");
    (window, AbortOnDrop(driver, client, body))
}

/// Keeps an HTTP/2 connection (its driver, client and a request's body) open until dropped.
struct AbortOnDrop<B: hyper::body::Buf>(
    tokio::task::JoinHandle<Result<(), h2::Error>>,
    #[allow(dead_code)] h2::client::SendRequest<B>,
    #[allow(dead_code)] h2::SendStream<B>,
);

impl<B: hyper::body::Buf> Drop for AbortOnDrop<B> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The first eight HTTP/2 connections open at once (the API server keeps one per webhook host)
/// get 64 KiB stream windows; a ninth gets 16 KiB, which bounds what unread bodies hold.
#[tokio::test]
async fn http2_connections_past_the_first_eight_get_smaller_stream_windows() {
    let (ca, server) = start_default().await;
    let mut windows = Vec::new();
    let mut open = Vec::new();
    for _ in 0..9 {
        let (window, connection) = stream_window_of_a_new_connection(&ca, &server).await;
        windows.push(window);
        open.push(connection);
    }
    let mut expected = vec![64 * 1024; 8];
    expected.push(16 * 1024);
    assert_eq!(windows, expected);
}

/// A connection with the larger windows that closes gives its place to a later one.
#[tokio::test]
async fn a_closed_http2_connection_gives_its_larger_windows_to_the_next() {
    let (ca, server) = start_default().await;
    let mut open = Vec::new();
    for _ in 0..8 {
        open.push(stream_window_of_a_new_connection(&ca, &server).await.1);
    }
    assert_eq!(
        stream_window_of_a_new_connection(&ca, &server).await.0,
        16 * 1024
    );
    drop(open.pop());
    // The server sees the close when it reads the connection's end: until then new
    // connections still get the smaller windows.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (window, connection) = stream_window_of_a_new_connection(&ca, &server).await;
        if window == 64 * 1024 {
            break;
        }
        drop(connection);
        assert!(
            tokio::time::Instant::now() < deadline,
            "no connection got the larger windows back"
        );
    }
}

#[tokio::test]
async fn every_supported_tls_version_is_accepted() {
    let (ca, server) = start_default().await;
    for (versions, expected) in [
        (&[&TLS12][..], ProtocolVersion::TLSv1_2),
        (&[&TLS13][..], ProtocolVersion::TLSv1_3),
    ] {
        let stream = tls_connect(server.addr, client_config(&ca.cert_der, &[H2], versions))
            .await
            .expect("TLS connection");
        assert_eq!(stream.get_ref().1.protocol_version(), Some(expected));
        let mut client = HttpClient::handshake(stream).await;
        assert_eq!(client.status("/version").await, StatusCode::OK);
    }
}

/// A hand-written TLS 1.1 ClientHello (no `supported_versions` extension), since no rustls
/// client can speak TLS 1.1. It carries `signature_algorithms` because rustls refuses a hello
/// without it (handshake_failure) before looking at the version; with it, the refusal shown is
/// the version's.
fn tls11_client_hello() -> Vec<u8> {
    let mut hello = vec![0x03, 0x02]; // client_version: TLS 1.1
    hello.extend([0x5a; 32]); // random
    hello.push(0); // empty session id
    hello.extend([0x00, 0x04, 0xc0, 0x13, 0x00, 0x2f]); // two CBC cipher suites
    hello.extend([0x01, 0x00]); // compression: null
    // Extensions (8 bytes): signature_algorithms (0x000d) = [ecdsa_secp256r1_sha256].
    hello.extend([0x00, 0x08, 0x00, 0x0d, 0x00, 0x04, 0x00, 0x02, 0x04, 0x03]);
    let len = u8::try_from(hello.len()).expect("short hello");
    let mut handshake = vec![0x01, 0x00, 0x00, len]; // ClientHello, u24 length
    handshake.extend(hello);
    let len = u8::try_from(handshake.len()).expect("short handshake");
    let mut record = vec![0x16, 0x03, 0x01, 0x00, len]; // handshake record, u16 length
    record.extend(handshake);
    record
}

#[tokio::test]
async fn tls11_is_refused() {
    assert_eq!(
        trustyai_webhooks::PROTOCOL_VERSIONS
            .iter()
            .map(|v| v.version)
            .collect::<Vec<_>>(),
        [ProtocolVersion::TLSv1_3, ProtocolVersion::TLSv1_2]
    );

    let (_ca, server) = start_default().await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    tcp.write_all(&tls11_client_hello())
        .await
        .expect("send hello");
    let mut reply = Vec::new();
    tokio::time::timeout(PATIENCE, tcp.read_to_end(&mut reply))
        .await
        .expect("server answered and closed")
        .expect("read");
    // An alert record (0x15), fatal (2), protocol_version (70); never a ServerHello (0x16).
    assert!(reply.len() >= 7, "reply too short: {reply:?}");
    assert_eq!(reply[0], 0x15, "expected an alert record, got {reply:?}");
    assert_eq!(&reply[5..7], &[2, 70], "expected protocol_version alert");
}

/// The answer of a server with the default limits to a POST of `len` bytes, over HTTP/2.
async fn validate_a_body_of(len: usize) -> TestResponse {
    let (ca, server) = start_default().await;
    let mut client = connect(&server, &ca, H2).await;
    client
        .send(Method::POST, routes::VALIDATE, full(vec![b'x'; len]))
        .await
        .expect("response")
}

#[tokio::test]
async fn a_body_at_the_limit_passes() {
    let limit = HttpsOptions::DEFAULT_MAX_BODY_BYTES;
    let at_limit = validate_a_body_of(limit).await;
    assert_eq!(at_limit.status, StatusCode::OK);
    assert_eq!(at_limit.body, limit.to_string());
}

/// Declared length over the limit: refused before the body is read.
#[tokio::test]
async fn a_declared_body_over_the_limit_gets_413() {
    let over = validate_a_body_of(HttpsOptions::DEFAULT_MAX_BODY_BYTES + 1).await;
    assert_eq!(over.status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn a_streamed_body_over_the_limit_gets_413() {
    let options = HttpsOptions {
        max_body_bytes: 1024,
        ..HttpsOptions::default()
    };
    let (ca, server, _control) = TestServer::for_new_ca(options).await;

    for alpn in [HTTP11, H2] {
        let mut client = connect(&server, &ca, alpn).await;
        // No Content-Length: the limit can only be found while reading.
        let chunks =
            (0..4).map(|_| Ok::<_, std::io::Error>(Frame::data(Bytes::from(vec![b'x'; 512]))));
        let body = StreamBody::new(stream::iter(chunks)).boxed();
        let response = client
            .send(Method::POST, routes::VALIDATE, body)
            .await
            .expect("response");
        assert_eq!(
            response.status,
            StatusCode::PAYLOAD_TOO_LARGE,
            "over {alpn:?}"
        );
    }
}

#[tokio::test]
async fn a_handler_past_the_deadline_gets_503() {
    let options = HttpsOptions {
        request_timeout: Duration::from_millis(100),
        ..HttpsOptions::default()
    };
    let (ca, server, _control) = TestServer::for_new_ca(options).await;
    let mut client = connect(&server, &ca, HTTP11).await;

    let response = client.get("/slow").await.expect("response");
    assert_eq!(response.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.body.contains("deadline"), "{}", response.body);

    // The connection survives the timeout.
    assert_eq!(client.status("/version").await, StatusCode::OK);
}

#[tokio::test]
async fn a_new_certificate_serves_new_connections_without_dropping_old_ones() {
    let old_ca = TestCa::new("old CA");
    let (old_leaf, server) = serve_a_leaf_of(&old_ca).await;

    let mut old_client = connect_to(&server, &old_ca, HTTP11, &old_leaf).await;
    assert_eq!(old_client.status("/version").await, StatusCode::OK);

    let new_ca = TestCa::new("new CA");
    let new_leaf = new_ca.leaf();
    server
        .cert
        .set_from_pem(new_leaf.cert_pem.as_bytes(), new_leaf.key_pem.as_bytes())
        .expect("new certificate accepted");

    let mut new_client = connect_to(&server, &new_ca, H2, &new_leaf).await;
    assert_eq!(new_client.status("/version").await, StatusCode::OK);

    let err = tls_connect(
        server.addr,
        client_config(&old_ca.cert_der, &[H2], BOTH_VERSIONS),
    )
    .await
    .expect_err("the old CA no longer verifies new connections");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");

    // Established before the swap, still served.
    assert_eq!(old_client.status("/version").await, StatusCode::OK);
}

#[tokio::test]
async fn refused_material_leaves_the_old_certificate_serving() {
    let ca = TestCa::new("test CA");
    let (leaf, server) = serve_a_leaf_of(&ca).await;

    let garbage = server
        .cert
        .set_from_pem(b"not a certificate", leaf.key_pem.as_bytes())
        .expect_err("garbage refused");
    assert!(matches!(garbage, TlsError::NoCertificate), "{garbage:?}");

    let stranger = TestCa::new("other CA").leaf();
    let mismatch = server
        .cert
        .set_from_pem(leaf.cert_pem.as_bytes(), stranger.key_pem.as_bytes())
        .expect_err("mismatched key refused");
    assert!(matches!(mismatch, TlsError::KeyMismatch), "{mismatch:?}");

    let mut client = connect_to(&server, &ca, H2, &leaf).await;
    assert_eq!(client.status("/version").await, StatusCode::OK);
}

#[tokio::test]
async fn handshakes_fail_until_a_certificate_is_loaded() {
    let ca = TestCa::new("test CA");
    let empty = Arc::new(ServingCertificate::new());
    let server = serve(Arc::clone(&empty)).await;

    tls_connect(
        server.addr,
        client_config(&ca.cert_der, &[H2], BOTH_VERSIONS),
    )
    .await
    .expect_err("no certificate to present");

    let leaf = ca.leaf();
    empty
        .set_from_pem(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())
        .expect("certificate accepted");
    let mut client = connect(&server, &ca, H2).await;
    assert_eq!(client.status("/version").await, StatusCode::OK);
}

/// A server shutting down with two requests held in flight (HTTP/1.1, HTTP/2) and an idle
/// keep-alive connection; whether its listener closed (within five seconds).
struct ShuttingDown {
    server: TestServer,
    control: HoldControl,
    held: [tokio::task::JoinHandle<hyper::Result<TestResponse>>; 2],
    idle: HttpClient,
    listener_closed: bool,
}

async fn shutting_down_with_requests_in_flight() -> ShuttingDown {
    let (ca, mut server, mut control) = TestServer::for_new_ca(HttpsOptions::default()).await;

    let mut h1 = connect(&server, &ca, HTTP11).await;
    let mut h2 = connect(&server, &ca, H2).await;
    // An idle keep-alive connection must not hold up shutdown.
    let mut idle = connect(&server, &ca, HTTP11).await;
    assert_eq!(idle.status("/version").await, StatusCode::OK);

    let held_h1 = tokio::spawn(async move { h1.get("/hold").await });
    control.wait_started().await;
    let held_h2 = tokio::spawn(async move { h2.get("/hold").await });
    control.wait_started().await;

    server.begin_shutdown();
    let listener_closed = listener_closes(server.addr).await;
    ShuttingDown {
        server,
        control,
        held: [held_h1, held_h2],
        idle,
        listener_closed,
    }
}

/// The listener closes while the requests are still held.
#[tokio::test]
async fn shutdown_refuses_new_connections() {
    let ShuttingDown {
        listener_closed, ..
    } = shutting_down_with_requests_in_flight().await;
    assert!(
        listener_closed,
        "new connections are still accepted after shutdown"
    );
}

#[tokio::test]
async fn shutdown_answers_in_flight_requests() {
    let ShuttingDown {
        server,
        control,
        held,
        idle: _idle,
        ..
    } = shutting_down_with_requests_in_flight().await;
    assert!(
        !server.is_finished(),
        "serve_https returned with requests in flight"
    );

    control.release();
    control.release();
    for held in held {
        let response = tokio::time::timeout(PATIENCE, held)
            .await
            .expect("held request answered")
            .expect("client task")
            .expect("response");
        assert_eq!(response.status, StatusCode::OK);
        assert_eq!(response.body, "released");
    }
    server.stopped().await.expect("clean shutdown");
}

/// HTTP/1.1 has no GOAWAY: a draining server answers on a kept-alive connection with
/// `Connection: close` instead of closing it under a client that may be sending on it.
#[tokio::test]
async fn a_draining_server_closes_an_idle_http11_connection_by_its_next_answer() {
    let (ca, mut server, _control) = TestServer::for_new_ca(HttpsOptions::default()).await;
    let mut kept = connect(&server, &ca, HTTP11).await;
    let first = kept.get("/version").await.expect("response");
    assert_eq!(first.status, StatusCode::OK);
    assert!(!first.headers.contains_key("connection"), "{first:?}");

    server.begin_shutdown();
    assert!(
        listener_closes(server.addr).await,
        "the listener did not close"
    );
    // Served while draining; one answer says the connection closes after it.
    let mut closing = None;
    for _ in 0..100 {
        let response = kept.get("/version").await.expect("answered while draining");
        assert_eq!(response.status, StatusCode::OK);
        if response.headers.get("connection").map(|v| v.as_bytes()) == Some(b"close") {
            closing = Some(response);
            break;
        }
    }
    assert!(closing.is_some(), "no answer said Connection: close");
    server.stopped().await.expect("clean shutdown");
}

#[tokio::test]
async fn the_drain_timeout_bounds_shutdown() {
    let options = HttpsOptions {
        drain_timeout: Duration::from_millis(100),
        ..HttpsOptions::default()
    };
    let (ca, mut server, mut control) = TestServer::for_new_ca(options).await;
    let mut client = connect(&server, &ca, HTTP11).await;

    let held = tokio::spawn(async move { client.get("/hold").await });
    control.wait_started().await;
    server.begin_shutdown();
    server
        .stopped()
        .await
        .expect("shutdown returns Ok after the drain timeout");

    let outcome = tokio::time::timeout(PATIENCE, held)
        .await
        .expect("client finished")
        .expect("client task");
    assert!(
        outcome.is_err(),
        "the never-released request was cut off: {outcome:?}"
    );
}
