//! Connections: idle ones are closed, refused handshakes logged at a bounded rate, the
//! connection limit lets valid clients through, and a client CA is enforced.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use trustyai_bench::client::{Protocol, connect, tls_config};

use crate::support::{Server, valid_requests_still_work};

#[tokio::test]
async fn idle_connections_are_closed_on_both_protocols() -> Result<()> {
    let server = Server::start(&["--idle-timeout-ms", "300"])?;
    let mut connections = Vec::new();
    for protocol in [Protocol::H2, Protocol::Http1] {
        for _ in 0..20 {
            let connection = server.connect(protocol).await?;
            valid_requests_still_work(&connection).await?;
            connections.push(connection);
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while connections.iter().any(|c| !c.is_closed()) {
        if tokio::time::Instant::now() > deadline {
            let open = connections.iter().filter(|c| !c.is_closed()).count();
            bail!(
                "{open} of {} idle connections still open",
                connections.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A new connection still works.
    valid_requests_still_work(&server.connect(Protocol::H2).await?).await
}

#[tokio::test]
async fn refused_handshakes_are_logged_at_a_bounded_rate() -> Result<()> {
    let server = Server::start(&[])?;
    let before = server.log_lines();
    // A client that trusts another CA fails every handshake (the server sees a TLS alert).
    for _ in 0..300 {
        let wrong_ca = tls_config(Some(&fixtures_ca()?), Protocol::H2)?;
        assert!(
            connect(server.process.port(), wrong_ca, Protocol::H2)
                .await
                .is_err()
        );
    }
    // Plain HTTP on the TLS port.
    for _ in 0..100 {
        use tokio::io::AsyncWriteExt;
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.process.port())).await?;
        tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await?;
        let _ = tcp.shutdown().await;
    }
    valid_requests_still_work(&server.connect(Protocol::H2).await?).await?;
    let written = server.log_lines() - before;
    assert!(
        written <= 4,
        "{written} log lines for 400 refused handshakes"
    );
    Ok(())
}

#[tokio::test]
async fn at_the_connection_limit_valid_clients_get_through_once_silent_ones_time_out() -> Result<()>
{
    let server = Server::start(&["--max-connections", "16", "--handshake-timeout-ms", "500"])?;
    // Connections that never speak hold every slot until their handshake deadline.
    let mut silent = Vec::new();
    for _ in 0..64 {
        silent.push(tokio::net::TcpStream::connect(("127.0.0.1", server.process.port())).await?);
    }
    let connection = tokio::time::timeout(Duration::from_secs(60), server.connect(Protocol::H2))
        .await
        .context("no connection within 60 s")??;
    valid_requests_still_work(&connection).await?;
    drop(silent);
    Ok(())
}

/// The CA of a certificate the server never presents.
fn fixtures_ca() -> Result<Vec<u8>> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    Ok(params.self_signed(&key)?.pem().into_bytes())
}

#[tokio::test]
async fn with_a_client_ca_only_clients_holding_its_certificates_are_served() -> Result<()> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let client_key = rcgen::KeyPair::generate()?;
    let client = rcgen::CertificateParams::new(vec!["kube-apiserver".to_owned()])?
        .signed_by(&client_key, &issuer)?;
    let ca_file = std::env::temp_dir().join(format!(
        "trustyai-hostile-client-ca-{}.pem",
        std::process::id()
    ));
    std::fs::write(&ca_file, ca_cert.pem())?;
    let server = Server::start(&["--client-ca", ca_file.to_str().context("path")?])?;

    // Without a client certificate: no answer.
    let anonymous = async {
        let connection = server.connect(Protocol::H2).await?;
        valid_requests_still_work(&connection).await
    };
    assert!(
        anonymous.await.is_err(),
        "a client without a certificate was served"
    );

    // With one the CA signed: served.
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(&server.ca) {
        roots.add(der?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_client_auth_cert(
        vec![CertificateDer::from_pem_slice(client.pem().as_bytes())?],
        PrivateKeyDer::from_pem_slice(client_key.serialize_pem().as_bytes())?,
    )?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connection = connect(server.process.port(), Arc::new(config), Protocol::H2).await?;
    valid_requests_still_work(&connection).await?;
    let _ = std::fs::remove_file(&ca_file);
    Ok(())
}
