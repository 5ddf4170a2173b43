//! The layout of the certificate Secret and the pure translation between its data and the
//! parsed state decisions are made on.
//!
//! One Secret, type `kubernetes.io/tls`, holds everything every replica needs:
//!
//! | key | content |
//! |---|---|
//! | `tls.crt` | serving certificate (PEM) |
//! | `tls.key` | serving key (PKCS#8 PEM) |
//! | `ca.crt` | current CA certificate (PEM) |
//! | `ca.key` | current CA key (PKCS#8 PEM) |
//! | `ca-previous.crt` | previous CA certificate, only during a CA rotation |

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::bundle::{Bundle, ca_bundle};
use crate::generate::{GenerateError, KeyedCert, generate_ca, issue_serving};
use crate::lifetimes::Lifetimes;
use crate::material::{
    CaCert, CertInfo, MaterialError, ServingCert, TlsMaterial, parse_certificates,
};
use crate::names::ServiceNames;
use crate::renewal::RenewalPlan;
use crate::rotation::CaStep;

/// Serving certificate key (the `kubernetes.io/tls` convention).
pub const TLS_CRT: &str = "tls.crt";
/// Serving key key (the `kubernetes.io/tls` convention).
pub const TLS_KEY: &str = "tls.key";
/// Current CA certificate.
pub const CA_CRT: &str = "ca.crt";
/// Current CA key.
pub const CA_KEY: &str = "ca.key";
/// Previous CA certificate, present only while a CA rotation is in progress.
pub const CA_PREVIOUS_CRT: &str = "ca-previous.crt";
/// The Secret type.
pub const SECRET_TYPE: &str = "kubernetes.io/tls";

/// Secret data, key → bytes (before the API's base64).
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// The previous CA kept in the bundle during a rotation.
#[derive(Clone, Debug)]
pub struct PreviousCa {
    cert: CertInfo,
    pem: String,
}

impl PreviousCa {
    /// The certificate.
    pub fn cert(&self) -> &CertInfo {
        &self.cert
    }

    /// The certificate as PEM text.
    pub fn pem(&self) -> &str {
        &self.pem
    }
}

impl AsRef<CertInfo> for PreviousCa {
    fn as_ref(&self) -> &CertInfo {
        &self.cert
    }
}

/// The Secret's data, parsed piece by piece so each piece can be judged on its own (a broken
/// serving certificate does not cost a good CA).
#[derive(Clone, Debug)]
pub struct StoredState {
    /// `ca.crt` + `ca.key`.
    pub ca: Result<CaCert, MaterialError>,
    /// `ca-previous.crt`, if present and non-empty.
    pub previous_ca: Option<Result<PreviousCa, MaterialError>>,
    /// `tls.crt` + `tls.key`.
    pub serving: Result<ServingCert, MaterialError>,
}

impl StoredState {
    /// Parses Secret data (absent keys count as missing).
    pub fn from_data(data: &SecretData) -> Self {
        let get = |key: &str| data.get(key).map(Vec::as_slice).unwrap_or_default();
        let previous = get(CA_PREVIOUS_CRT);
        let previous_ca =
            (!previous.iter().all(u8::is_ascii_whitespace)).then(|| parse_previous(previous));
        Self {
            ca: CaCert::parse(CA_CRT, get(CA_CRT), CA_KEY, get(CA_KEY)),
            previous_ca,
            serving: ServingCert::parse(TLS_CRT, get(TLS_CRT), TLS_KEY, get(TLS_KEY)),
        }
    }

    /// Whether the Secret holds none of the material (freshly pre-created, or emptied): then
    /// generating it is initialisation, not a repair worth a warning.
    pub fn is_empty(&self) -> bool {
        let missing = |r: Result<(), &MaterialError>, key: &str| matches!(r, Err(MaterialError::Missing { what }) if what == key);
        self.previous_ca.is_none()
            && missing(self.ca.as_ref().map(|_| ()), CA_CRT)
            && missing(self.serving.as_ref().map(|_| ()), TLS_CRT)
    }

