//! The operands' serving Secrets where no OpenShift service-ca operator issues them: what such a
//! Secret holds and when it must be re-issued.
//!
//! On OpenShift the Services' `service.beta.openshift.io/serving-cert-secret-name` annotations
//! make service-ca write them. Elsewhere the pods could never start (their Secret volumes are
//! not optional), so the operator issues them from the operand CA ([`crate::operand_ca`]):
//! `kubernetes.io/tls` Secrets for a Service's DNS names holding `tls.crt`, `tls.key`, and
//! `ca.crt` (the trust bundle), marked with [`ISSUED_BY_ANNOTATION`]. One is re-issued when less
//! than a third of its lifetime is left, when it chains to no CA of the bundle, when a name is
//! missing, or when a CA rotation moves it onto the new CA; its bundle alone is rewritten when a
//! rotation begins or ends.
//!
//! A Secret without the marker was made by someone else (service-ca, a user, cert-manager) and
//! is left alone. Which Secrets a TrustyAIService has, and their metadata, are the operator's.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use time::OffsetDateTime;

use crate::generate::{GenerateError, KeyedCert, issue_serving};
use crate::lifetimes::Lifetimes;
use crate::material::{
    CaCert, CertInfo, MaterialError, ServingCert, TlsMaterial, parse_certificates,
};
use crate::names::ServiceNames;
use crate::operand_ca::{OperandCaError, OperandTrust};
use crate::renewal::{Signer, signer_of};
use crate::secret_layout::{CA_CRT, SECRET_TYPE, TLS_CRT, TLS_KEY};
use crate::verify::verify_chain;

/// Marks the Secrets the operator issued; its value names the operator.
pub const ISSUED_BY_ANNOTATION: &str = "trustyai.opendatahub.io/issued-by";

/// Why an operand serving certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OperandServingError {
    /// rcgen could not make the serving certificate.
    #[error("generating the operand serving certificate")]
    Generate(#[source] GenerateError),
    /// The blocking task generating it panicked or was cancelled.
    #[error("the task generating the operand serving certificate failed")]
    Task(#[source] tokio::task::JoinError),
    /// The certificate just generated could not be read back (to learn when it is due).
    #[error("reading back the operand serving certificate just generated")]
    ReadBack(#[source] MaterialError),
    /// The operand CA could not be read, made or stored.
    #[error(transparent)]
    Ca(#[from] OperandCaError),
}

/// What to do with one operand Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretDecision {
    /// Good until `renew_at`.
    Keep {
        /// When it must be re-issued.
        renew_at: OffsetDateTime,
    },
    /// (Re-)issue it, for this reason.
    Issue(IssueReason),
    /// The certificate stands, but `ca.crt` is not the current trust bundle (a CA rotation
    /// began or ended): rewrite the bundle only.
    UpdateBundle {
        /// When the certificate must be re-issued.
        renew_at: OffsetDateTime,
    },
    /// Someone else manages it.
    Foreign,
}

/// Why an operand Secret is (re-)issued: the text of its `CertificateIssued` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IssueReason {
    /// There is no such Secret yet.
    #[error("absent")]
    Absent,
    /// Its certificate or key cannot be used (or does not chain to the current CA).
    #[error("{0}")]
    Unusable(MaterialError),
    /// The certificate lacks DNS names of the Service.
    #[error("names missing: {}", .0.join(", "))]
    NamesMissing(Vec<String>),
    /// Less than a third of its lifetime is left.
    #[error("due for renewal")]
    Due,
    /// It is signed by the previous CA, and the new one has been in the bundles long enough.
    #[error("moving onto the new operand CA")]
    OnPreviousCa,
}

/// Judges the Secret `secret` (`None`: absent) for `names`, against `trust` at `now`.
pub fn judge_secret(
    secret: Option<&Secret>,
    trust: &OperandTrust,
    names: &ServiceNames,
    now: OffsetDateTime,
) -> SecretDecision {
    let Some(secret) = secret else {
        return SecretDecision::Issue(IssueReason::Absent);
    };
    let ours = secret
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ISSUED_BY_ANNOTATION));
    if !ours {
        return SecretDecision::Foreign;
    }
    let serving = match trusted(secret, trust, now) {
        Ok(serving) => serving,
        Err(e) => return SecretDecision::Issue(IssueReason::Unusable(e)),
    };
    let leaf = serving.leaf();
    let missing = names.missing_from(leaf);
    if !missing.is_empty() {
        return SecretDecision::Issue(IssueReason::NamesMissing(missing));
    }
    let mut renew_at = leaf.renew_at();
    if now >= renew_at {
        return SecretDecision::Issue(IssueReason::Due);
    }
    // Outside a rotation the bundle holds the current CA alone, and the chain verified against
    // it already.
    let on_previous = trust.previous.is_some()
        && signer_of(
            serving.chain(),
            trust.current.cert(),
            trust.previous.as_ref().map(CaCert::cert),
            now,
        ) == Ok(Signer::Previous);
    if on_previous {
        if now >= trust.move_at {
            return SecretDecision::Issue(IssueReason::OnPreviousCa);
        }
        renew_at = renew_at.min(trust.move_at);
    }
    renew_at = until_bundle_shrinks(renew_at, trust);
    let held = data_field(secret, CA_CRT);
    if held != trust.bundle_pem.as_bytes() {
        // A certificate that moved onto the current CA after the previous one left keeps that
        // CA in its Secret's bundle for the overlap ([`reissued_secret`]).
        let keep_until = trust.timetable.retire_at(trust.timetable.issued_at(leaf));
        if held.starts_with(trust.bundle_pem.as_bytes()) && now < keep_until {
            return SecretDecision::Keep {
                renew_at: renew_at.min(keep_until),
            };
        }
        return SecretDecision::UpdateBundle { renew_at };
    }
    SecretDecision::Keep { renew_at }
}

