//! The caBundle publisher: applies the bundle to the CRD and the webhook configurations, and
//! keeps it there (re-applies when the bundle changes and when any of those objects changes).

use std::fmt::Debug;
use std::time::Duration;

use futures::stream::{self, BoxStream};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::watch;
use tracing::{Instrument, info, info_span, warn};

use crate::api_call::ApiCallError;
use crate::ca_bundle_patches::{
    CABUNDLE_FIELD_MANAGER, LiveConversion, LiveEntry, PublishTargets, crd_apply_body,
    crd_switch_patch, desired_conversion, desired_entries, mutating_entries, validating_entries,
    webhooks_apply_body, webhooks_switch_patch,
};
use crate::material::{MaterialError, TlsMaterial};
use crate::verify::chains_to;

/// Re-check everything this often even without events.
const RESYNC: Duration = Duration::from_secs(5 * 60);
/// First retry after a failure; doubles up to [`MAX_RETRY`].
const RETRY: Duration = Duration::from_secs(2);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// Coalesces a burst of events (our own apply triggers one per object).
const DEBOUNCE: Duration = Duration::from_millis(300);
/// How long the first publication waits for the targets' watches to list them; past it, it
/// reads them.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

/// Failures publishing the bundle.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The material carries no CA bundle (a files source without a CA file).
    #[error("the TLS material has no CA bundle to publish")]
    NoBundle,
    /// The serving certificate does not chain to the bundle; publishing it would break TLS.
    #[error("refusing to publish a CA bundle the serving certificate does not chain to")]
    Unverified(#[source] MaterialError),
    /// A target object does not exist (yet).
    #[error("{kind} {name} does not exist")]
    NotFound {
        /// The target's kind (`MutatingWebhookConfiguration`, ...).
        kind: &'static str,
        /// The target's name (cluster-scoped).
        name: String,
    },
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] ApiCallError),
}

/// What one publication did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Published {
    /// Objects written (`Kind/name`).
    pub updated: Vec<String>,
    /// Objects already up to date.
    pub unchanged: Vec<String>,
}

fn kube_err(
    action: &'static str,
    kind: &'static str,
    name: &str,
) -> impl FnOnce(kube::Error) -> PublishError {
    let call = ApiCallError::on(action, kind, name);
    move |source| PublishError::Kube(call(source))
}

/// Publishes `material`'s CA bundle to every target once. Refuses a bundle the serving
/// certificate does not chain to. Objects already up to date are not written.
#[tracing::instrument(skip_all)]
pub async fn publish_once(
    client: &Client,
    targets: &PublishTargets,
    material: &TlsMaterial,
) -> Result<Published, PublishError> {
    publish_with(client, targets, material, &Watched::default()).await
}

/// The targets as their watches last saw them (`None`: not watched; read instead).
#[derive(Default)]
struct Watched {
    crd: Target<CustomResourceDefinition>,
    validating: Target<ValidatingWebhookConfiguration>,
    mutating: Target<MutatingWebhookConfiguration>,
}

/// One target's watch, and what this publisher last wrote to it.
struct Target<K: Resource<DynamicType = ()> + 'static> {
    store: Option<Store<K>>,
    /// The resourceVersion the last write was decided on, and the object it wrote: until
    /// the watch shows a newer version, the written object is the truth (the watch's copy
    /// is older, and judging it would write the same bundle again).
    written: std::sync::Mutex<Option<(Option<String>, K)>>,
}

impl<K: Resource<DynamicType = ()> + 'static> Default for Target<K> {
    fn default() -> Self {
        Self {
            store: None,
            written: std::sync::Mutex::new(None),
        }
    }
}

impl<K> Target<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// Watched by `store`.
    fn watched_by(store: Store<K>) -> Self {
        Self {
            store: Some(store),
            ..Self::default()
        }
    }

    /// `name` as last seen, once its watch has listed (`Err`: it cannot tell, read the
    /// object).
    fn live(&self, name: &str) -> Result<Option<K>, ()> {
        let store = self.store.as_ref().ok_or(())?;
        let seen = match store.wait_until_ready().now_or_never() {
            Some(Ok(())) => store.get(&ObjectRef::new(name)).map(|k| (*k).clone()),
            _ => return Err(()),
        };
        let written = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match (seen, written.as_ref()) {
            (Some(seen), Some((decided_on, wrote)))
                if seen.meta().resource_version == *decided_on =>
            {
                Ok(Some(wrote.clone()))
            }
            (seen, _) => Ok(seen),
        }
    }

    /// This publisher wrote `wrote`, deciding on the object at `decided_on`.
    fn remember(&self, decided_on: Option<String>, wrote: K) {
        *self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((decided_on, wrote));
    }

    /// Resolves once the watch has listed (at once when there is none, or it ended).
    async fn listed(&self) {
        if let Some(store) = &self.store {
            let _ = store.wait_until_ready().await;
        }
    }
}

