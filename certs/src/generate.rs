//! Generating a CA and issuing serving certificates (rcgen, ECDSA P-256, ring).
//!
//! Key generation is CPU work: async callers run these functions in
//! `tokio::task::spawn_blocking`.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256, SanType,
};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Name;

use crate::lifetimes::Lifetimes;
use crate::material::{CaCert, CertInfo, MaterialError};
use crate::names::ServiceNames;
use crate::verify;

/// Prefix of the CA's common name; the generation time follows, so an old and a new CA are told
/// apart at a glance (and by name during path building).
pub const CA_COMMON_NAME_PREFIX: &str = "trustyai-operator-webhook-ca";

/// Failures generating or issuing certificates.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// rcgen refused the parameters or failed to sign.
    #[error("generating the {what}")]
    Rcgen {
        /// Which certificate was being made.
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// A lifetime does not fit the calendar (`now ± duration` overflows).
    #[error("the {what} lifetime of {duration:?} is out of range")]
    Lifetime {
        /// Which lifetime.
        what: &'static str,
        /// The offending value.
        duration: std::time::Duration,
    },
    /// The CA cannot sign (its subject cannot be reproduced, or its key is unusable).
    #[error("the CA cannot issue certificates: {0}")]
    Ca(String),
    /// A name cannot go into a certificate (not ASCII).
    #[error("{name:?} cannot be used as a DNS name in a certificate")]
    Name {
        /// The name that is not a valid DNS name.
        name: String,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// The freshly issued certificate does not verify against its CA (a bug guard).
    #[error("the issued certificate does not verify against its CA")]
    SelfCheck(#[source] MaterialError),
}

/// A certificate and its private key, both PEM (the key PKCS#8).
#[derive(Clone, PartialEq, Eq)]
pub struct KeyedCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for KeyedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedCert").finish_non_exhaustive()
    }
}

fn shift(
    now: OffsetDateTime,
    by: std::time::Duration,
    what: &'static str,
    forward: bool,
) -> Result<OffsetDateTime, GenerateError> {
    let out_of_range = || GenerateError::Lifetime { what, duration: by };
    let by = time::Duration::try_from(by).map_err(|_| out_of_range())?;
    let shifted = if forward {
        now.checked_add(by)
    } else {
        now.checked_sub(by)
    };
    shifted.ok_or_else(out_of_range)
}

fn rcgen_err(what: &'static str) -> impl FnOnce(rcgen::Error) -> GenerateError {
    move |source| GenerateError::Rcgen { what, source }
}

