//! "Does this certificate chain to this bundle": path validation with rustls-webpki on ring,
//! the same code and algorithms a rustls client uses.

use std::time::Duration;

use rustls::pki_types::{CertificateDer, UnixTime};
use time::OffsetDateTime;
use webpki::{EndEntityCert, KeyUsage};

use crate::material::{CertInfo, MaterialError, parse_certificates};

/// Verifies `chain` (leaf first, then intermediates) against the CA certificates in `bundle` at
/// time `now`, for TLS server use.
///
/// CA certificates that are not valid at `now` are left out, as Go's `crypto/x509` (the
/// apiserver) rejects a chain through an expired root; webpki alone ignores anchor validity.
pub(crate) fn verify_chain(
    cert_what: &str,
    chain: &[CertInfo],
    bundle_what: &str,
    bundle: &[CertInfo],
    now: OffsetDateTime,
) -> Result<(), MaterialError> {
    let untrusted = |reason: String| MaterialError::Untrusted {
        cert: cert_what.to_owned(),
        bundle: bundle_what.to_owned(),
        reason,
    };
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Err(MaterialError::NoCertificate {
            what: cert_what.to_owned(),
        });
    };
    let current: Vec<&CertificateDer<'static>> = bundle
        .iter()
        .filter(|ca| ca.is_valid_at(now))
        .map(CertInfo::der)
        .collect();
    if current.is_empty() {
        return Err(untrusted(
            "the bundle holds no certificate that is valid now".to_owned(),
        ));
    }
    let anchors = current
        .iter()
        .map(|der| webpki::anchor_from_trusted_cert(der))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            untrusted(format!(
                "a bundle certificate is not a usable trust anchor: {e}"
            ))
        })?;
    let intermediates: Vec<CertificateDer<'_>> =
        intermediates.iter().map(|c| c.der().clone()).collect();
    let end_entity = EndEntityCert::try_from(leaf.der()).map_err(|e| {
        untrusted(format!(
            "the leaf is not usable as an end-entity certificate: {e}"
        ))
    })?;
    let seconds = u64::try_from(now.unix_timestamp()).unwrap_or(0);
    end_entity
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &intermediates,
            UnixTime::since_unix_epoch(Duration::from_secs(seconds)),
            KeyUsage::server_auth(),
            None,
            None,
        )
        .map(|_| ())
        .map_err(|e| untrusted(e.to_string()))
}

/// Checks that the PEM chain `cert_chain_pem` (leaf first) verifies against the PEM bundle
/// `ca_bundle_pem` at `now`, for TLS server use.
pub fn chains_to(
    cert_chain_pem: &[u8],
    ca_bundle_pem: &[u8],
    now: OffsetDateTime,
) -> Result<(), MaterialError> {
    let chain = parse_certificates("certificate", cert_chain_pem)?;
    let bundle = parse_certificates("CA bundle", ca_bundle_pem)?;
    verify_chain("certificate", &chain, "CA bundle", &bundle, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ca, leaf, t0};

    #[test]
    fn a_leaf_chains_to_its_own_ca_only() {
        let (ca_a, parsed_a) = ca(t0());
        let (ca_b, _) = ca(t0());
        let leaf_a = leaf(&parsed_a, t0());
        chains_to(leaf_a.cert_pem.as_bytes(), ca_a.cert_pem.as_bytes(), t0()).expect("own CA");
        let err = chains_to(leaf_a.cert_pem.as_bytes(), ca_b.cert_pem.as_bytes(), t0())
            .expect_err("other CA");
        assert!(matches!(err, MaterialError::Untrusted { .. }), "{err}");
    }

    #[test]
    fn a_bundle_of_two_cas_trusts_leaves_of_either() {
        let (ca_a, parsed_a) = ca(t0());
        let (ca_b, parsed_b) = ca(t0() + time::Duration::seconds(1));
        let bundle = format!("{}{}", ca_b.cert_pem, ca_a.cert_pem);
        for parsed in [&parsed_a, &parsed_b] {
            let l = leaf(parsed, t0() + time::Duration::seconds(2));
            chains_to(
                l.cert_pem.as_bytes(),
                bundle.as_bytes(),
                t0() + time::Duration::seconds(2),
            )
            .expect("either CA");
        }
    }

    #[test]
    fn an_expired_ca_trusts_nothing() {
        let (ca_a, parsed_a) = ca(t0());
        let l = leaf(&parsed_a, t0());
        let after_ca = parsed_a.cert().not_after() + time::Duration::seconds(1);
        let err = chains_to(l.cert_pem.as_bytes(), ca_a.cert_pem.as_bytes(), after_ca)
            .expect_err("expired CA");
        assert!(
            err.to_string().contains("no certificate that is valid now"),
            "{err}"
        );
    }

    #[test]
    fn an_expired_leaf_does_not_verify() {
        let (ca_a, parsed_a) = ca(t0());
        let l = leaf(&parsed_a, t0());
        let later = t0() + time::Duration::days(91);
        let err = chains_to(l.cert_pem.as_bytes(), ca_a.cert_pem.as_bytes(), later)
            .expect_err("expired leaf");
        assert!(matches!(err, MaterialError::Untrusted { .. }), "{err}");
    }

    #[test]
    fn a_ca_is_not_a_serving_certificate() {
        let (ca_a, _) = ca(t0());
        assert!(chains_to(ca_a.cert_pem.as_bytes(), ca_a.cert_pem.as_bytes(), t0()).is_err());
    }
}
