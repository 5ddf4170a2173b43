//! Parsing and checking PEM material: certificates, private keys, and the validated bundle that
//! the webhook server serves ([`TlsMaterial`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

use crate::verify;

/// Why some certificate or key material cannot be used. `what` names the source (a Secret key
/// such as `tls.crt`, or a file path) so the message points at the broken piece.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MaterialError {
    /// The piece is absent or empty.
    #[error("{what} is missing or empty")]
    Missing {
        /// Source of the piece.
        what: String,
    },
    /// The PEM framing itself is broken (unterminated block, bad base64, not UTF-8, …).
    #[error("{what} is not valid PEM: {reason}")]
    Pem {
        /// Source of the piece.
        what: String,
        /// What the decoder reported.
        reason: String,
    },
    /// No `CERTIFICATE` block was found.
    #[error("{what} holds no PEM CERTIFICATE block")]
    NoCertificate {
        /// Source of the piece.
        what: String,
    },
    /// A `CERTIFICATE` block does not decode as X.509.
    #[error("{what} is not a valid X.509 certificate: {reason}")]
    Certificate {
        /// Source of the piece.
        what: String,
        /// What the parser reported.
        reason: String,
    },
    /// More certificates than the piece may hold (a CA file holds exactly one).
    #[error("{what} holds {count} certificates, expected exactly one")]
    TooManyCertificates {
        /// Source of the piece.
        what: String,
        /// How many were found.
        count: usize,
    },
    /// No private key block was found.
    #[error(
        "{what} holds no private key (expected a PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block)"
    )]
    NoKey {
        /// Source of the piece.
        what: String,
    },
    /// A key block is present but cannot be used.
    #[error("{what} is not a usable private key: {reason}")]
    Key {
        /// Source of the piece.
        what: String,
        /// What the key loader reported.
        reason: String,
    },
    /// The key is fine but belongs to another certificate.
    #[error("the private key in {key} does not match the certificate in {cert}")]
    KeyMismatch {
        /// Source of the certificate.
        cert: String,
        /// Source of the key.
        key: String,
    },
    /// The certificate's validity has ended.
    #[error("{what} expired at {not_after}")]
    Expired {
        /// Source of the piece.
        what: String,
        /// End of validity.
        not_after: OffsetDateTime,
    },
    /// The certificate's validity has not begun (a clock far ahead wrote it).
    #[error("{what} is not valid before {not_before}")]
    NotYetValid {
        /// Source of the piece.
        what: String,
        /// Start of validity.
        not_before: OffsetDateTime,
    },
    /// A CA position holds a certificate without `basicConstraints CA:TRUE`.
    #[error("{what} is not a CA certificate (basicConstraints CA is not set)")]
    NotCa {
        /// Source of the piece.
        what: String,
    },
    /// The serving chain does not verify against the CA bundle.
    #[error("the certificate in {cert} does not chain to the CA bundle in {bundle}: {reason}")]
    Untrusted {
        /// Source of the serving chain.
        cert: String,
        /// Source of the bundle.
        bundle: String,
        /// What path validation reported.
        reason: String,
    },
}

/// One parsed X.509 certificate: the DER plus what the decisions in this crate look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    der: CertificateDer<'static>,
    subject: String,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    dns_names: Vec<String>,
    ip_addresses: Vec<IpAddr>,
    is_ca: bool,
    subject_key_id: Option<Vec<u8>>,
}