    /// The CA bundle to publish for this state ([`ca_bundle`]).
    pub fn bundle(&self, now: OffsetDateTime) -> Option<Bundle> {
        ca_bundle(self, now)
    }

    /// What to serve: the serving chain and key with the bundle, if all of it is valid at `now`
    /// and the chain verifies against the bundle.
    pub fn material(&self, now: OffsetDateTime) -> Result<TlsMaterial, MaterialError> {
        let serving = self.serving.as_ref().map_err(Clone::clone)?;
        let bundle = match (&self.ca, self.bundle(now)) {
            (Err(e), _) => return Err(e.clone()),
            (Ok(_), Some(bundle)) => bundle,
            (Ok(ca), None) => {
                // A CA that parses but is outside its validity yields no bundle.
                ca.cert().check_time(CA_CRT, now)?;
                return Err(MaterialError::Missing {
                    what: CA_CRT.to_owned(),
                });
            }
        };
        TlsMaterial::from_parsed(
            TLS_CRT,
            serving,
            Some((BUNDLE_WHAT, bundle.certs(), bundle.pem())),
            now,
        )
    }
}

const BUNDLE_WHAT: &str = "ca.crt (+ ca-previous.crt)";

fn parse_previous(pem: &[u8]) -> Result<PreviousCa, MaterialError> {
    let mut certs = parse_certificates(CA_PREVIOUS_CRT, pem)?;
    if certs.len() != 1 {
        return Err(MaterialError::TooManyCertificates {
            what: CA_PREVIOUS_CRT.to_owned(),
            count: certs.len(),
        });
    }
    let cert = certs.remove(0);
    if !cert.is_ca() {
        return Err(MaterialError::NotCa {
            what: CA_PREVIOUS_CRT.to_owned(),
        });
    }
    let pem = String::from_utf8(pem.to_vec()).map_err(|_| MaterialError::Pem {
        what: CA_PREVIOUS_CRT.to_owned(),
        reason: "not UTF-8 text".to_owned(),
    })?;
    Ok(PreviousCa { cert, pem })
}

