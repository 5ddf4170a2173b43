//! The certificate Secret in the cluster: get-or-create, repair, renewal (one writer at a time
//! by optimistic concurrency) and the watch that feeds the webhook server.
//!
//! Every replica runs the same code against the same Secret. Creation is "POST; on 409 read
//! what the winner wrote", and every change is a `replace` carrying the resourceVersion that was
//! read, so when two replicas decide at once one write wins and the other re-reads, finds the
//! winner's result good, and does nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::events::Recorder;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use time::OffsetDateTime;
use tokio::sync::watch;
use tracing::{Instrument, info, info_span, warn};

use crate::api_call::ApiCallError;
use crate::events::{CertWarning, publish_warnings};
use crate::generate::GenerateError;
use crate::lifetimes::Lifetimes;
use crate::material::{MaterialError, TlsMaterial};
use crate::names::ServiceNames;
use crate::renewal::{RenewalPlan, plan_renewal};
use crate::secret_layout::{SECRET_TYPE, SecretData, StoredState, apply_plan, generate_data};

/// Field manager of every write to the certificate Secret.
pub const SECRET_FIELD_MANAGER: &str = "trustyai-operator-certs";

/// How often to re-read and reconsider the Secret even when nothing is due: bounds the effect of
/// a missed watch event, and of monotonic timers drifting from the wall clock (suspend, VM
/// migration), on decisions that are made against the wall clock.
const RESYNC: Duration = Duration::from_secs(5 * 60);
/// Coalesces a burst of watch events (our own write comes back as one) into one reconcile.
const DEBOUNCE: Duration = Duration::from_secs(1);
/// First retry after a failed reconcile; doubles up to [`RESYNC`].
const RETRY: Duration = Duration::from_secs(5);
/// Rounds of read-decide-write before giving up on a Secret that keeps changing.
const MAX_ROUNDS: usize = 5;

/// Failures managing the Secret.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An API call failed.
    #[error(transparent)]
    Kube(ApiCallError),
    /// Generating certificates failed.
    #[error("generating certificates for Secret {namespace}/{name}")]
    Generate {
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
        /// The generation error.
        #[source]
        source: GenerateError,
    },
    /// The blocking key-generation task died.
    #[error("the certificate generation task failed")]
    Join(#[from] tokio::task::JoinError),
    /// The Secret settled on content that still cannot be served (should not happen: the
    /// renewal decision fixes whatever would fail here).
    #[error("Secret {namespace}/{name} holds unusable TLS material")]
    Material {
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
        /// Why it is unusable.
        #[source]
        source: MaterialError,
    },
    /// The Secret kept changing under us (or kept needing changes) for five rounds.
    #[error("Secret {namespace}/{name} did not settle after {MAX_ROUNDS} read-decide-write rounds")]
    Unsettled {
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
    },
    /// The watch stream ended (it should not: the watcher retries forever).
    #[error("the watch on Secret {namespace}/{name} ended")]
    WatchEnded {
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
    },
}

/// The outcome of [`ensure_secret`].
#[derive(Debug)]
pub struct Ensured {
    /// What to serve.
    pub material: TlsMaterial,
    /// Broken content found and regenerated; emit these as Warning events on [`Ensured::secret`]
    /// ([`publish_warnings`]).
    pub warnings: Vec<CertWarning>,
    /// The Secret as last read or written.
    pub secret: Secret,
    /// When the material next needs attention (renewal or a rotation step).
    pub recheck_at: Option<OffsetDateTime>,
}

impl Ensured {
    /// What [`maintain_secret`] needs to know about this result so as not to judge the same
    /// Secret again at once.
    pub fn judged(&self) -> Judged {
        Judged {
            resource_version: self.secret.metadata.resource_version.clone(),
            recheck_at: self.recheck_at,
        }
    }
}

/// The certificate Secret to keep good: where it is, and what it must hold.
#[derive(Debug, Clone)]
pub struct CertificateSecret {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The names the serving certificate must cover.
    pub names: ServiceNames,
    /// How long the CA and the serving certificate live, and their overlap.
    pub lifetimes: Lifetimes,
    /// Whether its watch streams its first list (the caller knows whether the API server
    /// serves streaming lists); else a list request comes first.
    pub streaming_lists: bool,
}

/// A version of the certificate Secret already judged good, and when it next needs attention.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    /// The Secret's resourceVersion when it was judged.
    pub resource_version: Option<String>,
    /// When the material next needs attention (renewal or a rotation step).
    pub recheck_at: Option<OffsetDateTime>,
}

struct Target<'a> {
    api: Api<Secret>,
    namespace: &'a str,
    name: &'a str,
}

impl Target<'_> {
    fn kube_err(&self, action: &'static str) -> impl FnOnce(kube::Error) -> StoreError + '_ {
        move |source| {
            StoreError::Kube(ApiCallError::new(
                action,
                "Secret",
                format!("{}/{}", self.namespace, self.name),
                source,
            ))
        }
    }

    fn generate_err(&self, source: GenerateError) -> StoreError {
        StoreError::Generate {
            namespace: self.namespace.to_owned(),
            name: self.name.to_owned(),
            source,
        }
    }
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(SECRET_FIELD_MANAGER.to_owned()),
    }
}

