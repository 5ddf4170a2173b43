//! The CA bundle to publish (`caBundle` of the CRD conversion and the webhook configurations).
//!
//! During a CA rotation the Secret holds the new CA in `ca.crt` and the old one in
//! `ca-previous.crt`; the bundle carries both, so clients trust the serving certificate whether a
//! replica still serves one signed by the old CA or already one signed by the new CA. The
//! renewal decision ([`crate::renewal::plan_renewal`]) removes `ca-previous.crt` once the serving
//! certificate chains to the new CA and every replica has had time to load it; from then on
//! the bundle is the new CA alone.

use time::OffsetDateTime;

use crate::material::CertInfo;
use crate::secret_layout::StoredState;

/// A CA bundle: the certificates and their PEM concatenation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    certs: Vec<CertInfo>,
    pem: String,
}

impl Bundle {
    /// The certificates, current CA first.
    pub fn certs(&self) -> &[CertInfo] {
        &self.certs
    }

    /// The PEM text to publish.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Builds a bundle from `(certificate, PEM)` pairs, in order.
    fn from_parts<'a>(parts: impl IntoIterator<Item = (&'a CertInfo, &'a str)>) -> Self {
        let mut certs = Vec::new();
        let mut pem = String::new();
        for (cert, text) in parts {
            certs.push(cert.clone());
            pem.push_str(text.trim_end());
            pem.push('\n');
        }
        Self { certs, pem }
    }
}

/// The bundle for `state` at `now`: the current CA, plus the previous CA while a rotation is in
/// progress. `None` when the current CA is unusable (nothing trustworthy to publish). A previous
/// CA that has expired is left out: no client can chain to it any more.
pub fn ca_bundle(state: &StoredState, now: OffsetDateTime) -> Option<Bundle> {
    let ca = state.ca.as_ref().ok()?;
    if !ca.cert().is_valid_at(now) {
        return None;
    }
    let previous = state
        .previous_ca
        .as_ref()
        .and_then(|p| p.as_ref().ok())
        .filter(|p| p.cert().is_valid_at(now));
    Some(Bundle::from_parts(
        std::iter::once((ca.cert(), ca.cert_pem())).chain(previous.map(|p| (p.cert(), p.pem()))),
    ))
}
