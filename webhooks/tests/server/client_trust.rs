//! Client certificate verification against a client CA bundle that can be replaced while the
//! server runs (the API server's webhook client certificate is rotated like any other).

use std::sync::Arc;

use hyper::StatusCode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::version::{TLS12, TLS13};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use trustyai_webhooks::{ClientTrust, HttpsOptions, TlsError};

use crate::common::{HttpClient, Leaf, PATIENCE, TestCa, TestServer, tls_connect};

/// A client trusting `server_ca`, presenting `client` when given, over `version` only. TLS 1.2
/// is used where a refusal is expected: there the server's verdict on the client certificate
/// ends the handshake itself, so the refusal is seen by `connect`.
fn client(
    server_ca: &TestCa,
    client: Option<&Leaf>,
    version: &'static SupportedProtocolVersion,
) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots.add(server_ca.cert_der.clone()).expect("test CA");
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[version])
            .expect("client versions")
            .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).expect("cert")],
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("key"),
            )
            .expect("client certificate"),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    config
}

async fn start(trust: Arc<ClientTrust>) -> (TestCa, TestServer) {
    let options = HttpsOptions {
        client_trust: Some(trust),
        ..HttpsOptions::default()
    };
    let (server_ca, server, _control) = TestServer::for_new_ca(options).await;
    (server_ca, server)
}

async fn served(server: &TestServer, config: ClientConfig) -> bool {
    let Ok(stream) = tls_connect(server.addr, config).await else {
        return false;
    };
    let mut http = HttpClient::handshake(stream).await;
    matches!(
        tokio::time::timeout(PATIENCE, http.get("/version")).await,
        Ok(Ok(response)) if response.status == StatusCode::OK
    )
}

#[tokio::test]
async fn only_clients_the_bundle_signed_are_served() {
    let client_ca = TestCa::new("client CA");
    let trust = Arc::new(ClientTrust::from_pem(client_ca.cert_pem.as_bytes()).expect("CA"));
    let (server_ca, server) = start(trust).await;
    let signed = client_ca.client_leaf("kube-apiserver");
    let stranger = TestCa::new("other CA").client_leaf("kube-apiserver");

    assert!(served(&server, client(&server_ca, Some(&signed), &TLS13)).await);
    assert!(served(&server, client(&server_ca, Some(&signed), &TLS12)).await);
    assert!(!served(&server, client(&server_ca, None, &TLS12)).await);
    assert!(!served(&server, client(&server_ca, Some(&stranger), &TLS12)).await);
}

/// A server whose client bundle was replaced while a connection verified by the old one was
/// open.
struct Replaced {
    server_ca: TestCa,
    server: TestServer,
    old_client: Leaf,
    new_client: Leaf,
    open: HttpClient,
}

async fn replaced_while_open() -> Replaced {
    let old_ca = TestCa::new("old client CA");
    let trust = Arc::new(ClientTrust::from_pem(old_ca.cert_pem.as_bytes()).expect("CA"));
    let (server_ca, server) = start(Arc::clone(&trust)).await;
    let old_client = old_ca.client_leaf("kube-apiserver");
    let stream = tls_connect(server.addr, client(&server_ca, Some(&old_client), &TLS13))
        .await
        .expect("TLS connection");
    let mut open = HttpClient::handshake(stream).await;
    assert_eq!(open.status("/version").await, StatusCode::OK);

    let new_ca = TestCa::new("new client CA");
    trust
        .set_from_pem(new_ca.cert_pem.as_bytes())
        .expect("new bundle accepted");
    let new_client = new_ca.client_leaf("kube-apiserver");
    Replaced {
        server_ca,
        server,
        old_client,
        new_client,
        open,
    }
}

#[tokio::test]
async fn a_new_bundle_applies_to_the_next_handshake() {
    let Replaced {
        server_ca,
        server,
        old_client,
        new_client,
        open: _open,
    } = replaced_while_open().await;
    assert!(served(&server, client(&server_ca, Some(&new_client), &TLS13)).await);
    assert!(
        !served(&server, client(&server_ca, Some(&old_client), &TLS12)).await,
        "the replaced CA still verified a new connection"
    );
}

#[tokio::test]
async fn a_new_bundle_keeps_connections_verified_before_it() {
    let Replaced {
        server: _server,
        mut open,
        ..
    } = replaced_while_open().await;
    assert_eq!(
        open.get("/version").await.expect("open connection").status,
        StatusCode::OK,
        "a connection verified before the change was dropped"
    );
}

/// A client CA, and a trust in it.
fn trusted_client_ca() -> (TestCa, Arc<ClientTrust>) {
    let client_ca = TestCa::new("client CA");
    let trust = Arc::new(ClientTrust::from_pem(client_ca.cert_pem.as_bytes()).expect("CA"));
    (client_ca, trust)
}

#[test]
fn a_bundle_without_a_ca_is_refused() {
    let (_, trust) = trusted_client_ca();
    assert!(matches!(
        ClientTrust::from_pem(b"not a certificate"),
        Err(TlsError::NoClientCa)
    ));
    assert!(matches!(trust.set_from_pem(b""), Err(TlsError::NoClientCa)));
}

#[tokio::test]
async fn a_refused_bundle_leaves_the_old_one_in_force() {
    let (client_ca, trust) = trusted_client_ca();
    trust.set_from_pem(b"").expect_err("refused");
    let (server_ca, server) = start(trust).await;
    let signed = client_ca.client_leaf("kube-apiserver");
    assert!(served(&server, client(&server_ca, Some(&signed), &TLS13)).await);
}

#[tokio::test]
async fn the_file_is_read_again_when_it_changes() {
    let dir = std::env::temp_dir().join(format!("trustyai-client-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("ca.crt");
    let old_ca = TestCa::new("old client CA");
    std::fs::write(&path, &old_ca.cert_pem).expect("write");
    let trust = Arc::new(ClientTrust::from_pem(old_ca.cert_pem.as_bytes()).expect("CA"));
    let reload = tokio::spawn(trustyai_webhooks::reload_client_ca(
        Arc::clone(&trust),
        path.clone(),
        std::time::Duration::from_millis(50),
    ));
    let (server_ca, server) = start(trust).await;

    let new_ca = TestCa::new("new client CA");
    let new_client = new_ca.client_leaf("kube-apiserver");
    std::fs::write(&path, &new_ca.cert_pem).expect("write");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // TLS 1.2 while waiting: a refusal ends the handshake, so each try is quick.
    while !served(&server, client(&server_ca, Some(&new_client), &TLS12)).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new client CA in the file was never applied"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(served(&server, client(&server_ca, Some(&new_client), &TLS13)).await);
    let old_client = old_ca.client_leaf("kube-apiserver");
    assert!(!served(&server, client(&server_ca, Some(&old_client), &TLS12)).await);
    reload.abort();
    let _ = std::fs::remove_dir_all(&dir);
}
