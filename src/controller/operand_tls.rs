//! Serving certificates of the operands where no OpenShift service-ca operator issues them.
//!
//! On OpenShift the Services' `service.beta.openshift.io/serving-cert-secret-name` annotations
//! make service-ca write `<cr>-tls` and `<cr>-internal`. Elsewhere the pods could never start
//! (their Secret volumes are not optional), so the operator issues them itself:
//!
//! - one operand CA, kept in a Secret of the operator namespace (`ca.crt`, `ca.key`), created
//!   when absent and replaced when unusable or past two thirds of its life;
//! - per TrustyAIService, `kubernetes.io/tls` Secrets for the Services' DNS names (`tls.crt`,
//!   `tls.key`, `ca.crt`), owned by it, marked with [`ISSUED_BY_ANNOTATION`], re-issued when
//!   less than a third of their lifetime is left, when they do not chain to the current CA, or
//!   when a name is missing.
//!
//! A Secret of those names without the marker was made by someone else (service-ca, a user,
//! cert-manager) and is left alone.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use trustyai_certs::secret_layout::{CA_CRT, CA_KEY, SECRET_TYPE as TLS_TYPE, TLS_CRT, TLS_KEY};
use trustyai_certs::time::OffsetDateTime;
use trustyai_certs::{CaCert, GenerateError, Lifetimes, MaterialError, ServiceNames, TlsMaterial};

use super::error::ReconcileError;
use super::resources::{Instance, labels, names};

/// Marks the Secrets this operator issued (value: [`super::apply::FIELD_MANAGER`]).
pub const ISSUED_BY_ANNOTATION: &str = "trustyai.opendatahub.io/issued-by";
/// Default name of the operand CA Secret in the operator namespace.
pub const DEFAULT_CA_SECRET: &str = "trustyai-operator-operand-ca";

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
    /// Other writers kept replacing the CA Secret while this one tried to settle it.
    #[error("the operand CA Secret {namespace}/{name} keeps changing")]
    CaSecretContended {
        /// The operator namespace.
        namespace: String,
        /// The CA Secret.
        name: String,
    },
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
pub enum Decision {
    /// Good until `renew_at`.
    Keep {
        /// When it must be re-issued.
        renew_at: OffsetDateTime,
    },
    /// (Re-)issue it, for this reason.
    Issue(IssueReason),
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
}

/// Judges the Secret `secret` (`None`: absent) for `names`, against the CA `ca` at `now`.
pub fn decide(
    secret: Option<&Secret>,
    ca: &CaCert,
    names: &ServiceNames,
    now: OffsetDateTime,
) -> Decision {
    let Some(secret) = secret else {
        return Decision::Issue(IssueReason::Absent);
    };
    let ours = secret
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ISSUED_BY_ANNOTATION));
    if !ours {
        return Decision::Foreign;
    }
    let field = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.as_slice())
            .unwrap_or_default()
    };
    let material = match TlsMaterial::from_labelled_pem(
        (TLS_CRT, field(TLS_CRT)),
        (TLS_KEY, field(TLS_KEY)),
        Some((CA_CRT, ca.cert_pem().as_bytes())),
        now,
    ) {
        Ok(material) => material,
        Err(e) => return Decision::Issue(IssueReason::Unusable(e)),
    };
    let leaf = match trustyai_certs::material::parse_certificates(
        TLS_CRT,
        material.cert_chain_pem().as_bytes(),
    ) {
        Ok(chain) => match chain.into_iter().next() {
            Some(leaf) => leaf,
            None => return Decision::Issue(IssueReason::NoCertificate),
        },
        Err(e) => return Decision::Issue(IssueReason::Unusable(e)),
    };
    let missing = names.missing_from(&leaf);
    if !missing.is_empty() {
        return Decision::Issue(IssueReason::NamesMissing(missing));
    }
    if now >= leaf.renew_at() {
        return Decision::Issue(IssueReason::Due);
    }
    Decision::Keep {
        renew_at: leaf.renew_at(),
    }
}