impl CertInfo {
    /// Parses one DER certificate.
    pub fn from_der(what: &str, der: CertificateDer<'static>) -> Result<Self, MaterialError> {
        let bad = |reason: String| MaterialError::Certificate {
            what: what.to_owned(),
            reason,
        };
        let (rest, cert) =
            X509Certificate::from_der(der.as_ref()).map_err(|e| bad(e.to_string()))?;
        if !rest.is_empty() {
            return Err(bad(format!(
                "{} trailing bytes after the certificate",
                rest.len()
            )));
        }
        let mut dns_names = Vec::new();
        let mut ip_addresses = Vec::new();
        let san = cert
            .subject_alternative_name()
            .map_err(|e| bad(format!("subjectAltName: {e}")))?;
        for name in san.iter().flat_map(|ext| ext.value.general_names.iter()) {
            match name {
                GeneralName::DNSName(dns) => dns_names.push((*dns).to_owned()),
                GeneralName::IPAddress(bytes) => {
                    if let Some(ip) = ip_from_bytes(bytes) {
                        ip_addresses.push(ip);
                    }
                }
                _ => {}
            }
        }
        let is_ca = cert
            .basic_constraints()
            .map_err(|e| bad(format!("basicConstraints: {e}")))?
            .is_some_and(|bc| bc.value.ca);
        let subject_key_id = cert
            .iter_extensions()
            .find_map(|ext| match ext.parsed_extension() {
                x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(id) => {
                    Some(id.0.to_vec())
                }
                _ => None,
            });
        let validity = cert.validity();
        Ok(Self {
            subject: cert.subject().to_string(),
            not_before: validity.not_before.to_datetime(),
            not_after: validity.not_after.to_datetime(),
            dns_names,
            ip_addresses,
            is_ca,
            subject_key_id,
            der,
        })
    }

    /// The DER encoding.
    pub fn der(&self) -> &CertificateDer<'static> {
        &self.der
    }

    /// The subject, RFC 4514 style.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Start of validity.
    pub fn not_before(&self) -> OffsetDateTime {
        self.not_before
    }

    /// End of validity; the serving certificate's is exported as a metric.
    pub fn not_after(&self) -> OffsetDateTime {
        self.not_after
    }

    /// DNS subject alternative names.
    pub fn dns_names(&self) -> &[String] {
        &self.dns_names
    }

    /// IP subject alternative names.
    pub fn ip_addresses(&self) -> &[IpAddr] {
        &self.ip_addresses
    }

    /// Whether `basicConstraints CA:TRUE` is set.
    pub fn is_ca(&self) -> bool {
        self.is_ca
    }

    /// The subjectKeyIdentifier extension, if present.
    pub(crate) fn subject_key_id(&self) -> Option<&[u8]> {
        self.subject_key_id.as_deref()
    }

    /// The point at two thirds of the validity period, when renewal is due.
    pub fn renew_at(&self) -> OffsetDateTime {
        let lifetime = self.not_after - self.not_before;
        self.not_before + lifetime * 2 / 3
    }

    /// `Ok` if `now` lies within the validity period.
    pub fn check_time(&self, what: &str, now: OffsetDateTime) -> Result<(), MaterialError> {
        if now >= self.not_after {
            Err(MaterialError::Expired {
                what: what.to_owned(),
                not_after: self.not_after,
            })
        } else if now < self.not_before {
            Err(MaterialError::NotYetValid {
                what: what.to_owned(),
                not_before: self.not_before,
            })
        } else {
            Ok(())
        }
    }

    /// Whether `now` lies within the validity period.
    pub fn is_valid_at(&self, now: OffsetDateTime) -> bool {
        self.not_before <= now && now < self.not_after
    }
}

fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes)
            .ok()
            .map(|b| IpAddr::V4(Ipv4Addr::from(b))),
        16 => <[u8; 16]>::try_from(bytes)
            .ok()
            .map(|b| IpAddr::V6(Ipv6Addr::from(b))),
        _ => None,
    }
}

fn non_empty<'a>(what: &str, pem: &'a [u8]) -> Result<&'a [u8], MaterialError> {
    if pem.iter().all(u8::is_ascii_whitespace) {
        Err(MaterialError::Missing {
            what: what.to_owned(),
        })
    } else {
        Ok(pem)
    }
}

fn pem_error(what: &str, err: &pem::Error) -> MaterialError {
    MaterialError::Pem {
        what: what.to_owned(),
        reason: err.to_string(),
    }
}

fn utf8(what: &str, pem: &[u8]) -> Result<String, MaterialError> {
    String::from_utf8(pem.to_vec()).map_err(|_| MaterialError::Pem {
        what: what.to_owned(),
        reason: "not UTF-8 text".to_owned(),
    })
}

