//! A keep-alive TLS client for the webhook server: rustls (ring) + hyper, HTTP/2 or HTTP/1.1
//! chosen by ALPN, one connection per [`Connection`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The HTTP version a connection negotiates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Protocol {
    #[serde(rename = "h2")]
    H2,
    #[serde(rename = "http/1.1")]
    Http1,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H2 => "h2",
            Protocol::Http1 => "http/1.1",
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client configuration trusting `ca_pem` (or, with `None`, any certificate: for probing a
/// server whose CA the harness does not know), offering only `protocol` by ALPN.
pub fn tls_config(ca_pem: Option<&[u8]>, protocol: Protocol) -> Result<Arc<ClientConfig>> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS versions")?;
    let mut config = match ca_pem {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                roots
                    .add(cert.context("CA PEM")?)
                    .context("CA certificate")?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate))
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![match protocol {
        Protocol::H2 => b"h2".to_vec(),
        Protocol::Http1 => b"http/1.1".to_vec(),
    }];
    Ok(Arc::new(config))
}

/// One open connection.
#[derive(Clone)]
pub enum Connection {
    H1(Arc<tokio::sync::Mutex<http1::SendRequest<Full<Bytes>>>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// Opens a TLS connection to `127.0.0.1:port` and the HTTP connection over it.
pub async fn connect(
    port: u16,
    config: Arc<ClientConfig>,
    protocol: Protocol,
) -> Result<Connection> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost").map_err(|e| anyhow!("{e}"))?;
    let tls = TlsConnector::from(config).connect(name, tcp).await?;
    let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let io = TokioIo::new(tls);
    match protocol {
        Protocol::H2 => {
            if negotiated.as_deref() != Some(b"h2") {
                bail!("the server did not negotiate h2");
            }
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                .handshake(io)
                .await?;
            tokio::spawn(conn);
            Ok(Connection::H2(sender))
        }
        Protocol::Http1 => {
            let (sender, conn) = http1::handshake(io).await?;
            tokio::spawn(conn);
            Ok(Connection::H1(Arc::new(tokio::sync::Mutex::new(sender))))
        }
    }
}

impl Connection {
    /// Whether the server has closed this connection (HTTP/2: GOAWAY or EOF seen).
    pub fn is_closed(&self) -> bool {
        match self {
            Connection::H2(sender) => sender.is_closed(),
            Connection::H1(sender) => sender.try_lock().is_ok_and(|s| s.is_closed()),
        }
    }

    /// `POST path` with a JSON body; the status and the whole response body.
    pub async fn post(&self, path: &str, body: Bytes) -> Result<(u16, Bytes)> {
        let (status, _, body) = self.post_answer(path, body).await?;
        Ok((status, body))
    }

    /// `POST path` with a JSON body; the status, the headers and the whole response body.
    pub async fn post_answer(
        &self,
        path: &str,
        body: Bytes,
    ) -> Result<(u16, hyper::HeaderMap, Bytes)> {
        let request = hyper::Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body))?;
        let response = match self {
            Connection::H2(sender) => {
                let mut sender = sender.clone();
                sender.ready().await?;
                sender.send_request(request).await?
            }
            Connection::H1(sender) => {
                let mut sender = sender.lock().await;
                sender.ready().await?;
                sender.send_request(request).await?
            }
        };
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, headers, body))
    }
}

/// Polls until `POST /convert` of a one-object review answers 200 over TLS on `port`, any
/// certificate accepted; returns once it does, or an error after `timeout`.
pub async fn wait_for_convert(port: u16, timeout: Duration) -> Result<()> {
    let config = tls_config(None, Protocol::H2)?;
    let body = Bytes::from(serde_json::to_vec(&crate::fixtures::conversion_review(
        1,
        crate::fixtures::V1,
    ))?);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(Ok(conn)) = tokio::time::timeout(
            Duration::from_secs(1),
            connect(port, config.clone(), Protocol::H2),
        )
        .await
            && let Ok((200, _)) = conn.post("/convert", body.clone()).await
        {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("/convert on port {port} did not answer within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Accepts any server certificate (signatures are still checked).
#[derive(Debug)]
struct AnyCertificate;

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
