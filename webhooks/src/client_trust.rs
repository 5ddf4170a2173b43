//! The CAs that webhook clients' certificates must chain to, replaceable while the server runs.
//!
//! The API server's webhook client certificate is rotated like any other; a CA file read only at
//! start would refuse the API server after such a rotation until the operator restarts, and with
//! `failurePolicy: Fail` that stops every write of a TrustyAIService. So the verifier is an
//! atomically swapped slot, as the serving certificate is: a handshake takes no lock, a new CA
//! bundle applies to the next handshake, and established connections are kept.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::tls::{TlsError, crypto_provider};

/// The client CA bundle in force; every handshake asks the client for a certificate and
/// verifies it against the bundle held at that moment.
#[derive(Debug)]
pub struct ClientTrust {
    current: ArcSwap<Bundle>,
}

/// A verifier with the PEM it was built from, swapped together so that a reload compares a file
/// with what is really in force (not with what it read earlier).
#[derive(Debug)]
struct Bundle {
    verifier: Arc<dyn ClientCertVerifier>,
    pem: Vec<u8>,
}

impl Bundle {
    fn from_pem(pem: &[u8]) -> Result<Self, TlsError> {
        Ok(Self {
            verifier: verifier(pem)?,
            pem: pem.to_vec(),
        })
    }
}

impl ClientTrust {
    /// Trust built from PEM CA certificates (one or more `CERTIFICATE` blocks).
    pub fn from_pem(pem: &[u8]) -> Result<Self, TlsError> {
        Ok(Self {
            current: ArcSwap::from_pointee(Bundle::from_pem(pem)?),
        })
    }

    /// Replaces the bundle. The new one is checked completely first: on error the previous
    /// bundle stays in force.
    pub fn set_from_pem(&self, pem: &[u8]) -> Result<(), TlsError> {
        self.current.store(Arc::new(Bundle::from_pem(pem)?));
        Ok(())
    }

    /// Whether `pem` is the bundle in force, byte for byte.
    fn holds(&self, pem: &[u8]) -> bool {
        self.current.load().pem == pem
    }

    fn verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::clone(&self.current.load().verifier)
    }
}

/// Two trusts are equal when they are the same slot (what a reload changes is shared), so that
/// [`crate::HttpsOptions`] stays comparable.
impl PartialEq for ClientTrust {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for ClientTrust {}

fn verifier(pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(pem) {
        let der = der.map_err(TlsError::CertificatePem)?;
        roots.add(der).map_err(|e| TlsError::ClientVerifier {
            reason: e.to_string(),
        })?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoClientCa);
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crypto_provider())
        .build()
        .map_err(|e| TlsError::ClientVerifier {
            reason: e.to_string(),
        })
}

impl ClientCertVerifier for ClientTrust {
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// No hints: the hints would have to borrow from a bundle that a reload may replace during
    /// the handshake. A client given one certificate (the API server's admission configuration
    /// gives exactly one per webhook host) presents it whatever the hints say.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verifier()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

/// Keeps `trust` equal to the file at `path`, read every `interval`. A file that cannot be read
/// or holds no usable CA leaves the bundle in force (a Secret volume is rewritten through a
/// symlink swap, and a half-written file becomes valid on a later read); each distinct failure
/// is logged once. Runs until the task is dropped.
pub async fn reload_client_ca(trust: Arc<ClientTrust>, path: PathBuf, interval: Duration) {
    let mut last_error: Option<String> = None;
    loop {
        tokio::time::sleep(interval).await;
        let read = tokio::fs::read(&path).await;
        let outcome = match read {
            Ok(pem) if trust.holds(&pem) => Ok(false),
            Ok(pem) => trust
                .set_from_pem(&pem)
                .map(|()| true)
                .map_err(|error| with_causes(&error)),
            Err(error) => Err(error.to_string()),
        };
        match outcome {
            Ok(true) => {
                last_error = None;
                tracing::info!(path = %path.display(), "loaded a new webhook client CA bundle");
            }
            Ok(false) => last_error = None,
            Err(error) if last_error.as_deref() != Some(error.as_str()) => {
                tracing::warn!(path = %path.display(), %error, "keeping the webhook client CA bundle in force: the file could not be used");
                last_error = Some(error);
            }
            Err(_) => {}
        }
    }
}

/// `error` and its causes on one line: each distinct failure is logged once, so its text must
/// tell the failures apart.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}