impl Watched {
    /// Resolves once every watched target has been listed (watches that ended count as
    /// listed: the publication then reads the target).
    async fn listed(&self) {
        self.crd.listed().await;
        self.validating.listed().await;
        self.mutating.listed().await;
    }
}

/// [`publish_once`], reading the targets from their watches where it can.
async fn publish_with(
    client: &Client,
    targets: &PublishTargets,
    material: &TlsMaterial,
    watched_targets: &Watched,
) -> Result<Published, PublishError> {
    let bundle = material.ca_bundle_pem().ok_or(PublishError::NoBundle)?;
    chains_to(
        material.cert_chain_pem().as_bytes(),
        bundle.as_bytes(),
        OffsetDateTime::now_utc(),
    )
    .map_err(PublishError::Unverified)?;
    let bundle = bundle.as_bytes();
    let mut published = Published::default();
    let mut record = |label: String, written: bool| {
        if written {
            info!(object = %label, "published the CA bundle");
            published.updated.push(label);
        } else {
            published.unchanged.push(label);
        }
    };
    if let Some(name) = &targets.crd_name {
        let written = publish(client, name, &watched_targets.crd, targets, bundle).await?;
        record(format!("CustomResourceDefinition/{name}"), written);
    }
    if let Some(name) = &targets.validating_webhook_configuration {
        let written = publish(client, name, &watched_targets.validating, targets, bundle).await?;
        record(format!("ValidatingWebhookConfiguration/{name}"), written);
    }
    if let Some(name) = &targets.mutating_webhook_configuration {
        let written = publish(client, name, &watched_targets.mutating, targets, bundle).await?;
        record(format!("MutatingWebhookConfiguration/{name}"), written);
    }
    Ok(published)
}