/// `renew_at`, or earlier when the previous CA leaves the bundle: the Secret's `ca.crt` must
/// follow then.
fn until_bundle_shrinks(renew_at: OffsetDateTime, trust: &OperandTrust) -> OffsetDateTime {
    trust
        .retire_at
        .map_or(renew_at, |retire_at| renew_at.min(retire_at))
}

/// The certificate and key of `secret`, if they match, are valid at `now` and chain to the
/// bundle of `trust`: the checks a served [`TlsMaterial`] passes.
fn trusted(
    secret: &Secret,
    trust: &OperandTrust,
    now: OffsetDateTime,
) -> Result<ServingCert, MaterialError> {
    let serving = ServingCert::parse(
        TLS_CRT,
        data_field(secret, TLS_CRT),
        TLS_KEY,
        data_field(secret, TLS_KEY),
    )?;
    let bundle = parse_certificates(CA_CRT, trust.bundle_pem.as_bytes())?;
    TlsMaterial::from_parsed(
        TLS_CRT,
        &serving,
        Some((CA_CRT, &bundle, &trust.bundle_pem)),
        now,
    )?;
    Ok(serving)
}

/// A serving certificate and key just issued, and when to judge its Secret again.
#[derive(Debug)]
pub struct Issued {
    /// The certificate and key.
    pub keyed: KeyedCert,
    /// What [`judge_secret`] would answer for it at once: the certificate's own renewal point
    /// (which counts from its backdated start), or earlier when the bundle shrinks.
    pub renew_at: OffsetDateTime,
}

