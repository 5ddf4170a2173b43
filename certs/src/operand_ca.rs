//! The operand CA: the CA that signs the operands' serving certificates where no service-ca
//! operator does, kept in one Secret of the operator namespace, and rotated as
//! [`crate::rotation`] says, so that no client of a TrustyAI service ever sees a certificate its
//! trust bundle lacks.
//!
//! The Secret holds `ca.crt` and `ca.key` (the current CA) and, during a rotation only,
//! `ca-previous.crt` and `ca-previous.key`. Every operand Secret's `ca.crt` is the trust bundle:
//! the current CA, then the previous one while it is kept. In a rotation:
//!
//! 1. a new CA becomes current and the old one previous. Serving certificates stay on the old
//!    CA, and one issued now (a new service, a renewal) is still signed by the old CA: nothing
//!    is signed by the new CA before every bundle has held it for the overlap. The operand
//!    Secrets' bundles gain the new CA.
//! 2. once the new CA has been in the bundles for the overlap, serving certificates still on the
//!    old CA are re-issued by the new one ([`OperandTrust::move_at`]).
//! 3. once those have been out for the overlap too, the old CA leaves the Secret and the
//!    bundles ([`OperandTrust::retire_at`]).
//!
//! So a client holding the bundle of any moment trusts the certificate of the moment before and
//! the one after. The Secret is changed one step per write.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use time::OffsetDateTime;

use crate::api_call::ApiCallError;
use crate::generate::{GenerateError, generate_ca};
use crate::lifetimes::Lifetimes;
use crate::material::{CaCert, MaterialError};
use crate::rotation::{self, CaPlan, CaStep, Timetable};
use crate::secret_layout::{CA_CRT, CA_KEY, CA_PREVIOUS_CRT};