fn apply_params() -> PatchParams {
    PatchParams::apply(CABUNDLE_FIELD_MANAGER).force()
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(CABUNDLE_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// What publishing a bundle writes to an object: a patch that switches client configs between a
/// Service and a URL, where one must (apply cannot remove the other form where another manager
/// owns it), then the apply body.
type Writes = (Option<Patch<Value>>, Value);

/// A kind the bundle is published into.
trait BundleTarget:
    k8s_openapi::Resource
    + Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + Debug
{
    /// What publishing `bundle` for `targets` writes to this object, `name`; `None` when it is
    /// up to date.
    fn writes(&self, name: &str, targets: &PublishTargets, bundle: &[u8]) -> Option<Writes>;
}

impl BundleTarget for CustomResourceDefinition {
    fn writes(&self, name: &str, targets: &PublishTargets, bundle: &[u8]) -> Option<Writes> {
        let live = LiveConversion::of(self);
        let desired = desired_conversion(&targets.endpoint, &targets.conversion_path, bundle);
        if live.is_up_to_date(&desired) {
            return None;
        }
        let switch = live
            .client_config
            .needs_switch_to(&desired)
            .then(|| Patch::Merge(crd_switch_patch(&desired)));
        Some((switch, crd_apply_body(name, &desired)))
    }
}

impl BundleTarget for ValidatingWebhookConfiguration {
    fn writes(&self, name: &str, targets: &PublishTargets, bundle: &[u8]) -> Option<Writes> {
        webhooks_writes::<Self>(&validating_entries(self), name, targets, bundle)
    }
}

impl BundleTarget for MutatingWebhookConfiguration {
    fn writes(&self, name: &str, targets: &PublishTargets, bundle: &[u8]) -> Option<Writes> {
        webhooks_writes::<Self>(&mutating_entries(self), name, targets, bundle)
    }
}

/// [`BundleTarget::writes`] of a webhook configuration of kind `K` whose entries are `live`.
fn webhooks_writes<K: k8s_openapi::Resource>(
    live: &[LiveEntry],
    name: &str,
    targets: &PublishTargets,
    bundle: &[u8],
) -> Option<Writes> {
    let desired = desired_entries(live, &targets.endpoint, bundle);
    if live == desired {
        return None;
    }
    let switching: Vec<LiveEntry> = live
        .iter()
        .zip(&desired)
        .filter(|((_, have), (_, want))| have.needs_switch_to(want))
        .map(|(_, want)| want.clone())
        .collect();
    let switch =
        (!switching.is_empty()).then(|| Patch::Strategic(webhooks_switch_patch(&switching)));
    Some((switch, webhooks_apply_body(K::KIND, name, &desired)))
}

/// Publishes `bundle` to the object `name` (as its watch in `target` last saw it, else read);
/// `false` when it was up to date.
async fn publish<K: BundleTarget>(
    client: &Client,
    name: &str,
    target: &Target<K>,
    targets: &PublishTargets,
    bundle: &[u8],
) -> Result<bool, PublishError> {
    let api: Api<K> = Api::all(client.clone());
    let live = match target.live(name) {
        Ok(live) => live,
        Err(()) => api
            .get_opt(name)
            .await
            .map_err(kube_err("reading", K::KIND, name))?,
    }
    .ok_or_else(|| PublishError::NotFound {
        kind: K::KIND,
        name: name.to_owned(),
    })?;
    let Some((switch, apply)) = live.writes(name, targets, bundle) else {
        return Ok(false);
    };
    if let Some(switch) = switch {
        api.patch(name, &patch_params(), &switch)
            .await
            .map_err(kube_err("switching the client config of", K::KIND, name))?;
    }
    let wrote = api
        .patch(name, &apply_params(), &Patch::Apply(apply))
        .await
        .map_err(kube_err("applying the CA bundle to", K::KIND, name))?;
    target.remember(live.meta().resource_version.clone(), wrote);
    Ok(true)
}

/// The target `name` (`None`: not a target) watched: its store, which the publication reads
/// instead of asking the API server again, and in `sources` a stream that yields whenever the
/// object changes (or the watch re-lists).
fn watched<K>(
    client: &Client,
    name: &Option<String>,
    streaming_lists: bool,
    sources: &mut Vec<BoxStream<'static, ()>>,
) -> Target<K>
where
    K: Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let Some(name) = name else {
        return Target::default();
    };
    let (store, writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let mut config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    if streaming_lists {
        config = config.streaming_lists();
    }
    let changes = watcher::watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .filter_map(|event| async move {
            match event {
                Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => Some(()),
                Ok(Event::Init | Event::InitApply(_)) => None,
                Err(error) => {
                    warn!(
                        error = &error as &dyn std::error::Error,
                        "watching a caBundle target failed; retrying"
                    );
                    None
                }
            }
        });
    sources.push(changes.boxed());
    Target::watched_by(store)
}

/// Keeps the CA bundle of `material` published in `targets` until the material sender is
/// dropped: publishes at start, whenever the material changes, whenever one of the target
/// objects changes (a `helm upgrade` or `kubectl apply` that clears the bundle is corrected
/// within seconds), on failure with backoff, and every five minutes.
///
/// `published` (if given) is set to `true` after the first successful publication, so the
/// caller can hold back readiness or the controller until the apiserver trusts the server.
///
/// Every replica may run this: they all publish the bundle derived from the same Secret.
pub async fn run_publisher(
    client: Client,
    targets: PublishTargets,
    mut material: watch::Receiver<TlsMaterial>,
    published: Option<watch::Sender<bool>>,
) {
    let span = info_span!("ca_bundle_publisher");
    async move {
        let mut sources: Vec<BoxStream<'static, ()>> = Vec::new();
        let streaming = targets.streaming_lists;
        let watched_targets = Watched {
            crd: watched(&client, &targets.crd_name, streaming, &mut sources),
            validating: watched(
                &client,
                &targets.validating_webhook_configuration,
                streaming,
                &mut sources,
            ),
            mutating: watched(
                &client,
                &targets.mutating_webhook_configuration,
                streaming,
                &mut sources,
            ),
        };
        // `pending` keeps the select branch alive even with no targets.
        sources.push(stream::pending().boxed());
        let mut triggers = stream::select_all(sources);
        // The first publication reads the targets from their watches' first lists (which
        // the watches make anyway) rather than reading each target once more.
        tokio::select! {
            () = watched_targets.listed() => {}
            () = async { while triggers.next().await.is_some() {} } => {}
            () = tokio::time::sleep(FIRST_LIST_WAIT) => {}
        }
        let mut retry = RETRY;
        loop {
            let current = material.borrow_and_update().clone();
            let wait = match publish_with(&client, &targets, &current, &watched_targets).await {
                Ok(_) => {
                    retry = RETRY;
                    if let Some(published) = &published {
                        published.send_if_modified(|done| !std::mem::replace(done, true));
                    }
                    RESYNC
                }
                Err(error) => {
                    warn!(error = &error as &dyn std::error::Error, retry_in = ?retry, "publishing the CA bundle failed");
                    let wait = retry;
                    retry = (retry * 2).min(MAX_RETRY);
                    wait
                }
            };
            tokio::select! {
                changed = material.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = triggers.next() => {}
                () = tokio::time::sleep(wait) => {}
            }
            tokio::time::sleep(DEBOUNCE).await;
            while triggers.next().now_or_never().flatten().is_some() {}
        }
    }
    .instrument(span)
    .await
}