/// Generates a self-signed CA: ECDSA P-256, path length 0 (it signs leaves only), valid from
/// `now - backdate` to `now + lifetimes.ca`.
pub fn generate_ca(lifetimes: &Lifetimes, now: OffsetDateTime) -> Result<KeyedCert, GenerateError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(rcgen_err("CA key"))?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("{CA_COMMON_NAME_PREFIX}@{}", now.unix_timestamp()),
    );
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = shift(now, lifetimes.backdate, "backdate", false)?;
    params.not_after = shift(now, lifetimes.ca, "CA", true)?;
    let cert = params
        .self_signed(&key)
        .map_err(rcgen_err("CA certificate"))?;
    Ok(KeyedCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Issues a serving certificate for `names`, signed by `ca`: ECDSA P-256, serverAuth, valid from
/// `now - backdate` to `now + lifetimes.serving`, but never past the CA's own end.
pub fn issue_serving(
    ca: &CaCert,
    names: &ServiceNames,
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> Result<KeyedCert, GenerateError> {
    let issuer = issuer_for(ca)?;

    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names.common_name());
    params.distinguished_name = dn;
    for name in names.dns_names() {
        let ia5 = name
            .clone()
            .try_into()
            .map_err(|source| GenerateError::Name {
                name: name.clone(),
                source,
            })?;
        params.subject_alt_names.push(SanType::DnsName(ia5));
    }
    params
        .subject_alt_names
        .extend(names.ip_addresses().into_iter().map(SanType::IpAddress));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = shift(now, lifetimes.backdate, "backdate", false)?;
    params.not_after = shift(now, lifetimes.serving, "serving", true)?.min(ca.cert().not_after());

    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(rcgen_err("serving key"))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(rcgen_err("serving certificate"))?;

    // The issuer name is re-encoded from the parsed CA; make sure it still chains.
    let leaf = CertInfo::from_der("issued certificate", cert.der().clone())
        .map_err(GenerateError::SelfCheck)?;
    verify::verify_chain(
        "issued certificate",
        std::slice::from_ref(&leaf),
        "its CA",
        std::slice::from_ref(ca.cert()),
        now,
    )
    .map_err(GenerateError::SelfCheck)?;

    Ok(KeyedCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// An rcgen issuer from a parsed CA: its subject (re-encoded attribute by attribute, string
/// types preserved, so the leaf's issuer name is byte-identical) and its subjectKeyIdentifier
/// (so the leaf's authorityKeyIdentifier matches it).
fn issuer_for(ca: &CaCert) -> Result<Issuer<'static, KeyPair>, GenerateError> {
    let key = KeyPair::from_pem(ca.key_pem()).map_err(|e| GenerateError::Ca(e.to_string()))?;
    let (_, x509) = X509Certificate::from_der(ca.cert().der().as_ref())
        .map_err(|e| GenerateError::Ca(e.to_string()))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(x509.subject())?;
    if let Some(ski) = ca.cert().subject_key_id() {
        params.key_identifier_method = KeyIdMethod::PreSpecified(ski.to_vec());
    }
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(Issuer::new(params, key))
}

fn distinguished_name(name: &X509Name<'_>) -> Result<DistinguishedName, GenerateError> {
    let unsupported = |why: &str| GenerateError::Ca(format!("unsupported CA subject: {why}"));
    let mut dn = DistinguishedName::new();
    for rdn in name.iter() {
        let mut attrs = rdn.iter();
        let (Some(attr), None) = (attrs.next(), attrs.next()) else {
            return Err(unsupported("a relative name with other than one attribute"));
        };
        let oid: Vec<u64> = attr
            .attr_type()
            .iter()
            .ok_or_else(|| unsupported("an attribute type OID too large"))?
            .collect();
        let ty = DnType::from_oid(&oid);
        if dn.get(&ty).is_some() {
            return Err(unsupported("a repeated attribute type"));
        }
        let value = attr.attr_value();
        let text = || {
            std::str::from_utf8(value.data)
                .map(str::to_owned)
                .map_err(|_| unsupported("an attribute that is not UTF-8"))
        };
        let invalid = |e: rcgen::Error| unsupported(&e.to_string());
        let dn_value = match value.header.tag() {
            Tag::Utf8String => DnValue::Utf8String(text()?),
            Tag::PrintableString => DnValue::PrintableString(text()?.try_into().map_err(invalid)?),
            Tag::Ia5String => DnValue::Ia5String(text()?.try_into().map_err(invalid)?),
            Tag::T61String => DnValue::TeletexString(text()?.try_into().map_err(invalid)?),
            _ => return Err(unsupported("an attribute string type rcgen cannot write")),
        };
        dn.push(ty, dn_value);
    }
    Ok(dn)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::material::parse_certificates;
    use crate::testutil::{ca, days, leaf, lifetimes, names, t0};

    #[test]
    fn ca_is_a_p256_ca_with_explicit_five_year_validity() {
        let (keyed, parsed) = ca(t0());
        let cert = parsed.cert();
        assert!(cert.is_ca());
        assert_eq!(cert.not_before(), t0() - time::Duration::minutes(5));
        assert_eq!(cert.not_after(), t0() + time::Duration::days(5 * 365));
        assert!(cert.subject().contains(CA_COMMON_NAME_PREFIX));
        assert!(keyed.key_pem.contains("BEGIN PRIVATE KEY"));
        let key = rcgen::KeyPair::from_pem(&keyed.key_pem).expect("key");
        assert_eq!(key.algorithm(), &PKCS_ECDSA_P256_SHA256);
    }

    /// A serving certificate issued at t0, parsed, and the CA that issued it.
    fn issued_at_t0() -> (CaCert, Vec<CertInfo>) {
        let (_, ca) = ca(t0());
        let keyed = leaf(&ca, t0());
        let certs = parse_certificates("leaf", keyed.cert_pem.as_bytes()).expect("parse");
        (ca, certs)
    }

    #[test]
    fn serving_certificate_names_only_the_service() {
        let (_, certs) = issued_at_t0();
        let cert = &certs[0];
        assert!(!cert.is_ca());
        assert_eq!(
            cert.dns_names(),
            [
                "trustyai-operator-webhook",
                "trustyai-operator-webhook.trustyai-operator-system",
                "trustyai-operator-webhook.trustyai-operator-system.svc",
                "trustyai-operator-webhook.trustyai-operator-system.svc.cluster.local",
            ]
        );
        assert!(cert.ip_addresses().is_empty());
    }

    #[test]
    fn serving_certificate_is_valid_for_ninety_days_under_its_ca() {
        let (ca, certs) = issued_at_t0();
        let cert = &certs[0];
        assert_eq!(cert.not_before(), t0() - time::Duration::minutes(5));
        assert_eq!(cert.not_after(), t0() + time::Duration::days(90));
        verify::verify_chain("leaf", &certs, "ca", std::slice::from_ref(ca.cert()), t0())
            .expect("chains to its CA");
    }

    #[test]
    fn local_mode_makes_the_certificate_valid_for_the_local_host() {
        let (_, ca) = ca(t0());
        let local = names().with_local(true);
        let keyed = issue_serving(&ca, &local, &lifetimes(), t0()).expect("leaf");
        let certs = parse_certificates("leaf", keyed.cert_pem.as_bytes()).expect("parse");
        assert!(certs[0].dns_names().iter().any(|n| n == "localhost"));
        assert_eq!(certs[0].ip_addresses(), [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        assert!(local.missing_from(&certs[0]).is_empty());
    }

    #[test]
    fn serving_certificate_never_outlives_its_ca() {
        let (_, ca) = ca(t0());
        let near_ca_end = ca.cert().not_after() - time::Duration::days(10);
        let keyed = leaf(&ca, near_ca_end);
        let certs = parse_certificates("leaf", keyed.cert_pem.as_bytes()).expect("parse");
        assert_eq!(certs[0].not_after(), ca.cert().not_after());
    }

    #[test]
    fn each_certificate_gets_its_own_key() {
        let (_, ca) = ca(t0());
        let a = leaf(&ca, t0());
        let b = leaf(&ca, t0());
        assert_ne!(a.key_pem, b.key_pem);
        assert_ne!(a.cert_pem, b.cert_pem);
    }

    #[test]
    fn absurd_lifetimes_are_errors_not_panics() {
        let mut l = lifetimes();
        l.ca = std::time::Duration::from_secs(u64::MAX);
        assert!(matches!(
            generate_ca(&l, t0()),
            Err(GenerateError::Lifetime { what: "CA", .. })
        ));
        let _ = days(1);
    }

    #[test]
    fn non_ascii_service_names_are_rejected() {
        let (_, ca) = ca(t0());
        let bad = ServiceNames::new("héllo", "ns");
        assert!(matches!(
            issue_serving(&ca, &bad, &lifetimes(), t0()),
            Err(GenerateError::Name { .. })
        ));
    }
}