/// Carries out `plan` on `state`: generates what the plan asks for and returns the new data.
/// Keys of `existing` this crate does not own are kept. Generates keys: run it in
/// `spawn_blocking` from async code.
pub fn apply_plan(
    existing: &SecretData,
    state: &StoredState,
    plan: &RenewalPlan,
    names: &ServiceNames,
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> Result<SecretData, GenerateError> {
    let inconsistent = |what: &str| {
        GenerateError::Ca(format!(
            "the plan keeps the {what}, but the stored one is unusable"
        ))
    };
    let (ca, previous_pem) = match plan.ca {
        CaStep::Keep => {
            let ca = state.ca.clone().map_err(|_| inconsistent("CA"))?;
            let previous = match &state.previous_ca {
                Some(Ok(prev)) => Some(prev.pem.clone()),
                _ => None,
            };
            (ca, previous)
        }
        CaStep::Retire => (state.ca.clone().map_err(|_| inconsistent("CA"))?, None),
        CaStep::Rotate => {
            let old = state.ca.as_ref().map_err(|_| inconsistent("CA"))?;
            (new_ca(lifetimes, now)?, Some(old.cert_pem().to_owned()))
        }
        CaStep::Replace => (new_ca(lifetimes, now)?, None),
    };
    let serving = if plan.issue_serving {
        issue_serving(&ca, names, lifetimes, now)?
    } else {
        let serving = state
            .serving
            .as_ref()
            .map_err(|_| inconsistent("serving certificate"))?;
        KeyedCert {
            cert_pem: serving.chain_pem().to_owned(),
            key_pem: serving.key_pem().to_owned(),
        }
    };

    let mut data = existing.clone();
    data.insert(TLS_CRT.to_owned(), serving.cert_pem.into_bytes());
    data.insert(TLS_KEY.to_owned(), serving.key_pem.into_bytes());
    data.insert(CA_CRT.to_owned(), ca.cert_pem().as_bytes().to_vec());
    data.insert(CA_KEY.to_owned(), ca.key_pem().as_bytes().to_vec());
    match previous_pem {
        Some(pem) => data.insert(CA_PREVIOUS_CRT.to_owned(), pem.into_bytes()),
        None => data.remove(CA_PREVIOUS_CRT),
    };
    Ok(data)
}

/// Data for a brand-new Secret: a new CA and a serving certificate signed by it.
pub fn generate_data(
    names: &ServiceNames,
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> Result<SecretData, GenerateError> {
    let empty = SecretData::new();
    let state = StoredState::from_data(&empty);
    apply_plan(&empty, &state, &RenewalPlan::fresh(), names, lifetimes, now)
}

fn new_ca(lifetimes: &Lifetimes, now: OffsetDateTime) -> Result<CaCert, GenerateError> {
    let generated = generate_ca(lifetimes, now)?;
    CaCert::parse(
        CA_CRT,
        generated.cert_pem.as_bytes(),
        CA_KEY,
        generated.key_pem.as_bytes(),
    )
    .map_err(GenerateError::SelfCheck)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ALL_KEYS, data, lifetimes, names, set, t0, text};

    #[test]
    fn generated_data_holds_every_key_but_a_previous_ca() {
        let d = data(t0());
        for key in ALL_KEYS {
            assert!(!text(&d, key).is_empty(), "{key}");
        }
        assert!(!d.contains_key(CA_PREVIOUS_CRT));
    }

    #[test]
    fn generated_data_is_valid_material() {
        let d = data(t0());
        let state = StoredState::from_data(&d);
        let material = state.material(t0()).expect("valid");
        assert_eq!(material.ca_bundle_pem(), Some(text(&d, CA_CRT).as_str()));
        assert_eq!(material.cert_chain_pem(), text(&d, TLS_CRT));
    }

    #[test]
    fn applying_a_plan_replaces_only_the_planned_pieces() {
        let mut d = data(t0());
        set(&mut d, "extra", "kept");
        let state = StoredState::from_data(&d);
        let plan = RenewalPlan {
            issue_serving: true,
            ..crate::renewal::plan_renewal(&state, &names(), &lifetimes(), t0())
        };
        let next = apply_plan(&d, &state, &plan, &names(), &lifetimes(), t0()).expect("apply");
        assert_eq!(text(&next, "extra"), "kept");
        assert_eq!(text(&next, CA_CRT), text(&d, CA_CRT));
        assert_eq!(text(&next, CA_KEY), text(&d, CA_KEY));
        assert_ne!(text(&next, TLS_CRT), text(&d, TLS_CRT));
    }

    #[test]
    fn material_is_refused_when_any_piece_is_broken() {
        let mut d = data(t0());
        set(&mut d, CA_CRT, "garbage");
        assert!(matches!(
            StoredState::from_data(&d).material(t0()),
            Err(MaterialError::NoCertificate { .. })
        ));
        let d = data(t0());
        assert!(matches!(
            StoredState::from_data(&d).material(t0() + time::Duration::days(6 * 365)),
            Err(MaterialError::Expired { .. })
        ));
    }

    #[test]
    fn an_expired_previous_ca_leaves_the_bundle() {
        let old = data(t0());
        let mut d = data(t0() + time::Duration::days(4 * 365));
        set(&mut d, CA_PREVIOUS_CRT, &text(&old, CA_CRT));
        let state = StoredState::from_data(&d);
        assert_eq!(
            state
                .bundle(t0() + time::Duration::days(4 * 365))
                .expect("bundle")
                .certs()
                .len(),
            2
        );
        assert_eq!(
            state
                .bundle(t0() + time::Duration::days(5 * 365 + 1))
                .expect("bundle")
                .certs()
                .len(),
            1
        );
    }
}