/// A serving certificate and key for `names`, issued at `now` by the CA of `trust` that signs
/// then ([`OperandTrust::signer`]). Key generation is CPU work, so it runs on the blocking pool.
pub async fn issue(
    trust: &OperandTrust,
    names: &ServiceNames,
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> Result<Issued, OperandServingError> {
    let (ca, names, lifetimes) = (trust.signer(now).clone(), names.clone(), *lifetimes);
    let keyed = tokio::task::spawn_blocking(move || issue_serving(&ca, &names, &lifetimes, now))
        .await
        .map_err(OperandServingError::Task)?
        .map_err(OperandServingError::Generate)?;
    let leaf_renew_at = parse_certificates(TLS_CRT, keyed.cert_pem.as_bytes())
        .map_err(OperandServingError::ReadBack)?
        .first()
        .map(CertInfo::renew_at)
        .ok_or_else(|| {
            OperandServingError::ReadBack(MaterialError::NoCertificate {
                what: TLS_CRT.to_owned(),
            })
        })?;
    let mut renew_at = until_bundle_shrinks(leaf_renew_at, trust);
    // Signed by the previous CA (the new one may not sign yet): it moves at `move_at`.
    if trust.previous.is_some() && now < trust.move_at {
        renew_at = renew_at.min(trust.move_at);
    }
    Ok(Issued { keyed, renew_at })
}

/// The Secret with `metadata` holding `issued` in place of `live`. Its `ca.crt` is the bundle of
/// `trust`, then any CA of `live`'s `ca.crt` that `trust` no longer holds and that `live`'s
/// certificate was issued by: when a certificate moves onto the current CA only after the
/// previous CA left the trust (its reconcile came late), a client that still sees the old
/// certificate keeps trusting it until the new one has been out for the overlap;
/// [`judge_secret`] drops that CA then.
pub fn reissued_secret(
    metadata: ObjectMeta,
    issued: KeyedCert,
    trust: &OperandTrust,
    live: Option<&Secret>,
    now: OffsetDateTime,
) -> Secret {
    let mut bundle = trust.bundle_pem.clone();
    for ca in live
        .map(|live| retired_signers(live, trust, now))
        .unwrap_or_default()
    {
        bundle.push_str(&ca);
        bundle.push('\n');
    }
    tls_secret(
        metadata,
        issued.cert_pem.into_bytes(),
        issued.key_pem.into_bytes(),
        &bundle,
    )
}

/// When [`judge_secret`] wants to look at `secret`, just written, again: its answer's
/// `renew_at` when it keeps it; `None` when it would change it at once.
pub fn looked_at_again(
    secret: &Secret,
    trust: &OperandTrust,
    names: &ServiceNames,
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    match judge_secret(Some(secret), trust, names, now) {
        SecretDecision::Keep { renew_at } => Some(renew_at),
        _ => None,
    }
}

/// The CAs (PEM) of `live`'s `ca.crt` that `trust` does not hold and that `live`'s certificate
/// chains to at `now`.
fn retired_signers(live: &Secret, trust: &OperandTrust, now: OffsetDateTime) -> Vec<String> {
    let Ok(serving) = ServingCert::parse(
        TLS_CRT,
        data_field(live, TLS_CRT),
        TLS_KEY,
        data_field(live, TLS_KEY),
    ) else {
        return Vec::new();
    };
    let held = String::from_utf8_lossy(data_field(live, CA_CRT)).into_owned();
    held.split_inclusive(PEM_END)
        .map(str::trim)
        .filter(|block| block.ends_with(PEM_END) && !trust.bundle_pem.contains(*block))
        .filter(|block| {
            parse_certificates(CA_CRT, block.as_bytes())
                .is_ok_and(|cas| verify_chain(TLS_CRT, serving.chain(), CA_CRT, &cas, now).is_ok())
        })
        .map(str::to_owned)
        .collect()
}

/// The end of a PEM certificate block.
const PEM_END: &str = "-----END CERTIFICATE-----";

/// The Secret with `metadata` holding the certificate and key of `secret` as they stand, and
/// the bundle of `trust`.
pub fn with_bundle(metadata: ObjectMeta, secret: &Secret, trust: &OperandTrust) -> Secret {
    tls_secret(
        metadata,
        data_field(secret, TLS_CRT).to_vec(),
        data_field(secret, TLS_KEY).to_vec(),
        &trust.bundle_pem,
    )
}

fn tls_secret(
    metadata: ObjectMeta,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    bundle_pem: &str,
) -> Secret {
    Secret {
        metadata,
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(BTreeMap::from([
            (TLS_CRT.to_owned(), ByteString(cert_pem)),
            (TLS_KEY.to_owned(), ByteString(key_pem)),
            (
                CA_CRT.to_owned(),
                ByteString(bundle_pem.as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    }
}

/// The bytes under `key` in `secret`; empty when absent.
fn data_field<'a>(secret: &'a Secret, key: &str) -> &'a [u8] {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.as_slice())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::generate::generate_ca;

    fn ca(now: OffsetDateTime) -> CaCert {
        let keyed = generate_ca(&lifetimes(), now).expect("ca");
        CaCert::parse(
            "ca",
            keyed.cert_pem.as_bytes(),
            "key",
            keyed.key_pem.as_bytes(),
        )
        .expect("parse")
    }

    fn lifetimes() -> Lifetimes {
        Lifetimes {
            serving: Duration::from_secs(3000),
            backdate: Duration::from_secs(0),
            overlap: Duration::from_secs(100),
            ..Lifetimes::default()
        }
    }

    fn trust(signing: &CaCert, previous: Option<&CaCert>) -> OperandTrust {
        OperandTrust::new(signing.clone(), previous.cloned(), &lifetimes())
    }

    /// Now, in whole seconds (certificates hold no more).
    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(OffsetDateTime::now_utc().unix_timestamp())
            .expect("now")
    }

    /// The metadata the operator gives the Secret, as far as judging it goes: the marker.
    fn marked() -> ObjectMeta {
        ObjectMeta {
            name: Some("tas-tls".to_owned()),
            annotations: Some(BTreeMap::from([(
                ISSUED_BY_ANNOTATION.to_owned(),
                "trustyai-operator".to_owned(),
            )])),
            ..ObjectMeta::default()
        }
    }

    async fn issued(trust: &OperandTrust, now: OffsetDateTime) -> Secret {
        let names = ServiceNames::new("tas-tls", "models");
        let issued = issue(trust, &names, &lifetimes(), now)
            .await
            .expect("issue");
        let judged = judge_secret(
            Some(&reissued_secret(
                marked(),
                issued.keyed.clone(),
                trust,
                None,
                now,
            )),
            trust,
            &names,
            now,
        );
        assert!(
            matches!(judged, SecretDecision::Keep { renew_at } if renew_at == issued.renew_at),
            "a fresh Secret is due when issue said: {judged:?} against {:?}",
            issued.renew_at
        );
        reissued_secret(marked(), issued.keyed, trust, None, now)
    }

    /// The certificate counts its life from its backdated start, so it falls due earlier than
    /// two thirds of the serving lifetime after the issue; the operator looks again then, not
    /// later.
    #[tokio::test]
    async fn an_issued_secret_is_looked_at_again_when_its_backdated_certificate_is_due() {
        let now = now();
        let backdated = Lifetimes {
            backdate: Duration::from_secs(300),
            ..lifetimes()
        };
        let authority = OperandTrust::new(ca(now), None, &backdated);
        let names = ServiceNames::new("tas-tls", "models");
        let issued = issue(&authority, &names, &backdated, now)
            .await
            .expect("issue");
        // (3000 + 300) * 2/3 after the start, 300 s before now.
        assert_eq!((issued.renew_at - now).whole_seconds(), 1900);
        let secret = reissued_secret(marked(), issued.keyed, &authority, None, now);
        assert!(matches!(
            judge_secret(Some(&secret), &authority, &names, now),
            SecretDecision::Keep { renew_at } if renew_at == issued.renew_at
        ));
    }

    #[tokio::test]
    async fn issued_secret_is_kept_until_two_thirds_of_its_life() {
        let now = now();
        let authority = trust(&ca(now), None);
        let secret = issued(&authority, now).await;
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        let names = ServiceNames::new("tas-tls", "models");
        let SecretDecision::Keep { renew_at } =
            judge_secret(Some(&secret), &authority, &names, now)
        else {
            panic!("a fresh certificate is kept");
        };
        assert_eq!((renew_at - now).whole_seconds(), 2000);
        let later = now + time::Duration::seconds(2001);
        assert!(matches!(
            judge_secret(Some(&secret), &authority, &names, later),
            SecretDecision::Issue(IssueReason::Due)
        ));
        // Another Service's names are missing.
        let other = ServiceNames::new("tas", "models");
        assert!(matches!(
            judge_secret(Some(&secret), &authority, &other, now),
            SecretDecision::Issue(IssueReason::NamesMissing(missing)) if missing.iter().any(|n| n.contains("tas.models.svc"))
        ));
        // Another CA does not trust it.
        assert!(matches!(
            judge_secret(Some(&secret), &trust(&ca(now), None), &names, now),
            SecretDecision::Issue(IssueReason::Unusable(_))
        ));
    }

    /// A rotation from an old CA to a new one, started now: the trust during it, and the
    /// Secret holding a certificate of the old CA with the rotation's bundle.
    struct Rotating {
        new: CaCert,
        names: ServiceNames,
        on_old: Secret,
        rotating: OperandTrust,
        rebundled: Secret,
    }

    async fn rotating(now: OffsetDateTime) -> Rotating {
        let (old, new) = (ca(now), ca(now));
        let names = ServiceNames::new("tas-tls", "models");
        let on_old = issued(&trust(&old, None), now).await;
        let rotating = trust(&new, Some(&old));
        let rebundled = with_bundle(marked(), &on_old, &rotating);
        Rotating {
            new,
            names,
            on_old,
            rotating,
            rebundled,
        }
    }

    /// Step 1 of a rotation: the new CA is current, the old one previous. The certificate
    /// stands; only the bundle changes, and it holds both CAs.
    #[tokio::test]
    async fn when_a_rotation_starts_only_the_bundle_changes() {
        let now = now();
        let Rotating {
            names,
            on_old,
            rotating,
            rebundled,
            ..
        } = rotating(now).await;
        let SecretDecision::UpdateBundle { renew_at } =
            judge_secret(Some(&on_old), &rotating, &names, now)
        else {
            panic!("the bundle gains the new CA first");
        };
        assert_eq!(renew_at, rotating.move_at);
        assert_eq!(
            rebundled.data.as_ref().and_then(|d| d.get(TLS_CRT)),
            on_old.data.as_ref().and_then(|d| d.get(TLS_CRT)),
            "the certificate is not touched"
        );
        assert!(matches!(
            judge_secret(Some(&rebundled), &rotating, &names, now),
            SecretDecision::Keep { renew_at } if renew_at == rotating.move_at
        ));
    }

    impl Rotating {
        /// The certificate issued on the new CA when it moves, and when the old CA retires.
        async fn moved(&self) -> (Secret, OffsetDateTime) {
            let on_new = issued(&self.rotating, self.rotating.move_at).await;
            (on_new, self.rotating.retire_at.expect("a rotation ends"))
        }
    }

    /// Step 2 of a rotation: past the overlap, the certificate moves onto the new CA.
    #[tokio::test]
    async fn past_the_overlap_the_certificate_moves_onto_the_new_ca() {
        let state = rotating(now()).await;
        let (trust_now, move_at) = (&state.rotating, state.rotating.move_at);
        assert!(matches!(
            judge_secret(Some(&state.rebundled), trust_now, &state.names, move_at),
            SecretDecision::Issue(IssueReason::OnPreviousCa)
        ));
        let (on_new, retire_at) = state.moved().await;
        assert!(matches!(
            judge_secret(Some(&on_new), trust_now, &state.names, move_at),
            SecretDecision::Keep { renew_at } if renew_at == retire_at
        ));
    }

    /// Step 3 of a rotation: the old CA leaves; the bundle shrinks, the certificate stays.
    #[tokio::test]
    async fn when_the_old_ca_leaves_only_the_bundle_changes() {
        let state = rotating(now()).await;
        let (on_new, retire_at) = state.moved().await;
        let after = trust(&state.new, None);
        assert!(matches!(
            judge_secret(Some(&on_new), &after, &state.names, retire_at),
            SecretDecision::UpdateBundle { .. }
        ));
    }

    #[tokio::test]
    async fn a_certificate_issued_by_the_previous_ca_is_looked_at_again_when_it_must_move() {
        let now = now();
        let (old, new) = (ca(now), ca(now));
        let rotating = trust(&new, Some(&old));
        let names = ServiceNames::new("tas-tls", "models");
        // Renewed during the rotation's first overlap, when only the previous CA signs.
        let issued = issue(&rotating, &names, &lifetimes(), now)
            .await
            .expect("issue");
        assert_eq!(issued.renew_at, rotating.move_at);
    }

    #[tokio::test]
    async fn a_certificate_that_moves_after_its_ca_left_keeps_that_ca_for_the_overlap() {
        let now = now();
        let (old, new) = (ca(now), ca(now));
        let names = ServiceNames::new("tas-tls", "models");
        // Its reconcile came late: the Secret still holds the old CA's certificate and the
        // rotation's bundle when the old CA has already left the trust.
        let rotating = trust(&new, Some(&old));
        let on_old = with_bundle(marked(), &issued(&trust(&old, None), now).await, &rotating);
        let after = trust(&new, None);
        assert!(matches!(
            judge_secret(Some(&on_old), &after, &names, now),
            SecretDecision::Issue(IssueReason::Unusable(_))
        ));
        let moved = issue(&after, &names, &lifetimes(), now)
            .await
            .expect("issue");
        let moved = reissued_secret(marked(), moved.keyed, &after, Some(&on_old), now);
        // A client that got the new bundle still trusts the certificate pods may serve until
        // they reload, and one that kept the old bundle trusts the new certificate.
        let bundle = data_field(&moved, CA_CRT);
        for ca in [&old, &new] {
            let pem = ca.cert_pem().trim_end();
            assert!(
                String::from_utf8_lossy(bundle).contains(pem),
                "the bundle lacks a CA"
            );
        }
        let keep_until = now + Duration::from_secs(100);
        assert!(matches!(
            judge_secret(Some(&moved), &after, &names, now),
            SecretDecision::Keep { renew_at } if renew_at == keep_until
        ));
        // Once the new certificate has been out for the overlap, the bundle follows the trust.
        assert!(matches!(
            judge_secret(Some(&moved), &after, &names, keep_until),
            SecretDecision::UpdateBundle { .. }
        ));
        // A certificate moving on time (the old CA still trusted) keeps no extra CA.
        let on_time = issue(&rotating, &names, &lifetimes(), rotating.move_at)
            .await
            .expect("issue");
        let on_time = reissued_secret(marked(), on_time.keyed, &rotating, Some(&on_old), now);
        assert_eq!(data_field(&on_time, CA_CRT), rotating.bundle_pem.as_bytes());
    }

    /// How `secret` is judged now, against a CA of its own, for the names `tas-tls.models`.
    fn judged_now(secret: Option<&Secret>) -> SecretDecision {
        let now = OffsetDateTime::now_utc();
        let authority = trust(&ca(now), None);
        let names = ServiceNames::new("tas-tls", "models");
        judge_secret(secret, &authority, &names, now)
    }

    #[test]
    fn an_absent_secret_is_issued() {
        assert!(matches!(
            judged_now(None),
            SecretDecision::Issue(IssueReason::Absent)
        ));
    }

    #[test]
    fn an_unmarked_secret_is_foreign() {
        let foreign = Secret::default();
        assert_eq!(judged_now(Some(&foreign)), SecretDecision::Foreign);
    }
}
