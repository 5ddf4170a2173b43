//! Serving certificates of the operands where no OpenShift service-ca operator issues them.
//!
//! On OpenShift the Services' `service.beta.openshift.io/serving-cert-secret-name` annotations
//! make service-ca write `<cr>-tls` and `<cr>-internal`. Elsewhere the pods could never start
//! (their Secret volumes are not optional), so the operator issues them itself:
//!
//! - one operand CA (`trustyai_certs::operand_ca`), rotated with an overlap;
//! - per TrustyAIService, `kubernetes.io/tls` Secrets for the Services' DNS names (`tls.crt`,
//!   `tls.key`, and `ca.crt`: the trust bundle), owned by it, marked with
//!   [`ISSUED_BY_ANNOTATION`], re-issued when less than a third of their lifetime is left, when
//!   they chain to no CA of the bundle, when a name is missing, or when a CA rotation moves
//!   them onto the new CA; their bundle alone is rewritten when a rotation begins or ends.
//!
//! A Secret of those names without the marker was made by someone else (service-ca, a user,
//! cert-manager) and is left alone.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use trustyai_certs::secret_layout::{CA_CRT, SECRET_TYPE as TLS_TYPE, TLS_CRT, TLS_KEY};
use trustyai_certs::time::OffsetDateTime;
use trustyai_certs::{GenerateError, Lifetimes, MaterialError, ServiceNames, TlsMaterial};

use super::error::ReconcileError;
use super::resources::{Instance, labels, names};
use trustyai_certs::operand_ca::{OperandCaError, OperandTrust};

/// Marks the Secrets this operator issued (value: [`super::apply::FIELD_MANAGER`]).
pub const ISSUED_BY_ANNOTATION: &str = "trustyai.opendatahub.io/issued-by";

