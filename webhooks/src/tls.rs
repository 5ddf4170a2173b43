//! The serving certificate slot and the rustls server configuration.
//!
//! The slot is read on every TLS handshake and written only on rotation, so it is an atomically
//! swapped `Arc`: a handshake takes no lock, and a rotation never blocks or drops a connection.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{InconsistentKeys, ServerConfig, SupportedProtocolVersion};

use crate::client_trust::ClientTrust;

/// The TLS versions the webhook server accepts: 1.3 and 1.2. Anything older is refused during
/// the handshake (the apiserver speaks 1.2 and 1.3 only, and older versions are insecure).
pub static PROTOCOL_VERSIONS: &[&SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

/// ALPN identifier of HTTP/2 over TLS.
pub(crate) const ALPN_H2: &[u8] = b"h2";
/// ALPN identifier of HTTP/1.1.
pub(crate) const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Why PEM material was refused, or why the server configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate chain PEM is malformed (bad base64, a missing END line, ...).
    #[error("the certificate chain PEM is malformed")]
    CertificatePem(#[source] pem::Error),

    /// The certificate chain PEM holds no `CERTIFICATE` block.
    #[error("the certificate chain PEM holds no CERTIFICATE block")]
    NoCertificate,

    /// The private key PEM is malformed.
    #[error("the private key PEM is malformed")]
    PrivateKeyPem(#[source] pem::Error),

    /// The private key PEM holds no PKCS#8, PKCS#1 or SEC1 private key block.
    #[error("the private key PEM holds no PRIVATE KEY block (PKCS#8, PKCS#1 or SEC1)")]
    NoPrivateKey,

    /// The first certificate of the chain is not a valid X.509 certificate.
    #[error("the leaf certificate is not valid X.509 DER: {reason}")]
    InvalidCertificate {
        /// What the X.509 parser reported.
        reason: String,
    },

    /// The private key could not be loaded by the `ring` provider (unsupported algorithm or a
    /// corrupt key).
    #[error("the private key is not usable for TLS")]
    UnsupportedPrivateKey(#[source] rustls::Error),

    /// The private key does not belong to the leaf certificate.
    #[error("the private key does not match the leaf certificate's public key")]
    KeyMismatch,

    /// Whether the key belongs to the certificate could not be determined.
    #[error("could not check that the private key matches the leaf certificate")]
    KeyCheck(#[source] rustls::Error),

    /// rustls refused the server configuration.
    #[error("could not build the TLS server configuration")]
    ServerConfig(#[source] rustls::Error),

    /// The client CA bundle holds no usable CA certificate.
    #[error("the client CA bundle holds no usable CERTIFICATE block")]
    NoClientCa,

    /// The client certificate verifier could not be built from the client CA bundle.
    #[error("could not use the client CA bundle to verify clients: {reason}")]
    ClientVerifier {
        /// What rustls reported.
        reason: String,
    },
}

/// What the served leaf certificate says about itself, for logs, `/readyz` and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The subject distinguished name, RFC 4514 style.
    pub subject: String,
    /// The serial number, as colon-separated hex.
    pub serial: String,
    /// Start of validity.
    pub not_before: SystemTime,
    /// End of validity.
    pub not_after: SystemTime,
}

impl CertificateInfo {
    /// End of validity as seconds since the Unix epoch, the unit Prometheus expects for
    /// timestamps.
    pub fn not_after_unix_seconds(&self) -> i64 {
        unix_seconds(self.not_after)
    }
}

/// The crypto provider every TLS object of this crate uses: `ring`, passed explicitly so the
/// server works whether or not the process installed a default provider.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls server configuration of the webhook server: TLS 1.2 and 1.3, ALPN `h2` and
/// `http/1.1`, and the certificate taken from `cert` at each handshake. With `client_trust`,
/// every client must present a certificate that chains to the CAs it holds at that handshake
/// (the API server does when its admission configuration gives it one for webhooks); without
/// it, no client certificate is asked for.
pub fn server_config(
    cert: Arc<ServingCertificate>,
    client_trust: Option<Arc<ClientTrust>>,
) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(crypto_provider())
        .with_protocol_versions(PROTOCOL_VERSIONS)
        .map_err(TlsError::ServerConfig)?;
    let builder = match client_trust {
        None => builder.with_no_client_auth(),
        Some(trust) => builder.with_client_cert_verifier(trust),
    };
    let mut config = builder.with_cert_resolver(cert);
    config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
    Ok(config)
}

/// The certificate the webhook server presents, replaceable while the server runs.
///
/// Starts empty: until [`set_from_pem`](Self::set_from_pem) succeeds, handshakes fail (and
/// readiness should say so). Each successful call affects only handshakes that start after it;
/// established connections keep the certificate they negotiated.
#[derive(Debug)]
pub struct ServingCertificate {
    provider: Arc<CryptoProvider>,
    current: ArcSwapOption<Served>,
}

#[derive(Debug)]
struct Served {
    key: Arc<CertifiedKey>,
    info: CertificateInfo,
}

impl Default for ServingCertificate {
    fn default() -> Self {
        Self::new()
    }
}

impl ServingCertificate {
    /// An empty slot.
    pub fn new() -> Self {
        Self {
            provider: crypto_provider(),
            current: ArcSwapOption::empty(),
        }
    }

    /// A slot holding the given certificate chain and key (see [`set_from_pem`](Self::set_from_pem)).
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let slot = Self::new();
        slot.set_from_pem(cert_chain_pem, key_pem)?;
        Ok(slot)
    }

    /// Replaces the served certificate.
    ///
    /// `cert_chain_pem` holds the leaf first, then any intermediates; `key_pem` holds the leaf's
    /// private key (PKCS#8, PKCS#1 or SEC1). The material is checked completely (PEM, X.509,
    /// key usable, key matches the leaf) before anything changes: on error the previous
    /// certificate keeps serving.
    pub fn set_from_pem(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        let served = self.parse(cert_chain_pem, key_pem)?;
        let info = served.info.clone();
        if info.not_after <= SystemTime::now() {
            // Still served: refusing it would not bring back a valid one, and the certificate
            // manager is the component that can fix it.
            tracing::warn!(subject = %info.subject, serial = %info.serial,
                not_after = info.not_after_unix_seconds(), "loaded serving certificate has expired");
        }
        self.current.store(Some(Arc::new(served)));
        tracing::info!(subject = %info.subject, serial = %info.serial,
            not_after = info.not_after_unix_seconds(), "serving certificate loaded");
        Ok(())
    }

    /// Details of the served leaf certificate, if one is loaded.
    pub fn info(&self) -> Option<CertificateInfo> {
        self.current
            .load()
            .as_ref()
            .map(|served| served.info.clone())
    }

    /// End of validity of the served leaf certificate, if one is loaded.
    pub fn not_after(&self) -> Option<SystemTime> {
        self.current
            .load()
            .as_ref()
            .map(|served| served.info.not_after)
    }

    fn parse(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<Served, TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(TlsError::CertificatePem)?;
        let leaf = chain.first().ok_or(TlsError::NoCertificate)?;
        let info = leaf_info(leaf)?;

        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|err| match err {
            pem::Error::NoItemsFound => TlsError::NoPrivateKey,
            other => TlsError::PrivateKeyPem(other),
        })?;
        let signing_key = self
            .provider
            .key_provider
            .load_private_key(key)
            .map_err(TlsError::UnsupportedPrivateKey)?;

        let key = CertifiedKey::new(chain, signing_key);
        match key.keys_match() {
            Ok(()) => {}
            Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
                return Err(TlsError::KeyMismatch);
            }
            // Unlike `CertifiedKey::from_der`, an undeterminable match is refused: the point of
            // checking is to never serve a key that might not belong to the certificate.
            Err(other) => return Err(TlsError::KeyCheck(other)),
        }
        Ok(Served {
            key: Arc::new(key),
            info,
        })
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .load()
            .as_ref()
            .map(|served| Arc::clone(&served.key))
    }
}