/// Parses every `CERTIFICATE` block of `pem`, in order. Other block types are skipped, text
/// outside blocks is ignored (as `openssl` does).
pub fn parse_certificates(what: &str, pem: &[u8]) -> Result<Vec<CertInfo>, MaterialError> {
    let pem = non_empty(what, pem)?;
    let mut certs = Vec::new();
    for der in CertificateDer::pem_slice_iter(pem) {
        let der = der.map_err(|e| pem_error(what, &e))?;
        certs.push(CertInfo::from_der(what, der)?);
    }
    if certs.is_empty() {
        return Err(MaterialError::NoCertificate {
            what: what.to_owned(),
        });
    }
    Ok(certs)
}

/// Parses the first private key block (PKCS#8, SEC1 or PKCS#1) of `pem`.
pub(crate) fn parse_private_key(
    what: &str,
    pem: &[u8],
) -> Result<PrivateKeyDer<'static>, MaterialError> {
    let pem = non_empty(what, pem)?;
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        pem::Error::NoItemsFound => MaterialError::NoKey {
            what: what.to_owned(),
        },
        other => pem_error(what, &other),
    })
}

/// Loads `key` with the ring provider (exactly what the TLS server will do) and checks it
/// belongs to the first certificate of `chain`.
fn check_key_matches(
    cert_what: &str,
    key_what: &str,
    chain: &[CertInfo],
    key: PrivateKeyDer<'static>,
) -> Result<(), MaterialError> {
    let provider = rustls::crypto::ring::default_provider();
    let signing_key =
        provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| MaterialError::Key {
                what: key_what.to_owned(),
                reason: e.to_string(),
            })?;
    let ders = chain.iter().map(|c| c.der().clone()).collect();
    match CertifiedKey::new(ders, signing_key).keys_match() {
        // Unknown: the key type cannot report its public half; rustls accepts that too.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(()),
        Err(rustls::Error::InconsistentKeys(_)) => Err(MaterialError::KeyMismatch {
            cert: cert_what.to_owned(),
            key: key_what.to_owned(),
        }),
        Err(other) => Err(MaterialError::Certificate {
            what: cert_what.to_owned(),
            reason: other.to_string(),
        }),
    }
}

/// A serving certificate chain (leaf first) and its matching key.
#[derive(Clone, Debug)]
pub struct ServingCert {
    chain: Vec<CertInfo>,
    chain_pem: String,
    key_pem: String,
}

impl ServingCert {
    /// Parses a chain and key and checks that the key belongs to the leaf. Time is not checked
    /// here ([`CertInfo::check_time`]), so callers can tell "expired" from "garbage".
    pub fn parse(
        cert_what: &str,
        cert_pem: &[u8],
        key_what: &str,
        key_pem: &[u8],
    ) -> Result<Self, MaterialError> {
        let chain = parse_certificates(cert_what, cert_pem)?;
        let key = parse_private_key(key_what, key_pem)?;
        check_key_matches(cert_what, key_what, &chain, key)?;
        Ok(Self {
            chain,
            chain_pem: utf8(cert_what, cert_pem)?,
            key_pem: utf8(key_what, key_pem)?,
        })
    }

    /// The leaf certificate.
    pub fn leaf(&self) -> &CertInfo {
        // `parse_certificates` never returns an empty list.
        &self.chain[0]
    }

    /// The chain, leaf first.
    pub fn chain(&self) -> &[CertInfo] {
        &self.chain
    }

    /// The chain as PEM text.
    pub fn chain_pem(&self) -> &str {
        &self.chain_pem
    }