/// Why the operand CA could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OperandCaError {
    /// An API call on the CA Secret failed.
    #[error(transparent)]
    Kube(ApiCallError),
    /// rcgen could not make the CA.
    #[error("generating the operand CA")]
    Generate(#[source] GenerateError),
    /// The blocking task generating it panicked or was cancelled.
    #[error("the task generating the operand CA failed")]
    Task(#[source] tokio::task::JoinError),
    /// Other writers kept replacing the CA Secret while this one tried to settle it.
    #[error("the operand CA Secret {namespace}/{name} keeps changing")]
    Contended {
        /// The operator namespace.
        namespace: String,
        /// The CA Secret.
        name: String,
    },
}

/// Default name of the operand CA Secret in the operator namespace.
pub const DEFAULT_CA_SECRET: &str = "trustyai-operator-operand-ca";
/// The previous CA's key, kept during a rotation so that it signs until the new CA may.
pub const CA_PREVIOUS_KEY: &str = "ca-previous.key";

/// What the operand certificates are signed by and checked against.
#[derive(Clone, Debug)]
pub struct OperandTrust {
    /// The current CA.
    pub current: CaCert,
    /// The previous CA, during a rotation.
    pub previous: Option<CaCert>,
    /// The bundle every operand Secret's `ca.crt` holds: the current CA, then the previous one.
    pub bundle_pem: String,
    /// From when a serving certificate still on the previous CA is re-issued (step 2).
    pub move_at: OffsetDateTime,
    /// When the previous CA leaves (step 3); `None` outside a rotation.
    pub retire_at: Option<OffsetDateTime>,
    /// The current CA's timetable (when certificates issued by it have been out for the
    /// overlap).
    pub timetable: Timetable,
}

impl OperandTrust {
    /// The trust of `current`, with `previous` during a rotation (as [`plan`] reads it from
    /// the Secret).
    pub fn new(current: CaCert, previous: Option<CaCert>, lifetimes: &Lifetimes) -> Self {
        let timetable = Timetable::new(current.cert(), lifetimes);
        let move_at = timetable.move_at;
        let mut bundle_pem = current.cert_pem().trim_end().to_owned();
        bundle_pem.push('\n');
        let retire_at = previous.as_ref().map(|previous| {
            bundle_pem.push_str(previous.cert_pem().trim_end());
            bundle_pem.push('\n');
            timetable.retire_at(move_at)
        });
        Self {
            current,
            previous,
            bundle_pem,
            move_at,
            retire_at,
            timetable,
        }
    }

    /// The CA that signs a certificate issued at `now`: the previous one until the new one has
    /// been in the bundles for the overlap.
    pub fn signer(&self, now: OffsetDateTime) -> &CaCert {
        match &self.previous {
            Some(previous) if now < self.move_at => previous,
            _ => &self.current,
        }
    }

    /// When this trust changes by itself: the CA falls due (outside a rotation) or the previous
    /// CA leaves (during one).
    pub fn changes_at(&self) -> OffsetDateTime {
        self.retire_at
            .unwrap_or_else(|| self.current.cert().renew_at())
    }
}

/// `ca`'s certificate and key as Secret entries under `cert_key` and `key_key`.
fn ca_entries(ca: &CaCert, cert_key: &str, key_key: &str) -> [(String, ByteString); 2] {
    [
        (
            cert_key.to_owned(),
            ByteString(ca.cert_pem().as_bytes().to_vec()),
        ),
        (
            key_key.to_owned(),
            ByteString(ca.key_pem().as_bytes().to_vec()),
        ),
    ]
}

/// The CAs the Secret `secret` holds: the current one, and the previous one if either of its
/// entries is there.
fn stored_cas(
    secret: Option<&Secret>,
) -> (
    Result<CaCert, MaterialError>,
    Option<Result<CaCert, MaterialError>>,
) {
    let data = secret.and_then(|s| s.data.as_ref());
    let field = |key: &str| data.and_then(|d| d.get(key)).map(|b| b.0.as_slice());
    let parse = |cert_key: &str, key_key: &str| {
        let entry = |key: &str| field(key).unwrap_or_default();
        CaCert::parse(cert_key, entry(cert_key), key_key, entry(key_key))
    };
    let previous = (field(CA_PREVIOUS_CRT).is_some() || field(CA_PREVIOUS_KEY).is_some())
        .then(|| parse(CA_PREVIOUS_CRT, CA_PREVIOUS_KEY));
    (parse(CA_CRT, CA_KEY), previous)
}

/// Decides on the CA Secret `secret` (`None`: absent) at `now`: the next step, one per write
/// (decide again after writing it), and the trust of the CAs that stand (`None` when there are
/// none). Pure.
pub fn plan(
    secret: Option<&Secret>,
    lifetimes: &Lifetimes,
    now: OffsetDateTime,
) -> (CaStep, Option<OperandTrust>) {
    let (current, previous) = stored_cas(secret);
    let previous = previous.as_ref().map(Result::as_ref);
    match rotation::plan(current.as_ref(), previous, lifetimes, now) {
        CaPlan::Replace(_) => (CaStep::Replace, None),
        CaPlan::Usable(mut rotation) => {
            let trust = OperandTrust::new(
                rotation.current.clone(),
                rotation.previous.cloned(),
                lifetimes,
            );
            // The serving Secrets are not seen from here: their reconciles are requeued for
            // `move_at` (`operand_serving`), so that is when they move.
            rotation.retire_once_settled(trust.move_at, now);
            (rotation.next_step(), Some(trust))
        }
    }
}

/// The operand CA Secret, read and written by whichever reconcile needs it, and kept in memory
/// until it changes by itself.
pub struct OperandCa {
    namespace: String,
    name: String,
    field_manager: &'static str,
    lifetimes: Lifetimes,
    cached: tokio::sync::Mutex<Option<OperandTrust>>,
}

impl OperandCa {
    /// The CA kept in the Secret `name` of `namespace` (written as `field_manager`), with the
    /// CA lifetime, overlap and serving-certificate lifetime of `lifetimes` (its backdate is
    /// kept small against short lifetimes, so that a certificate is never due the moment it is
    /// made).
    pub fn new(
        namespace: String,
        name: String,
        field_manager: &'static str,
        lifetimes: Lifetimes,
    ) -> Self {
        let backdate = lifetimes
            .backdate
            .min(lifetimes.serving / 10)
            .min(lifetimes.ca / 10);
        Self {
            namespace,
            name,
            field_manager,
            lifetimes: Lifetimes {
                backdate,
                ..lifetimes
            },
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// Lifetimes of the certificates issued.
    pub fn lifetimes(&self) -> &Lifetimes {
        &self.lifetimes
    }

    /// The current trust: from memory, else from the Secret after any step it is due for.
    pub async fn get(&self, client: &kube::Client) -> Result<OperandTrust, OperandCaError> {
        let mut cached = self.cached.lock().await;
        let now = OffsetDateTime::now_utc();
        if let Some(trust) = cached.as_ref()
            && now < trust.changes_at()
        {
            return Ok(trust.clone());
        }
        let api: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        // Each round reads, decides and writes one step; a replica that loses the race to write
        // reads the winner's. A rotation takes one step at a time, so a few rounds suffice.
        for _ in 0..4 {
            let existing = api
                .get_opt(&self.name)
                .await
                .map_err(|e| self.kube_error("reading", e))?;
            let data = match plan(existing.as_ref(), &self.lifetimes, now) {
                (CaStep::Keep, Some(trust)) => {
                    *cached = Some(trust.clone());
                    return Ok(trust);
                }
                (CaStep::Rotate, Some(trust)) => {
                    tracing::info!(secret = %self.name, "rotating the operand CA: the new CA joins the bundles first");
                    let mut data = self.generated(now).await?;
                    data.extend(ca_entries(&trust.current, CA_PREVIOUS_CRT, CA_PREVIOUS_KEY));
                    data
                }
                (CaStep::Retire, Some(trust)) => {
                    tracing::info!(secret = %self.name, "the operand CA rotation is complete: the previous CA leaves the bundles");
                    BTreeMap::from(ca_entries(&trust.current, CA_CRT, CA_KEY))
                }
                (CaStep::Replace, _) | (_, None) => {
                    if existing.is_some() {
                        tracing::warn!(secret = %self.name, "the operand CA is missing or unusable; replacing it");
                    }
                    self.generated(now).await?
                }
            };
            match self.write(&api, existing, data).await {
                Ok(()) => {
                    tracing::info!(secret = %self.name, namespace = %self.namespace, "wrote the operand CA Secret");
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(self.kube_error("writing", e)),
            }
        }
        Err(OperandCaError::Contended {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        })
    }

    fn kube_error(&self, action: &'static str, source: kube::Error) -> OperandCaError {
        OperandCaError::Kube(ApiCallError::new(
            action,
            "Secret",
            format!("{}/{}", self.namespace, self.name),
            source,
        ))
    }

    /// A new CA's `ca.crt` and `ca.key`.
    async fn generated(
        &self,
        now: OffsetDateTime,
    ) -> Result<BTreeMap<String, ByteString>, OperandCaError> {
        let lifetimes = self.lifetimes;
        let generated = tokio::task::spawn_blocking(move || generate_ca(&lifetimes, now))
            .await
            .map_err(OperandCaError::Task)?
            .map_err(OperandCaError::Generate)?;
        Ok(BTreeMap::from([
            (
                CA_CRT.to_owned(),
                ByteString(generated.cert_pem.into_bytes()),
            ),
            (
                CA_KEY.to_owned(),
                ByteString(generated.key_pem.into_bytes()),
            ),
        ]))
    }

    /// Creates the Secret, or replaces the one read (its resourceVersion makes a concurrent
    /// write a 409).
    async fn write(
        &self,
        api: &Api<Secret>,
        existing: Option<Secret>,
        data: BTreeMap<String, ByteString>,
    ) -> Result<(), kube::Error> {
        let params = PostParams {
            field_manager: Some(self.field_manager.to_owned()),
            ..PostParams::default()
        };
        match existing {
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
                api.create(&params, &secret).await.map(drop)
            }
            Some(mut secret) => {
                secret.data = Some(data);
                api.replace(&self.name, &params, &secret).await.map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn lifetimes() -> Lifetimes {
        Lifetimes {
            ca: Duration::from_secs(3000),
            serving: Duration::from_secs(600),
            backdate: Duration::from_secs(0),
            overlap: Duration::from_secs(100),
        }
    }

    fn secret(entries: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    fn at(now: OffsetDateTime, seconds: i64) -> OffsetDateTime {
        now + time::Duration::seconds(seconds)
    }

    #[test]
    fn a_missing_or_broken_ca_is_replaced() {
        let now = OffsetDateTime::now_utc();
        assert!(matches!(
            plan(None, &lifetimes(), now),
            (CaStep::Replace, None)
        ));
        let garbage = secret(&[(CA_CRT, "x"), (CA_KEY, "y")]);
        assert!(matches!(
            plan(Some(&garbage), &lifetimes(), now),
            (CaStep::Replace, None)
        ));
    }

    #[test]
    fn a_rotation_keeps_the_old_ca_in_the_bundle_until_it_is_retired() {
        // Certificates hold whole seconds.
        let now = OffsetDateTime::from_unix_timestamp(OffsetDateTime::now_utc().unix_timestamp())
            .expect("now");
        let old = generate_ca(&lifetimes(), now).expect("old CA");
        let only_old = secret(&[(CA_CRT, &old.cert_pem), (CA_KEY, &old.key_pem)]);
        let (CaStep::Keep, Some(trust)) = plan(Some(&only_old), &lifetimes(), now) else {
            panic!("a fresh CA is kept");
        };
        assert_eq!(trust.changes_at(), at(now, 2000), "due at two thirds");
        assert!(trust.previous.is_none() && trust.retire_at.is_none());
        // Step 1 at two thirds: the old CA becomes the previous one.
        let due = at(now, 2000);
        let (CaStep::Rotate, Some(rotated)) = plan(Some(&only_old), &lifetimes(), due) else {
            panic!("due at two thirds");
        };
        assert_eq!(
            rotated.current.cert_pem(),
            old.cert_pem,
            "becomes the previous CA"
        );
        let new = generate_ca(&lifetimes(), due).expect("new CA");
        let rotating = secret(&[
            (CA_CRT, &new.cert_pem),
            (CA_KEY, &new.key_pem),
            (CA_PREVIOUS_CRT, &old.cert_pem),
            (CA_PREVIOUS_KEY, &old.key_pem),
        ]);
        let (CaStep::Keep, Some(trust)) = plan(Some(&rotating), &lifetimes(), due) else {
            panic!("a rotation in progress is kept");
        };
        // Nothing is signed by the new CA before the overlap is over.
        assert_eq!(trust.signer(due).cert_pem(), old.cert_pem);
        assert_eq!(trust.signer(at(due, 100)).cert_pem(), new.cert_pem);
        assert!(trust.bundle_pem.contains(new.cert_pem.trim_end()));
        assert!(trust.bundle_pem.contains(old.cert_pem.trim_end()));
        // Steps 2 and 3, each an overlap apart.
        assert_eq!(trust.move_at, at(due, 100));
        assert_eq!(trust.retire_at, Some(at(due, 200)));
        assert!(matches!(
            plan(Some(&rotating), &lifetimes(), at(due, 199)),
            (CaStep::Keep, Some(_))
        ));
        let (CaStep::Retire, Some(retired)) = plan(Some(&rotating), &lifetimes(), at(due, 200))
        else {
            panic!("retired after two overlaps");
        };
        assert_eq!(retired.current.cert_pem(), new.cert_pem, "stays");
    }

    #[test]
    fn an_unusable_previous_ca_is_retired_at_once() {
        let now = OffsetDateTime::now_utc();
        let ca = generate_ca(&lifetimes(), now).expect("CA");
        let broken = secret(&[
            (CA_CRT, &ca.cert_pem),
            (CA_KEY, &ca.key_pem),
            (CA_PREVIOUS_CRT, "garbage"),
            (CA_PREVIOUS_KEY, "garbage"),
        ]);
        assert!(matches!(
            plan(Some(&broken), &lifetimes(), now),
            (CaStep::Retire, Some(_))
        ));
    }
}