/// Why the operand certificates could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OperandTlsError {
    /// rcgen could not make the CA or a serving certificate.
    #[error("generating the operand {what}")]
    Generate {
        /// `CA` or `serving certificate`.
        what: &'static str,
        #[source]
        source: GenerateError,
    },
    /// The blocking task generating it panicked or was cancelled.
    #[error("the task generating the operand {what} failed")]
    Task {
        /// `CA` or `serving certificate`.
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// The operand CA could not be read, made or stored.
    #[error(transparent)]
    Ca(#[from] OperandCaError),
}

/// The two Secrets of a TrustyAIService `cr`: (Secret name, Service it serves).
pub fn serving_secrets(cr: &str) -> [(String, String); 2] {
    [
        (names::tls(cr), names::tls(cr)),
        (names::internal(cr), names::workload(cr)),
    ]
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
    /// `tls.crt` holds no certificate.
    #[error("no certificate")]
    NoCertificate,
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
    let field = |key: &str| data_field(secret, key);
    let material = match TlsMaterial::from_labelled_pem(
        (TLS_CRT, field(TLS_CRT)),
        (TLS_KEY, field(TLS_KEY)),
        Some((CA_CRT, trust.bundle_pem.as_bytes())),
        now,
    ) {
        Ok(material) => material,
        Err(e) => return SecretDecision::Issue(IssueReason::Unusable(e)),
    };
    let leaf = match trustyai_certs::material::parse_certificates(
        TLS_CRT,
        material.cert_chain_pem().as_bytes(),
    ) {
        Ok(chain) => match chain.into_iter().next() {
            Some(leaf) => leaf,
            None => return SecretDecision::Issue(IssueReason::NoCertificate),
        },
        Err(e) => return SecretDecision::Issue(IssueReason::Unusable(e)),
    };
    let missing = names.missing_from(&leaf);
    if !missing.is_empty() {
        return SecretDecision::Issue(IssueReason::NamesMissing(missing));
    }
    if now >= leaf.renew_at() {
        return SecretDecision::Issue(IssueReason::Due);
    }
    let mut renew_at = leaf.renew_at();
    let on_previous = trust.previous.is_some()
        && trustyai_certs::verify::chains_to(
            material.cert_chain_pem().as_bytes(),
            trust.current.cert_pem().as_bytes(),
            now,
        )
        .is_err();
    if on_previous {
        if now >= trust.move_at {
            return SecretDecision::Issue(IssueReason::OnPreviousCa);
        }
        renew_at = renew_at.min(trust.move_at);
    }
    if let Some(retire_at) = trust.retire_at {
        // The bundle shrinks then; look again.
        renew_at = renew_at.min(retire_at);
    }
    if field(CA_CRT) != trust.bundle_pem.as_bytes() {
        return SecretDecision::UpdateBundle { renew_at };
    }
    SecretDecision::Keep { renew_at }
}

/// The Secret `secret_name` for the Service `service` of `instance`, issued at `now` by the CA
/// of `trust` that signs then ([`OperandTrust::signer`]).
pub async fn issue(
    instance: &Instance<'_>,
    trust: &OperandTrust,
    lifetimes: &Lifetimes,
    secret_name: &str,
    service: &str,
    now: OffsetDateTime,
) -> Result<Secret, ReconcileError> {
    let names = ServiceNames::new(service, instance.namespace());
    let (ca_for_task, lifetimes) = (trust.signer(now).clone(), *lifetimes);
    let keyed = tokio::task::spawn_blocking(move || {
        trustyai_certs::issue_serving(&ca_for_task, &names, &lifetimes, now)
    })
    .await
    .map_err(|source| OperandTlsError::Task {
        what: "serving certificate",
        source,
    })?
    .map_err(|source| OperandTlsError::Generate {
        what: "serving certificate",
        source,
    })?;
    Ok(serving_secret(
        instance,
        secret_name,
        keyed.cert_pem.into_bytes(),
        keyed.key_pem.into_bytes(),
        &trust.bundle_pem,
    ))
}

/// The Secret `secret` of `instance` as it stands, with `ca.crt` set to the bundle of `trust`.
pub fn with_bundle(
    instance: &Instance<'_>,
    secret_name: &str,
    secret: &Secret,
    trust: &OperandTrust,
) -> Secret {
    serving_secret(
        instance,
        secret_name,
        data_field(secret, TLS_CRT).to_vec(),
        data_field(secret, TLS_KEY).to_vec(),
        &trust.bundle_pem,
    )
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

fn serving_secret(
    instance: &Instance<'_>,
    secret_name: &str,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    bundle_pem: &str,
) -> Secret {
    let mut metadata = instance.owned_meta(secret_name.to_owned(), labels::metadata(instance));
    metadata.annotations = Some(BTreeMap::from([(
        ISSUED_BY_ANNOTATION.to_owned(),
        super::apply::FIELD_MANAGER.to_owned(),
    )]));
    Secret {
        metadata,
        type_: Some(TLS_TYPE.to_owned()),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use trustyai_certs::CaCert;

    use super::*;
    use crate::controller::test_support::{VERSION, pvc_service};

    fn ca(now: OffsetDateTime) -> CaCert {
        let keyed = trustyai_certs::generate_ca(&lifetimes(), now).expect("ca");
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

    async fn issued(trust: &OperandTrust, now: OffsetDateTime) -> Secret {
        let service = pvc_service();
        let instance = Instance::new(&service, VERSION).expect("instance");
        issue(&instance, trust, &lifetimes(), "tas-tls", "tas-tls", now)
            .await
            .expect("issue")
    }

    #[tokio::test]
    async fn issued_secret_is_kept_until_two_thirds_of_its_life() {
        let now = now();
        let authority = trust(&ca(now), None);
        let secret = issued(&authority, now).await;
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        let service = pvc_service();
        let instance = Instance::new(&service, VERSION).expect("instance");
        assert_eq!(
            secret.metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
        let names = ServiceNames::new("tas-tls", "models");
        let SecretDecision::Keep { renew_at } =
            judge_secret(Some(&secret), &authority, &names, now)
        else {
            panic!("a fresh certificate is kept");
        };
        assert_eq!((renew_at - now).whole_seconds(), 2000);
        let later = now + trustyai_certs::time::Duration::seconds(2001);
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

    #[tokio::test]
    async fn during_a_rotation_the_certificate_stays_then_moves_and_the_bundle_follows() {
        let now = now();
        let (old, new) = (ca(now), ca(now));
        let names = ServiceNames::new("tas-tls", "models");
        let on_old = issued(&trust(&old, None), now).await;
        // Step 1: the new CA is current, the old one previous. The certificate stands; only the
        // bundle changes, and it holds both CAs.
        let rotating = trust(&new, Some(&old));
        let SecretDecision::UpdateBundle { renew_at } =
            judge_secret(Some(&on_old), &rotating, &names, now)
        else {
            panic!("the bundle gains the new CA first");
        };
        assert_eq!(renew_at, rotating.move_at);
        let service = pvc_service();
        let instance = Instance::new(&service, VERSION).expect("instance");
        let rebundled = with_bundle(&instance, "tas-tls", &on_old, &rotating);
        assert_eq!(
            rebundled.data.as_ref().and_then(|d| d.get(TLS_CRT)),
            on_old.data.as_ref().and_then(|d| d.get(TLS_CRT)),
            "the certificate is not touched"
        );
        assert!(matches!(
            judge_secret(Some(&rebundled), &rotating, &names, now),
            SecretDecision::Keep { renew_at } if renew_at == rotating.move_at
        ));
        // Step 2: past the overlap, the certificate moves onto the new CA.
        assert!(matches!(
            judge_secret(Some(&rebundled), &rotating, &names, rotating.move_at),
            SecretDecision::Issue(IssueReason::OnPreviousCa)
        ));
        let on_new = issued(&rotating, rotating.move_at).await;
        let retire_at = rotating.retire_at.expect("a rotation ends");
        assert!(matches!(
            judge_secret(Some(&on_new), &rotating, &names, rotating.move_at),
            SecretDecision::Keep { renew_at } if renew_at == retire_at
        ));
        // Step 3: the old CA leaves; the bundle shrinks, the certificate stays.
        let after = trust(&new, None);
        assert!(matches!(
            judge_secret(Some(&on_new), &after, &names, retire_at),
            SecretDecision::UpdateBundle { .. }
        ));
    }

    #[test]
    fn absent_is_issued_and_unmarked_is_foreign() {
        let now = OffsetDateTime::now_utc();
        let authority = trust(&ca(now), None);
        let names = ServiceNames::new("tas-tls", "models");
        assert!(matches!(
            judge_secret(None, &authority, &names, now),
            SecretDecision::Issue(IssueReason::Absent)
        ));
        let foreign = Secret::default();
        assert_eq!(
            judge_secret(Some(&foreign), &authority, &names, now),
            SecretDecision::Foreign
        );
    }

    #[test]
    fn secret_names() {
        assert_eq!(
            serving_secrets("tas"),
            [
                ("tas-tls".to_owned(), "tas-tls".to_owned()),
                ("tas-internal".to_owned(), "tas".to_owned())
            ]
        );
    }
}
