//! One watch per declared kind and input: it keeps the kind's cache and sends the
//! TrustyAIServices an event concerns to the controller. A watch of an optional API runs
//! while the API is served; when the API goes, its cache forgets everything (it can no longer
//! tell) and the watch waits for the API to come back.

use std::sync::{Arc, PoisonError, RwLock};

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use trustyai_crds::TrustyAIService;

use super::super::discovery::OptionalApis;
use super::super::triggers;
use super::cache::KindCache;
use super::declaration::{Mapping, WatchSpec};

/// One watch to run.
pub struct Watched {
    /// What it watches.
    pub spec: WatchSpec,
    /// The cache it keeps.
    pub cache: Arc<KindCache>,
    /// A label for logs.
    pub label: &'static str,
}

/// What every watch shares.
#[derive(Clone)]
pub struct Shared {
    /// The API client.
    pub client: Client,
    /// The optional APIs served.
    pub apis: watch::Receiver<OptionalApis>,
    /// Where the TrustyAIServices an event concerns go.
    pub targets: Targets,
    /// Stops the watches.
    pub stop: CancellationToken,
}

/// A controller's queue, and its TrustyAIServices for the mappings by name and namespace.
#[derive(Clone)]
pub struct Queue {
    /// The TrustyAIServices.
    pub services: Store<TrustyAIService>,
    /// Where the TrustyAIServices to reconcile go.
    pub tx: mpsc::UnboundedSender<ObjectRef<TrustyAIService>>,
}

impl Queue {
    /// Queues the TrustyAIServices the object of `meta` concerns; `false` when the
    /// controller is gone.
    fn send(&self, mapping: Mapping, meta: &ObjectMeta) -> bool {
        targets(mapping, meta, &self.services)
            .into_iter()
            .all(|target| self.tx.send(target).is_ok())
    }
}

/// Where a watch sends the TrustyAIServices its events concern.
#[derive(Clone)]
pub enum Targets {
    /// The queue of the controller the watch belongs to: the watch ends with it.
    Controller(Queue),
    /// The queue of whichever controller is connected, if any: the watch runs for the whole
    /// process (its cache serves more than the controller, which runs only on the leader).
    Process(Arc<RwLock<Option<Queue>>>),
}

impl Targets {
    /// Targets a process-wide watch, with no controller connected yet.
    pub fn process() -> Self {
        Self::Process(Arc::default())
    }

    /// Sends this watch's events to `queue` from now on (a process-wide watch; the
    /// controller of a replica that just became the leader). A controller starts by
    /// reconciling everything, so nothing seen before is replayed.
    pub fn connect(&self, queue: Queue) {
        if let Self::Process(slot) = self {
            *slot.write().unwrap_or_else(PoisonError::into_inner) = Some(queue);
        }
    }

    /// Sends the TrustyAIServices the object of `meta` concerns; `false` when the watch
    /// should end (its controller is gone).
    fn send(&self, mapping: Mapping, meta: &ObjectMeta) -> bool {
        match self {
            Self::Controller(queue) => queue.send(mapping, meta),
            Self::Process(slot) => {
                let queue = slot.read().unwrap_or_else(PoisonError::into_inner).clone();
                if let Some(queue) = queue
                    && !queue.send(mapping, meta)
                {
                    // That controller stopped; the watch goes on for the process.
                    let mut slot = slot.write().unwrap_or_else(PoisonError::into_inner);
                    if slot.as_ref().is_some_and(|q| q.tx.same_channel(&queue.tx)) {
                        *slot = None;
                    }
                }
                true
            }
        }
    }
}

/// An object seen by a watch: its metadata, and the whole object when the cache keeps some
/// of its fields.
struct Seen {
    meta: ObjectMeta,
    object: Option<Value>,
}

/// Runs `watched` until `shared.stop`.
pub async fn run(watched: Watched, shared: Shared) {
    let Shared {
        client,
        mut apis,
        targets,
        stop,
    } = shared;
    let spec = watched.spec;
    loop {
        while !spec.runs_with(&apis.borrow_and_update()) {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = apis.changed() => if changed.is_err() { return },
            }
        }
        if spec.served.is_some() {
            tracing::info!(watch = watched.label, "watching an optional API");
        }
        let mut events = events(&client, &spec);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = apis.changed(), if spec.served.is_some() => {
                    if changed.is_err() {
                        return;
                    }
                    if !spec.runs_with(&apis.borrow_and_update()) {
                        tracing::info!(watch = watched.label, "optional API gone; stopped watching it");
                        break;
                    }
                }
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        if let Some(seen) = ingest(&watched, event)
                            && !targets.send(spec.mapping, &seen.meta)
                        {
                            return;
                        }
                    }
                    Some(Err(error)) => tracing::debug!(error = %crate::error_chain::Chain(&error), watch = watched.label, "watch error"),
                    None => break,
                },
            }
        }
        watched.cache.reset();
    }
}

