//! Test certificates, a test server harness and small HTTP clients.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::routing::{get, post};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper::{Method, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use trustyai_webhooks::{HttpsOptions, ServerError, ServingCertificate, routes, serve_https};

/// Bound on anything a test waits for, so a broken server fails the test instead of hanging
/// it. Never a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A test certificate authority.
pub struct TestCa {
    pub cert_der: CertificateDer<'static>,
    /// The CA certificate as PEM, as a client CA file holds it.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A leaf certificate for `localhost` and `127.0.0.1`.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("CA certificate");
        Self {
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    pub fn leaf(&self) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(&params, &key)
    }

    /// A client certificate (client-auth usage) this CA signed, as the API server's webhook
    /// client certificate would be.
    pub fn client_leaf(&self, name: &str) -> Leaf {
        let key = KeyPair::generate().expect("client key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&params, &key)
    }

    fn sign(&self, params: &CertificateParams, key: &KeyPair) -> Leaf {
        let cert = params.signed_by(key, &self.issuer).expect("certificate");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
        }
    }
}

impl Leaf {
    pub fn serving_certificate(&self) -> Arc<ServingCertificate> {
        Arc::new(
            ServingCertificate::from_pem(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
                .expect("valid test certificate"),
        )
    }
}

/// Lets a test hold a request inside its handler.
#[derive(Clone)]
pub struct Hold {
    started: mpsc::UnboundedSender<()>,
    release: Arc<Notify>,
}

/// The test's side of [`Hold`].
pub struct HoldControl {
    started: mpsc::UnboundedReceiver<()>,
    release: Arc<Notify>,
}

impl HoldControl {
    pub async fn wait_started(&mut self) {
        tokio::time::timeout(PATIENCE, self.started.recv())
            .await
            .expect("the held request reached its handler")
            .expect("server alive");
    }

    pub fn release(&self) {
        self.release.notify_one();
    }
}

pub fn hold() -> (Hold, HoldControl) {
    let (started_tx, started_rx) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    (
        Hold {
            started: started_tx,
            release: Arc::clone(&release),
        },
        HoldControl {
            started: started_rx,
            release,
        },
    )
}

/// `GET /version`: the HTTP version the server saw. `POST /validate`: the body length.
/// `GET /slow`: answers after a minute. `GET /hold`: answers when the test releases it.
pub fn test_router(hold: Hold) -> Router {
    Router::new()
        .route(
            "/version",
            get(|request: Request| async move { format!("{:?}", request.version()) }),
        )
        .route(
            routes::VALIDATE,
            post(|body: Bytes| async move { body.len().to_string() }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        )
        .route(
            "/hold",
            get(|State(hold): State<Hold>| async move {
                let _ = hold.started.send(());
                hold.release.notified().await;
                "released"
            }),
        )
        .with_state(hold)
}

/// A running [`serve_https`].
pub struct TestServer {
    pub addr: SocketAddr,
    pub cert: Arc<ServingCertificate>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServerError>>,
}

impl TestServer {
    pub async fn start(
        router: Router,
        cert: Arc<ServingCertificate>,
        options: HttpsOptions,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_https(
            listener,
            router,
            Arc::clone(&cert),
            options,
            async move {
                let _ = shutdown_rx.await;
            },
        ));
        Self {
            addr,
            cert,
            shutdown: Some(shutdown_tx),
            task,
        }
    }

    /// A server of [`test_router`] with `options`, presenting a certificate of a new CA: the CA,
    /// the server, and the control of its held requests.
    pub async fn for_new_ca(options: HttpsOptions) -> (TestCa, Self, HoldControl) {
        let ca = TestCa::new("test CA");
        let (hold, control) = hold();
        let server = Self::start(test_router(hold), ca.leaf().serving_certificate(), options).await;
        (ca, server, control)
    }

    /// Completes the shutdown future.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits for `serve_https` to return.
    pub async fn stopped(self) -> Result<(), ServerError> {
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("serve_https returned")
            .expect("serve_https did not panic")
    }
}

/// A client configuration trusting only `ca`.
pub fn client_config(
    ca: &CertificateDer<'static>,
    alpn: &[&[u8]],
    versions: &[&'static SupportedProtocolVersion],
) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).expect("test CA");
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .expect("client versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

pub async fn tls_connect(
    addr: SocketAddr,
    config: ClientConfig,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").expect("server name");
    tokio::time::timeout(
        PATIENCE,
        TlsConnector::from(Arc::new(config)).connect(name, tcp),
    )
    .await
    .expect("handshake finished")
}

/// The leaf certificate the server presented on `stream`.
pub fn presented_leaf(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .expect("server presented a certificate")
        .clone()
        .into_owned()
}

pub type TestBody = BoxBody<Bytes, std::io::Error>;

pub fn full(bytes: impl Into<Bytes>) -> TestBody {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// One HTTP connection of a test client.
pub enum HttpClient {
    Http1(http1::SendRequest<TestBody>),
    Http2(http2::SendRequest<TestBody>),
}

/// A response, fully read.
#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub version: Version,
    pub headers: hyper::HeaderMap,
    pub body: String,
}

impl HttpClient {
    /// HTTP/2 if the server agreed to `h2` by ALPN, HTTP/1.1 otherwise.
    pub async fn handshake(stream: TlsStream<TcpStream>) -> Self {
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(stream);
        if h2 {
            let (sender, connection) = http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("HTTP/2 handshake");
            tokio::spawn(connection);
            Self::Http2(sender)
        } else {
            let (sender, connection) = http1::handshake(io).await.expect("HTTP/1.1 handshake");
            tokio::spawn(connection);
            Self::Http1(sender)
        }
    }

    pub async fn connect(addr: SocketAddr, config: ClientConfig) -> Self {
        Self::handshake(tls_connect(addr, config).await.expect("TLS connection")).await
    }

    pub async fn get(&mut self, path: &str) -> hyper::Result<TestResponse> {
        self.send(Method::GET, path, full(Bytes::new())).await
    }

    /// The status of `GET path`, which must be answered.
    pub async fn status(&mut self, path: &str) -> StatusCode {
        self.get(path).await.expect("response").status
    }

    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: TestBody,
    ) -> hyper::Result<TestResponse> {
        let builder = hyper::Request::builder().method(method);
        let response = match self {
            Self::Http1(sender) => {
                let request = builder
                    .uri(path)
                    .header(hyper::header::HOST, "localhost")
                    .body(body)
                    .expect("request");
                sender.ready().await?;
                sender.send_request(request).await?
            }
            Self::Http2(sender) => {
                let request = builder
                    .uri(format!("https://localhost{path}"))
                    .body(body)
                    .expect("request");
                sender.ready().await?;
                sender.send_request(request).await?
            }
        };
        let status = response.status();
        let version = response.version();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok(TestResponse {
            status,
            version,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

/// Plain-HTTP GET for the ops server, on a new connection.
pub async fn plain_get(addr: SocketAddr, path: &str) -> (StatusCode, Option<String>, String) {
    plain_get_accepting(addr, path, None).await
}

/// [`plain_get`] with an `Accept` header.
pub async fn plain_get_accepting(
    addr: SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = http1::handshake(TokioIo::new(tcp))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    let mut request = hyper::Request::builder()
        .uri(path)
        .header(hyper::header::HOST, "localhost");
    if let Some(accept) = accept {
        request = request.header(hyper::header::ACCEPT, accept);
    }
    let request = request.body(full(Bytes::new())).expect("request");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status();
    let content_type = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        content_type,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}