    /// The key as PEM text.
    pub(crate) fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

/// A CA certificate and its key, usable to sign serving certificates.
#[derive(Clone, Debug)]
pub struct CaCert {
    cert: CertInfo,
    cert_pem: String,
    key_pem: String,
}

impl CaCert {
    /// Parses a CA certificate (exactly one) and its key, and checks that the certificate is a
    /// CA, that the key matches it, and that the key can sign (rcgen with ring needs PKCS#8).
    pub fn parse(
        cert_what: &str,
        cert_pem: &[u8],
        key_what: &str,
        key_pem: &[u8],
    ) -> Result<Self, MaterialError> {
        let mut certs = parse_certificates(cert_what, cert_pem)?;
        if certs.len() != 1 {
            return Err(MaterialError::TooManyCertificates {
                what: cert_what.to_owned(),
                count: certs.len(),
            });
        }
        if !certs[0].is_ca() {
            return Err(MaterialError::NotCa {
                what: cert_what.to_owned(),
            });
        }
        let key = parse_private_key(key_what, key_pem)?;
        check_key_matches(cert_what, key_what, &certs, key)?;
        let key_pem = utf8(key_what, key_pem)?;
        rcgen::KeyPair::from_pem(&key_pem).map_err(|e| MaterialError::Key {
            what: key_what.to_owned(),
            reason: format!("cannot sign with it ({e}); a PKCS#8 ECDSA P-256 key is expected"),
        })?;
        Ok(Self {
            cert: certs.remove(0),
            cert_pem: utf8(cert_what, cert_pem)?,
            key_pem,
        })
    }

    /// The CA certificate.
    pub fn cert(&self) -> &CertInfo {
        &self.cert
    }

    /// The CA certificate as PEM text.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA key as PEM text (to store it back, e.g. when a rotation ends).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

impl AsRef<CertInfo> for CaCert {
    fn as_ref(&self) -> &CertInfo {
        &self.cert
    }
}

/// What the webhook server serves: a validated chain and key, plus the CA bundle clients should
/// trust. Built only through constructors that check the key matches, the leaf is within its
/// validity, and (when a bundle is known) the chain verifies against it — so a value of this type
/// is always safe to swap in.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsMaterial {
    cert_chain_pem: String,
    key_pem: String,
    ca_bundle_pem: Option<String>,
    not_after: OffsetDateTime,
}

impl TlsMaterial {
    /// Validates PEM material: chain + matching key, leaf valid at `now`, and, if `ca_bundle_pem`
    /// is given, the chain verifies against it at `now`.
    pub fn from_pem(
        cert_chain_pem: &[u8],
        key_pem: &[u8],
        ca_bundle_pem: Option<&[u8]>,
        now: OffsetDateTime,
    ) -> Result<Self, MaterialError> {
        Self::from_labelled_pem(
            ("certificate", cert_chain_pem),
            ("private key", key_pem),
            ca_bundle_pem.map(|b| ("CA bundle", b)),
            now,
        )
    }

    /// [`TlsMaterial::from_pem`] with source names (Secret keys, file paths) for the errors.
    pub fn from_labelled_pem(
        cert_chain_pem: (&str, &[u8]),
        key_pem: (&str, &[u8]),
        ca_bundle_pem: Option<(&str, &[u8])>,
        now: OffsetDateTime,
    ) -> Result<Self, MaterialError> {
        let serving = ServingCert::parse(cert_chain_pem.0, cert_chain_pem.1, key_pem.0, key_pem.1)?;
        let bundle = match ca_bundle_pem {
            Some((what, pem)) => Some((what, parse_certificates(what, pem)?, utf8(what, pem)?)),
            None => None,
        };
        Self::from_parsed(
            cert_chain_pem.0,
            &serving,
            bundle
                .as_ref()
                .map(|(what, certs, pem)| (*what, certs.as_slice(), pem.as_str())),
            now,
        )
    }

    pub(crate) fn from_parsed(
        cert_what: &str,
        serving: &ServingCert,
        bundle: Option<(&str, &[CertInfo], &str)>,
        now: OffsetDateTime,
    ) -> Result<Self, MaterialError> {
        serving.leaf().check_time(cert_what, now)?;
        if let Some((bundle_what, certs, _)) = bundle {
            verify::verify_chain(cert_what, serving.chain(), bundle_what, certs, now)?;
        }
        Ok(Self {
            cert_chain_pem: serving.chain_pem().to_owned(),
            key_pem: serving.key_pem().to_owned(),
            ca_bundle_pem: bundle.map(|(_, _, pem)| pem.to_owned()),
            not_after: serving.leaf().not_after(),
        })
    }

    /// The serving chain, leaf first, PEM.
    pub fn cert_chain_pem(&self) -> &str {
        &self.cert_chain_pem
    }