fn is_api_error(err: &kube::Error, test: impl Fn(&kube::core::Status) -> bool) -> bool {
    matches!(err, kube::Error::Api(status) if test(status))
}

/// The Secret's data as raw bytes.
pub fn secret_data(secret: &Secret) -> SecretData {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

fn to_api_data(data: SecretData) -> BTreeMap<String, ByteString> {
    data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()
}

/// Gets the certificate Secret, creating it if absent, and makes it good: garbage or a key that
/// does not match its certificate is regenerated (keeping a valid CA), a due serving certificate
/// is renewed, a due CA is rotated step by step. Returns the material to serve and the warnings
/// to emit.
///
/// Creation is create-if-not-exists (POST; on 409 AlreadyExists read the winner's Secret), so
/// replicas starting together end up with one CA. Changes are `replace`s with the
/// resourceVersion read; on 409 Conflict the Secret is re-read and judged again.
#[tracing::instrument(skip(client, names, lifetimes), fields(kind = "Secret", namespace = %namespace, name = %name))]
pub async fn ensure_secret(
    client: &Client,
    namespace: &str,
    name: &str,
    names: &ServiceNames,
    lifetimes: &Lifetimes,
) -> Result<Ensured, StoreError> {
    let target = Target {
        api: Api::namespaced(client.clone(), namespace),
        namespace,
        name,
    };
    let mut warnings = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let existing = target
            .api
            .get_opt(name)
            .await
            .map_err(target.kube_err("reading"))?;
        let Some(existing) = existing else {
            if let Some(created) = create(&target, names, lifetimes).await? {
                // Judged like any Secret read, so the caller knows when it is next due.
                let state = StoredState::from_data(&secret_data(&created));
                let plan = plan_renewal(&state, names, lifetimes, OffsetDateTime::now_utc());
                return finish(&target, created, warnings, plan.recheck_at);
            }
            continue;
        };
        let now = OffsetDateTime::now_utc();
        let data = secret_data(&existing);
        let state = StoredState::from_data(&data);
        let plan = plan_renewal(&state, names, lifetimes, now);
        if plan.is_noop() {
            return finish(&target, existing, warnings, plan.recheck_at);
        }
        log_plan(&plan);
        let new_data = {
            let (plan, names, lifetimes) = (plan.clone(), names.clone(), *lifetimes);
            tokio::task::spawn_blocking(move || {
                apply_plan(&data, &state, &plan, &names, &lifetimes, now)
            })
            .await?
            .map_err(|e| target.generate_err(e))?
        };
        let mut updated = existing;
        updated.data = Some(to_api_data(new_data));
        // `type` is immutable: keep whatever a pre-created Secret has.
        updated.type_.get_or_insert_with(|| SECRET_TYPE.to_owned());
        match target.api.replace(name, &post_params(), &updated).await {
            Ok(_) => {
                warnings.extend(plan.reasons.iter().filter_map(CertWarning::from_reason));
                info!("wrote renewed certificate material");
                // Judge what was written on the next round, as any other reader would.
            }
            Err(e) if is_api_error(&e, kube::core::Status::is_conflict) => {
                info!("another replica changed the Secret first; re-reading it");
            }
            Err(e) if is_api_error(&e, kube::core::Status::is_not_found) => {
                info!("the Secret was deleted meanwhile; creating it again");
            }
            Err(e) => return Err(target.kube_err("replacing")(e)),
        }
    }
    Err(StoreError::Unsettled {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// POSTs a new Secret; `None` when another replica created it first.
async fn create(
    target: &Target<'_>,
    names: &ServiceNames,
    lifetimes: &Lifetimes,
) -> Result<Option<Secret>, StoreError> {
    let now = OffsetDateTime::now_utc();
    let data = {
        let (names, lifetimes) = (names.clone(), *lifetimes);
        tokio::task::spawn_blocking(move || generate_data(&names, &lifetimes, now))
            .await?
            .map_err(|e| target.generate_err(e))?
    };
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(target.name.to_owned()),
            namespace: Some(target.namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    "trustyai-operator".to_owned(),
                ),
                (
                    "app.kubernetes.io/component".to_owned(),
                    "webhook-certificate".to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(to_api_data(data)),
        ..Secret::default()
    };
    match target.api.create(&post_params(), &secret).await {
        Ok(created) => {
            info!("created the webhook certificate Secret with a new CA");
            Ok(Some(created))
        }
        Err(e) if is_api_error(&e, |s| s.is_already_exists() || s.code == 409) => {
            info!("another replica created the Secret first; using theirs");
            Ok(None)
        }
        Err(e) => Err(target.kube_err("creating")(e)),
    }
}

fn finish(
    target: &Target<'_>,
    secret: Secret,
    warnings: Vec<CertWarning>,
    recheck_at: Option<OffsetDateTime>,
) -> Result<Ensured, StoreError> {
    let material = StoredState::from_data(&secret_data(&secret))
        .material(OffsetDateTime::now_utc())
        .map_err(|source| StoreError::Material {
            namespace: target.namespace.to_owned(),
            name: target.name.to_owned(),
            source,
        })?;
    Ok(Ensured {
        material,
        warnings,
        secret,
        recheck_at,
    })
}

fn log_plan(plan: &RenewalPlan) {
    for reason in &plan.reasons {
        if reason.is_warning() {
            warn!(%reason, "webhook certificate material is broken; regenerating");
        } else {
            info!(%reason, "webhook certificate maintenance");
        }
    }
}

/// Sends `material` if it differs from what is being served.
fn offer(tx: &watch::Sender<TlsMaterial>, material: TlsMaterial) -> bool {
    tx.send_if_modified(|current| {
        if *current == material {
            false
        } else {
            *current = material;
            true
        }
    })
}

/// Serves from the Secret `secret` if it holds valid material; anything invalid is logged and
/// never replaces what is being served.
fn push_if_valid(secret: &Secret, tx: &watch::Sender<TlsMaterial>) {
    match StoredState::from_data(&secret_data(secret)).material(OffsetDateTime::now_utc()) {
        Ok(material) => {
            if offer(tx, material) {
                info!("serving new TLS material from the Secret");
            }
        }
        Err(error) => {
            warn!(
                error = &error as &dyn std::error::Error,
                "the Secret holds unusable TLS material; still serving the previous material"
            )
        }
    }
}

/// Keeps the Secret good and the webhook server fed, for as long as anyone receives from `tx`:
///
/// - watches the one Secret (field selector `metadata.name`) and sends every valid new content
///   to `tx`;
/// - re-runs [`ensure_secret`] on every change, when the next renewal or rotation step is due,
///   and at least every five minutes, so deletion, garbage and expiry are repaired;
/// - emits Warning events through `recorder` (if given) for broken content it regenerated.
///
/// Runs on every replica; writes are serialised by resourceVersion (see [`ensure_secret`]).
pub async fn maintain_secret(
    client: Client,
    secret: CertificateSecret,
    tx: watch::Sender<TlsMaterial>,
    recorder: Option<Recorder>,
    judged: Option<Judged>,
) -> Result<(), StoreError> {
    let CertificateSecret {
        namespace,
        name,
        names,
        lifetimes,
        streaming_lists,
    } = secret;
    let span = info_span!("maintain_secret", kind = "Secret", %namespace, %name);
    async move {
        let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        let mut config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        if streaming_lists {
            config = config.streaming_lists();
        }
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        // What the caller already judged is not judged again until it changes or is due.
        let (mut judged_version, mut next) = match judged {
            Some(judged) => (
                judged.resource_version,
                tokio::time::Instant::now() + until(judged.recheck_at),
            ),
            None => (None, tokio::time::Instant::now()),
        };
        let mut retry = RETRY;
        loop {
            tokio::select! {
                () = tx.closed() => return Ok(()),
                event = events.next() => match event {
                    None => return Err(StoreError::WatchEnded { namespace, name }),
                    Some(Err(error)) => warn!(error = &error as &dyn std::error::Error, "watching the certificate Secret failed; retrying"),
                    Some(Ok(Event::Apply(secret) | Event::InitApply(secret))) => {
                        push_if_valid(&secret, &tx);
                        if judged_version.is_none() || secret.metadata.resource_version != judged_version {
                            next = next.min(tokio::time::Instant::now() + DEBOUNCE);
                        }
                    }
                    Some(Ok(Event::Delete(_))) => {
                        judged_version = None;
                        warn!("the certificate Secret was deleted; recreating it");
                        next = next.min(tokio::time::Instant::now() + DEBOUNCE);
                    }
                    Some(Ok(Event::Init | Event::InitDone)) => {}
                },
                () = tokio::time::sleep_until(next) => {
                    match ensure_secret(&client, &namespace, &name, &names, &lifetimes).await {
                        Ok(ensured) => {
                            retry = RETRY;
                            if offer(&tx, ensured.material) {
                                info!("serving new TLS material from the Secret");
                            }
                            if let Some(recorder) = &recorder && !ensured.warnings.is_empty() {
                                let regarding = ensured.secret.object_ref(&());
                                publish_warnings(recorder, &regarding, &ensured.warnings).await;
                            }
                            next = tokio::time::Instant::now() + until(ensured.recheck_at);
                            judged_version = ensured.secret.metadata.resource_version;
                        }
                        Err(error) => {
                            warn!(error = &error as &dyn std::error::Error, retry_in = ?retry, "maintaining the certificate Secret failed");
                            next = tokio::time::Instant::now() + retry;
                            retry = (retry * 2).min(RESYNC);
                        }
                    }
                }
            }
        }
    }
    .instrument(span)
    .await
}

/// Time to sleep until `at`, at least a second (clock granularity) and at most [`RESYNC`].
fn until(at: Option<OffsetDateTime>) -> Duration {
    let Some(at) = at else { return RESYNC };
    let left = at - OffsetDateTime::now_utc();
    Duration::try_from(left)
        .unwrap_or(Duration::ZERO)
        .clamp(Duration::from_secs(1), RESYNC)
}