/// The watch events of `spec`: metadata only unless its cache keeps other fields.
fn events(
    client: &Client,
    spec: &WatchSpec,
) -> BoxStream<'static, Result<Event<Seen>, watcher::Error>> {
    let api = Api::<DynamicObject>::all_with(client.clone(), &(spec.resource)());
    let mut config = crate::list_strategy::watcher_config();
    if let Some(selector) = spec.selector {
        config = config.labels(&selector());
    }
    if spec.projection.needs_objects() {
        watcher::watcher(api, config)
            .default_backoff()
            .map_ok(|event| {
                map_event(event, |object| Seen {
                    object: serde_json::to_value(&object).ok(),
                    meta: object.metadata,
                })
            })
            .boxed()
    } else {
        let api =
            Api::<PartialObjectMeta<DynamicObject>>::all_with(client.clone(), &(spec.resource)());
        watcher::watcher(api, config)
            .default_backoff()
            .map_ok(|event| {
                map_event(event, |object| Seen {
                    meta: object.metadata,
                    object: None,
                })
            })
            .boxed()
    }
}

fn map_event<A, B>(event: Event<A>, f: impl FnOnce(A) -> B) -> Event<B> {
    match event {
        Event::Apply(a) => Event::Apply(f(a)),
        Event::Delete(a) => Event::Delete(f(a)),
        Event::Init => Event::Init,
        Event::InitApply(a) => Event::InitApply(f(a)),
        Event::InitDone => Event::InitDone,
    }
}

/// Brings the cache up to date with `event`; returns the object it touched.
fn ingest(watched: &Watched, event: Event<Seen>) -> Option<Seen> {
    let cache = &watched.cache;
    let spec = &watched.spec;
    let place = |seen: &Seen| {
        (
            spec.namespaced
                .then(|| seen.meta.namespace.clone().unwrap_or_default()),
            seen.meta.name.clone().unwrap_or_default(),
        )
    };
    let entry = |seen: &Seen| {
        cache.entry_for(
            &seen.meta,
            seen.object.as_ref(),
            spec.mapping.owner(&seen.meta),
        )
    };
    match event {
        Event::Init => {
            cache.begin_list();
            None
        }
        Event::InitDone => {
            cache.end_list();
            None
        }
        Event::InitApply(seen) => {
            let (namespace, name) = place(&seen);
            cache.listed_object(namespace.as_deref(), &name, entry(&seen));
            Some(seen)
        }
        Event::Apply(seen) => {
            let (namespace, name) = place(&seen);
            cache.applied(namespace.as_deref(), &name, entry(&seen));
            Some(seen)
        }
        Event::Delete(seen) => {
            let (namespace, name) = place(&seen);
            cache.deleted(namespace.as_deref(), &name);
            Some(seen)
        }
    }
}

/// The TrustyAIServices an event on the object of `meta` concerns.
fn targets(
    mapping: Mapping,
    meta: &ObjectMeta,
    services: &Store<TrustyAIService>,
) -> Vec<ObjectRef<TrustyAIService>> {
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    match mapping {
        Mapping::OwnerReferences => triggers::owners(meta),
        Mapping::OwnerLabels => triggers::binding_owner(meta).into_iter().collect(),
        Mapping::Claim => {
            let mut refs = triggers::owners(meta);
            if let Some(owner) = mapping.owner(meta)
                && !refs.iter().any(|r| r.name == owner.name)
            {
                refs.push(triggers::service_ref(&owner.name, &owner.namespace));
            }
            refs
        }
        Mapping::SecretReaders => triggers::secret_readers(
            &services.state(),
            namespace,
            meta.name.as_deref().unwrap_or_default(),
        ),
        Mapping::Namespace => triggers::in_namespace(&services.state(), namespace),
    }
}
