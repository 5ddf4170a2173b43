//! Calls to one process of a TrustyAI service: its API on the internal Service's TLS port, at
//! the pod's address, its certificate verified against the operand trust bundle for the name
//! `<cr>.<namespace>.svc` (the name it is issued for). One request per connection: a metric is
//! registered once per process and scraped once per schedule interval.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How long one call may take, connection and answer included.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read (a `/q/metrics` of many scheduled metrics stays far below).
const ANSWER_LIMIT: usize = 8 << 20;
/// OpenShift's per-namespace ConfigMap with the service CA, where the service-ca operator
/// issues the serving certificates and their Secrets hold no `ca.crt`.
const SERVICE_CA_CONFIG_MAP: (&str, &str) = ("openshift-service-ca.crt", "service-ca.crt");

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No trust bundle for the service's certificate.
    #[error("no CA to verify the service's certificate: {0}")]
    NoTrust(String),
    /// Reading the trust bundle failed.
    #[error("reading the service's trust bundle")]
    Kube(#[source] kube::Error),
    /// The connection or the TLS handshake failed.
    #[error("connecting to {address}")]
    Connect {
        /// The process's address.
        address: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("{method} {path} at {address}: {message}")]
    Http {
        /// The method.
        method: String,
        /// The path.
        path: String,
        /// The process's address.
        address: String,
        /// What went wrong.
        message: String,
    },
    /// The call did not finish in time.
    #[error("{method} {path} at {address}: no answer within {CALL_TIMEOUT:?}")]
    Timeout {
        /// The method.
        method: String,
        /// The path.
        path: String,
        /// The process's address.
        address: String,
    },
}

/// How to reach the processes of one TrustyAI service.
#[derive(Clone)]
pub struct ServiceApi {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl ServiceApi {
    /// The API of the TrustyAIService `cr` in `namespace`, trusting the `ca.crt` of its
    /// `<cr>-internal` Secret (the operand trust bundle), else OpenShift's service CA.
    pub async fn of(client: &kube::Client, namespace: &str, cr: &str) -> Result<Self, CallError> {
        let secret = Api::<Secret>::namespaced(client.clone(), namespace)
            .get_opt(&format!("{cr}-internal"))
            .await
            .map_err(CallError::Kube)?;
        let from_secret = secret.and_then(|s| s.data).and_then(|d| {
            d.get(trustyai_certs::secret_layout::CA_CRT)
                .map(|b| b.0.clone())
        });
        let bundle = match from_secret {
            Some(pem) => pem,
            None => Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(SERVICE_CA_CONFIG_MAP.0)
                .await
                .map_err(CallError::Kube)?
                .and_then(|c| c.data)
                .and_then(|d| d.get(SERVICE_CA_CONFIG_MAP.1).cloned())
                .map(String::into_bytes)
                .ok_or_else(|| {
                    CallError::NoTrust(format!(
                        "neither Secret {cr}-internal has ca.crt nor ConfigMap {} exists",
                        SERVICE_CA_CONFIG_MAP.0
                    ))
                })?,
        };
        Self::trusting(&bundle, &format!("{cr}.{namespace}.svc"))
    }

    /// The API whose certificates `bundle` (PEM) signs for `server_name`.
    pub fn trusting(bundle: &[u8], server_name: &str) -> Result<Self, CallError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(bundle).flatten() {
            // A certificate rustls cannot use as a root is skipped; none at all is an error.
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(CallError::NoTrust(
                "the trust bundle holds no usable CA".into(),
            ));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| CallError::NoTrust(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| CallError::NoTrust(format!("server name {server_name}: {e}")))?;
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }

    /// `method path` at `address` with an optional JSON body; the status and the body.
    pub async fn call(
        &self,
        address: &str,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(http::StatusCode, Bytes), CallError> {
        let http_error = |message: String| CallError::Http {
            method: method.to_string(),
            path: path.to_owned(),
            address: address.to_owned(),
            message,
        };
        let exchange = async {
            let tcp = TcpStream::connect(address)
                .await
                .map_err(|source| CallError::Connect {
                    address: address.to_owned(),
                    source,
                })?;
            let tls = self
                .connector
                .connect(self.server_name.clone(), tcp)
                .await
                .map_err(|source| CallError::Connect {
                    address: address.to_owned(),
                    source,
                })?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                    .await
                    .map_err(|e| http_error(e.to_string()))?;
            let driver = tokio::spawn(connection);
            let payload = match body {
                Some(b) => serde_json::to_vec(b).map_err(|e| http_error(e.to_string()))?,
                None => Vec::new(),
            };
            let mut request = http::Request::builder()
                .method(method.clone())
                .uri(path)
                .header(http::header::HOST, self.server_name.to_str().as_ref());
            if body.is_some() {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
            }
            let request = request
                .body(Full::new(Bytes::from(payload)))
                .map_err(|e| http_error(e.to_string()))?;
            let answer = sender
                .send_request(request)
                .await
                .map_err(|e| http_error(e.to_string()))?;
            let status = answer.status();
            let bytes = Limited::new(answer.into_body(), ANSWER_LIMIT)
                .collect()
                .await
                .map_err(|e| http_error(format!("reading the answer: {e}")))?
                .to_bytes();
            driver.abort();
            Ok((status, bytes))
        };
        tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(CallError::Timeout {
                    method: method.to_string(),
                    path: path.to_owned(),
                    address: address.to_owned(),
                })
            })
    }
}