fn leaf_info(der: &CertificateDer<'_>) -> Result<CertificateInfo, TlsError> {
    let (rest, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|err| TlsError::InvalidCertificate {
            reason: err.to_string(),
        })?;
    if !rest.is_empty() {
        return Err(TlsError::InvalidCertificate {
            reason: format!("{} trailing bytes after the certificate", rest.len()),
        });
    }
    let validity = cert.validity();
    Ok(CertificateInfo {
        subject: cert.subject().to_string(),
        serial: cert.raw_serial_as_string(),
        not_before: system_time(validity.not_before.timestamp()),
        not_after: system_time(validity.not_after.timestamp()),
    })
}

fn system_time(unix_seconds: i64) -> SystemTime {
    let magnitude = Duration::from_secs(unix_seconds.unsigned_abs());
    if unix_seconds >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

fn unix_seconds(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_secs()).map_or(i64::MIN, |s| -s),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;
    use rcgen::{CertificateParams, KeyPair, date_time_ymd};

    struct Pair {
        cert_pem: String,
        key_pem: String,
    }

    fn self_signed(name: &str) -> Pair {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec![name.to_owned()]).expect("params");
        params.not_before = date_time_ymd(2024, 1, 1);
        params.not_after = date_time_ymd(2099, 6, 30);
        let cert = params.self_signed(&key).expect("self-signed");
        Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    #[test]
    fn a_loaded_pair_reports_its_validity() {
        let pair = self_signed("svc.ns.svc");
        let slot = ServingCertificate::new();
        assert!(slot.info().is_none());
        assert!(slot.not_after().is_none());

        slot.set_from_pem(pair.cert_pem.as_bytes(), pair.key_pem.as_bytes())
            .expect("valid pair");

        let info = slot.info().expect("info");
        assert_eq!(info.not_after_unix_seconds(), 4_086_460_800); // 2099-06-30T00:00:00Z
        assert_eq!(unix_seconds(info.not_before), 1_704_067_200); // 2024-01-01T00:00:00Z
        assert_eq!(slot.not_after(), Some(info.not_after));
    }

    /// What is wrong, certificate PEM, key PEM, the expected error.
    type Case = (&'static str, Vec<u8>, Vec<u8>, fn(&TlsError) -> bool);

    /// A slot serving a good pair, and pairs it must refuse.
    fn slot_with_garbage() -> (ServingCertificate, Vec<Case>) {
        let good = self_signed("good");
        let other = self_signed("other");
        let slot = ServingCertificate::from_pem(good.cert_pem.as_bytes(), good.key_pem.as_bytes())
            .expect("valid pair");
        let cases: Vec<Case> = vec![
            (
                "no PEM at all",
                b"garbage".to_vec(),
                good.key_pem.clone().into_bytes(),
                |e| matches!(e, TlsError::NoCertificate),
            ),
            (
                "bad base64",
                b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n".to_vec(),
                good.key_pem.clone().into_bytes(),
                |e| matches!(e, TlsError::CertificatePem(_)),
            ),
            (
                "missing END line",
                b"-----BEGIN CERTIFICATE-----\nAAAA\n".to_vec(),
                good.key_pem.clone().into_bytes(),
                |e| matches!(e, TlsError::CertificatePem(_)),
            ),
            (
                "base64 that is not DER",
                b"-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n"
                    .to_vec(),
                good.key_pem.clone().into_bytes(),
                |e| matches!(e, TlsError::InvalidCertificate { .. }),
            ),
            (
                "key PEM holds a certificate",
                good.cert_pem.clone().into_bytes(),
                good.cert_pem.clone().into_bytes(),
                |e| matches!(e, TlsError::NoPrivateKey),
            ),
            (
                "key is not a key",
                good.cert_pem.clone().into_bytes(),
                b"-----BEGIN PRIVATE KEY-----\naGVsbG8gd29ybGQ=\n-----END PRIVATE KEY-----\n"
                    .to_vec(),
                |e| matches!(e, TlsError::UnsupportedPrivateKey(_)),
            ),
            (
                "key of another certificate",
                good.cert_pem.clone().into_bytes(),
                other.key_pem.clone().into_bytes(),
                |e| matches!(e, TlsError::KeyMismatch),
            ),
        ];
        (slot, cases)
    }

    #[test]
    fn garbage_is_refused_with_the_error_naming_it() {
        let (slot, cases) = slot_with_garbage();
        for (case, cert, key, expected) in cases {
            let err = slot.set_from_pem(&cert, &key).expect_err(case);
            assert!(expected(&err), "{case}: unexpected error {err:?}");
        }
    }

    #[test]
    fn refused_garbage_leaves_the_previous_certificate() {
        let (slot, cases) = slot_with_garbage();
        let before = slot.info();
        for (case, cert, key, _) in cases {
            slot.set_from_pem(&cert, &key).expect_err(case);
            assert_eq!(
                slot.info(),
                before,
                "{case}: the previous certificate must stay"
            );
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert_eq!(
            TlsError::KeyMismatch.to_string(),
            "the private key does not match the leaf certificate's public key"
        );
        let err = ServingCertificate::new()
            .set_from_pem(b"", b"")
            .expect_err("empty input");
        assert_eq!(
            err.to_string(),
            "the certificate chain PEM holds no CERTIFICATE block"
        );
    }

    #[test]
    fn server_config_offers_h2_before_http11() {
        let config = server_config(Arc::new(ServingCertificate::new()), None).expect("config");
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn tls13_is_preferred_over_tls12() {
        let versions: Vec<_> = PROTOCOL_VERSIONS.iter().map(|v| v.version).collect();
        assert_eq!(
            versions,
            vec![
                rustls::ProtocolVersion::TLSv1_3,
                rustls::ProtocolVersion::TLSv1_2
            ]
        );
    }

    #[test]
    fn unix_seconds_round_trips_on_either_side_of_the_epoch() {
        for secs in [-86_400, 0, 1_704_067_200] {
            assert_eq!(unix_seconds(system_time(secs)), secs);
        }
    }
}