    /// The serving key, PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The CA bundle clients should trust, PEM; `None` when the source does not provide one
    /// (OpenShift service-ca injects its own).
    pub fn ca_bundle_pem(&self) -> Option<&str> {
        self.ca_bundle_pem.as_deref()
    }

    /// End of validity of the serving (leaf) certificate.
    pub fn not_after(&self) -> OffsetDateTime {
        self.not_after
    }

    /// [`TlsMaterial::not_after`] as Unix seconds, for a gauge.
    pub fn not_after_unix_seconds(&self) -> i64 {
        self.not_after.unix_timestamp()
    }
}

impl fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key.
        f.debug_struct("TlsMaterial")
            .field("not_after", &self.not_after)
            .field("has_ca_bundle", &self.ca_bundle_pem.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::KeyedCert;
    use crate::testutil::{ca, leaf, t0};

    fn material(
        cert: &str,
        key: &str,
        bundle: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<TlsMaterial, MaterialError> {
        TlsMaterial::from_labelled_pem(
            ("tls.crt", cert.as_bytes()),
            ("tls.key", key.as_bytes()),
            bundle.map(|b| ("ca.crt", b.as_bytes())),
            now,
        )
    }

    /// A serving certificate issued at t0 by a CA of its own.
    fn issued() -> KeyedCert {
        let (_, parsed) = ca(t0());
        leaf(&parsed, t0())
    }

    /// Why `cert` and `key` (without a bundle) are refused at `now`.
    fn refused(cert: &str, key: &str, now: OffsetDateTime) -> MaterialError {
        material(cert, key, None, now).expect_err("refused")
    }

    /// Asserts that `cert`, with a good key, is refused as `expected` says.
    #[track_caller]
    fn assert_certificate_refused(cert: &str, expected: impl Fn(&MaterialError) -> bool) {
        let err = refused(cert, &issued().key_pem, t0());
        assert!(expected(&err), "{err}");
    }

    /// Valid material issued at t0 with its CA as the bundle, and that CA.
    fn valid_material() -> (TlsMaterial, KeyedCert) {
        let (ca_pem, parsed) = ca(t0());
        let l = leaf(&parsed, t0());
        let m = material(&l.cert_pem, &l.key_pem, Some(&ca_pem.cert_pem), t0()).expect("valid");
        (m, ca_pem)
    }

    #[test]
    fn valid_material_reports_its_expiry() {
        let (m, _) = valid_material();
        assert_eq!(m.not_after(), t0() + time::Duration::days(90));
        assert_eq!(
            m.not_after_unix_seconds(),
            (t0() + time::Duration::days(90)).unix_timestamp()
        );
    }

    #[test]
    fn valid_material_keeps_its_ca_bundle() {
        let (m, ca_pem) = valid_material();
        assert_eq!(m.ca_bundle_pem(), Some(ca_pem.cert_pem.as_str()));
    }

    #[test]
    fn material_debug_output_hides_the_key() {
        let (m, _) = valid_material();
        assert!(
            !format!("{m:?}").contains("PRIVATE"),
            "Debug must not print the key"
        );
    }

    #[test]
    fn empty_input_is_missing() {
        let l = issued();
        for (cert, key, what) in [
            ("  \n", &l.key_pem[..], "tls.crt"),
            (&l.cert_pem, "", "tls.key"),
        ] {
            let what = what.to_owned();
            assert_eq!(refused(cert, key, t0()), MaterialError::Missing { what });
        }
    }

    #[test]
    fn garbage_is_reported_precisely() {
        let l = issued();
        let no_certificate = || MaterialError::NoCertificate {
            what: "tls.crt".into(),
        };
        for (cert, key, expected) in [
            ("hello world", &l.key_pem[..], no_certificate()),
            (
                &l.cert_pem,
                "not a key",
                MaterialError::NoKey {
                    what: "tls.key".into(),
                },
            ),
            // A key where the certificate should be.
            (&l.key_pem, &l.key_pem, no_certificate()),
        ] {
            assert_eq!(refused(cert, key, t0()), expected);
        }
    }

    #[test]
    fn broken_pem_framing_is_a_pem_error() {
        let cert_pem = issued().cert_pem;
        assert_certificate_refused(
            &cert_pem[..cert_pem.len() / 2],
            |err| matches!(err, MaterialError::Pem { what, .. } if what == "tls.crt"),
        );
    }

    #[test]
    fn a_certificate_block_with_junk_inside_is_a_certificate_error() {
        let junk = "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n";
        assert_certificate_refused(
            junk,
            |err| matches!(err, MaterialError::Certificate { what, .. } if what == "tls.crt"),
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_a_mismatch() {
        let (_, parsed) = ca(t0());
        let a = leaf(&parsed, t0());
        let b = leaf(&parsed, t0());
        assert_eq!(
            refused(&a.cert_pem, &b.key_pem, t0()),
            MaterialError::KeyMismatch {
                cert: "tls.crt".into(),
                key: "tls.key".into()
            }
        );
    }

    #[test]
    fn certificates_outside_their_validity_window_are_rejected() {
        let l = issued();
        let after = t0() + time::Duration::days(90);
        assert_eq!(
            refused(&l.cert_pem, &l.key_pem, after),
            MaterialError::Expired {
                what: "tls.crt".into(),
                not_after: after
            }
        );
        let before = t0() - time::Duration::hours(1);
        assert_eq!(
            refused(&l.cert_pem, &l.key_pem, before),
            MaterialError::NotYetValid {
                what: "tls.crt".into(),
                not_before: t0() - time::Duration::minutes(5)
            }
        );
    }

    #[test]
    fn a_chain_that_does_not_verify_against_the_bundle_is_rejected() {
        let (_, parsed) = ca(t0());
        let (other, _) = ca(t0());
        let l = leaf(&parsed, t0());
        let err = material(&l.cert_pem, &l.key_pem, Some(&other.cert_pem), t0()).unwrap_err();
        assert!(matches!(err, MaterialError::Untrusted { .. }), "{err}");
    }

    #[test]
    fn ca_parsing_accepts_only_one_ca_certificate_with_its_key() {
        let (a, parsed) = ca(t0());
        let (b, _) = ca(t0());
        let l = leaf(&parsed, t0());
        assert_eq!(
            CaCert::parse(
                "ca.crt",
                l.cert_pem.as_bytes(),
                "ca.key",
                l.key_pem.as_bytes()
            )
            .unwrap_err(),
            MaterialError::NotCa {
                what: "ca.crt".into()
            }
        );
        let two = format!("{}{}", a.cert_pem, b.cert_pem);
        assert_eq!(
            CaCert::parse("ca.crt", two.as_bytes(), "ca.key", a.key_pem.as_bytes()).unwrap_err(),
            MaterialError::TooManyCertificates {
                what: "ca.crt".into(),
                count: 2
            }
        );
        assert_eq!(
            CaCert::parse(
                "ca.crt",
                a.cert_pem.as_bytes(),
                "ca.key",
                b.key_pem.as_bytes()
            )
            .unwrap_err(),
            MaterialError::KeyMismatch {
                cert: "ca.crt".into(),
                key: "ca.key".into()
            }
        );
    }

    #[test]
    fn chain_parsing_returns_only_the_certificates_in_file_order() {
        let (a, parsed) = ca(t0());
        let l = leaf(&parsed, t0());
        let text = format!("junk before\n{}{}{}", l.cert_pem, l.key_pem, a.cert_pem);
        let certs = parse_certificates("chain", text.as_bytes()).expect("parse");
        assert_eq!(certs.len(), 2);
        assert!(!certs[0].is_ca());
        assert!(certs[1].is_ca());
    }

    #[test]
    fn renewal_point_is_two_thirds_of_the_lifetime() {
        let l = issued();
        let cert = &parse_certificates("leaf", l.cert_pem.as_bytes()).expect("parse")[0];
        let lifetime = cert.not_after() - cert.not_before();
        assert_eq!(cert.renew_at() - cert.not_before(), lifetime * 2 / 3);
        assert_eq!(cert.not_after() - cert.renew_at(), lifetime / 3);
    }
}