/// Whether the CA in `secret` is usable at `now` and not yet due for replacement.
pub fn parse_ca(secret: &Secret, now: OffsetDateTime) -> Option<CaCert> {
    let data = secret.data.as_ref()?;
    let ca = CaCert::parse(CA_CRT, &data.get(CA_CRT)?.0, CA_KEY, &data.get(CA_KEY)?.0).ok()?;
    (ca.cert().is_valid_at(now) && now < ca.cert().renew_at()).then_some(ca)
}

/// The operand CA, read from (or written to) its Secret and kept in memory.
pub struct OperandCa {
    namespace: String,
    name: String,
    lifetimes: Lifetimes,
    cached: tokio::sync::Mutex<Option<CaCert>>,
}

impl OperandCa {
    /// The CA kept in the Secret `name` of `namespace`; serving certificates live `serving`.
    pub fn new(namespace: String, name: String, serving: Duration) -> Self {
        let defaults = Lifetimes::default();
        Self {
            namespace,
            name,
            lifetimes: Lifetimes {
                serving,
                backdate: defaults.backdate.min(serving / 10),
                ..defaults
            },
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// Lifetimes of the certificates issued.
    pub fn lifetimes(&self) -> &Lifetimes {
        &self.lifetimes
    }

    /// The current CA: from memory, else from the Secret, else a new one.
    pub async fn get(&self, client: &kube::Client) -> Result<CaCert, ReconcileError> {
        let mut cached = self.cached.lock().await;
        let now = OffsetDateTime::now_utc();
        if let Some(ca) = cached.as_ref()
            && ca.cert().is_valid_at(now)
            && now < ca.cert().renew_at()
        {
            return Ok(ca.clone());
        }
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        // Two rounds: a replica that loses the race to create or replace reads the winner's.
        for _ in 0..3 {
            let existing = api
                .get_opt(&self.name)
                .await
                .map_err(ReconcileError::kube("reading", "Secret", &self.name))?;
            if let Some(ca) = existing.as_ref().and_then(|s| parse_ca(s, now)) {
                *cached = Some(ca.clone());
                return Ok(ca);
            }
            let generated = generate(&self.lifetimes, now).await?;
            let data = BTreeMap::from([
                (
                    CA_CRT.to_owned(),
                    ByteString(generated.cert_pem.into_bytes()),
                ),
                (
                    CA_KEY.to_owned(),
                    ByteString(generated.key_pem.into_bytes()),
                ),
            ]);
            let params = PostParams {
                field_manager: Some(super::apply::FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            };
            let result = match existing {
                None => {
                    let secret = Secret {
                        metadata: ObjectMeta {
                            name: Some(self.name.clone()),
                            namespace: Some(self.namespace.clone()),
                            ..ObjectMeta::default()
                        },
                        type_: Some("Opaque".to_owned()),
                        data: Some(data),
                        ..Secret::default()
                    };
                    api.create(&params, &secret).await
                }
                Some(mut secret) => {
                    tracing::warn!(secret = %self.name, "the operand CA is unusable or due; replacing it");
                    secret.data = Some(data);
                    api.replace(&self.name, &params, &secret).await
                }
            };
            match result {
                Ok(_) => {
                    tracing::info!(secret = %self.name, namespace = %self.namespace, "wrote a new operand CA");
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(ReconcileError::kube("writing", "Secret", &self.name)(e)),
            }
        }
        Err(ReconcileError::Certificates(
            OperandTlsError::CaSecretContended {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
            },
        ))
    }
}

async fn generate(
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> Result<trustyai_certs::KeyedCert, ReconcileError> {
    let lifetimes = *lifetimes;
    const WHAT: &str = "CA";
    tokio::task::spawn_blocking(move || trustyai_certs::generate_ca(&lifetimes, now))
        .await
        .map_err(|source| OperandTlsError::Task { what: WHAT, source })?
        .map_err(|source| OperandTlsError::Generate { what: WHAT, source }.into())
}

/// The Secret `secret_name` for the Service `service` of `instance`, issued by `ca` at `now`.
pub async fn issue(
    instance: &Instance<'_>,
    ca: &CaCert,
    lifetimes: &Lifetimes,
    secret_name: &str,
    service: &str,
    now: OffsetDateTime,
) -> Result<Secret, ReconcileError> {
    let names = ServiceNames::new(service, instance.namespace());
    let (ca_for_task, lifetimes) = (ca.clone(), *lifetimes);
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
    let mut metadata = instance.owned_meta(secret_name.to_owned(), labels::metadata(instance));
    metadata.annotations = Some(BTreeMap::from([(
        ISSUED_BY_ANNOTATION.to_owned(),
        super::apply::FIELD_MANAGER.to_owned(),
    )]));
    Ok(Secret {
        metadata,
        type_: Some(TLS_TYPE.to_owned()),
        data: Some(BTreeMap::from([
            (TLS_CRT.to_owned(), ByteString(keyed.cert_pem.into_bytes())),
            (TLS_KEY.to_owned(), ByteString(keyed.key_pem.into_bytes())),
            (
                CA_CRT.to_owned(),
                ByteString(ca.cert_pem().as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{VERSION, pvc_service};

    fn ca(now: OffsetDateTime) -> CaCert {
        let keyed = trustyai_certs::generate_ca(&Lifetimes::default(), now).expect("ca");
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
            ..Lifetimes::default()
        }
    }

    #[tokio::test]
    async fn issued_secret_is_kept_until_two_thirds_of_its_life() {
        // Certificates hold whole seconds.
        let now = OffsetDateTime::from_unix_timestamp(OffsetDateTime::now_utc().unix_timestamp())
            .expect("now");
        let authority = ca(now);
        let service = pvc_service();
        let instance = Instance::new(&service, VERSION).expect("instance");
        let secret = issue(
            &instance,
            &authority,
            &lifetimes(),
            "tas-tls",
            "tas-tls",
            now,
        )
        .await
        .expect("issue");
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(
            secret.metadata.owner_references,
            Some(vec![instance.owner_reference()])
        );
        let names = ServiceNames::new("tas-tls", "models");
        let Decision::Keep { renew_at } = decide(Some(&secret), &authority, &names, now) else {
            panic!("a fresh certificate is kept");
        };
        assert_eq!((renew_at - now).whole_seconds(), 2000);
        let later = now + trustyai_certs::time::Duration::seconds(2001);
        assert!(matches!(
            decide(Some(&secret), &authority, &names, later),
            Decision::Issue(_)
        ));
        // Another Service's names are missing.
        let other = ServiceNames::new("tas", "models");
        assert!(matches!(
            decide(Some(&secret), &authority, &other, now),
            Decision::Issue(IssueReason::NamesMissing(missing)) if missing.iter().any(|n| n.contains("tas.models.svc"))
        ));
        // Another CA does not trust it.
        assert!(matches!(
            decide(Some(&secret), &ca(now), &names, now),
            Decision::Issue(_)
        ));
    }

    #[test]
    fn absent_is_issued_and_unmarked_is_foreign() {
        let now = OffsetDateTime::now_utc();
        let ca = ca(now);
        let names = ServiceNames::new("tas-tls", "models");
        assert!(matches!(decide(None, &ca, &names, now), Decision::Issue(_)));
        let foreign = Secret::default();
        assert_eq!(decide(Some(&foreign), &ca, &names, now), Decision::Foreign);
    }

    #[test]
    fn ca_secret_parsing() {
        let now = OffsetDateTime::now_utc();
        let keyed = trustyai_certs::generate_ca(&Lifetimes::default(), now).expect("ca");
        let secret = Secret {
            data: Some(BTreeMap::from([
                (
                    CA_CRT.to_owned(),
                    ByteString(keyed.cert_pem.clone().into_bytes()),
                ),
                (
                    CA_KEY.to_owned(),
                    ByteString(keyed.key_pem.clone().into_bytes()),
                ),
            ])),
            ..Secret::default()
        };
        assert!(parse_ca(&secret, now).is_some());
        let five_years = trustyai_certs::time::Duration::days(4 * 365);
        assert!(
            parse_ca(&secret, now + five_years).is_none(),
            "past two thirds"
        );
        assert!(parse_ca(&Secret::default(), now).is_none());
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
