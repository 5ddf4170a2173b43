//! The controller: which watches trigger a reconcile, and the loop that runs them until the
//! stop token is cancelled.
//!
//! Triggers (all cheap: label-scoped or metadata-only where possible). Full objects are cached
//! only for the TrustyAIServices and the operator ConfigMap; the watches marked *cached* keep
//! metadata (without managedFields) in [`super::child_cache`], so reconciles skip no-op applies
//! and answer "does it exist" without a request.
//!
//! | Watch | Scope | Reconciles |
//! |---|---|---|
//! | TrustyAIServices | all; generation, finalizers, annotations, deletion only | itself |
//! | Deployments, Services, ServiceAccounts, ConfigMaps (*cached*), PVCs | `app.kubernetes.io/part-of=trustyai`, metadata | the owner |
//! | PVCs | same label | `<cr>` of a `<cr>-pvc` (retained PVCs have no owner) |
//! | ClusterRoleBindings (*cached*) | owner labels, metadata | the owner |
//! | Deployments | `modelmesh-service=modelmesh-serving` | every TrustyAIService of the namespace |
//! | ConfigMaps (*cached*) | `config.openshift.io/inject-trusted-cabundle=true`, metadata | every TrustyAIService of the namespace |
//! | Secrets (*cached*: name and resourceVersion only) | metadata | the TrustyAIServices reading it (credentials, DB CA, certificates) |
//! | operator ConfigMap | its name, operator namespace | all |
//! | optional APIs (discovery) | — | all, when one appears or goes |
//! | Routes, ServiceMonitors, InferenceServices | while served | the owner; the namespace |
//!
//! No periodic resync of everything: each object comes back after a long jittered safety
//! requeue, and errors back off per object.

use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector;
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::{config_map, custom_ca_bundle, labels, owner_labels};

use super::child_cache::{AppliedMemory, ChildCaches};
use super::context::{Context, ControllerConfig};
use super::discovery::{self, OptionalApis};
use super::integration::modelmesh_selector;
use super::reconciler::{error_policy, reconcile};
use super::triggers;

/// Why the controller stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The operator ConfigMap's watch ended before its first list: nothing can be rendered
    /// without knowing it.
    #[error("the watch of the operator ConfigMap stopped before its first list")]
    ConfigMapWatch,
    /// The controller's stream ended without a stop request.
    #[error("the controller stopped unexpectedly")]
    Stopped,
}

impl ControllerError {
    /// A short label from a fixed set, for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::ConfigMapWatch => "ConfigMapWatch",
            Self::Stopped => "Stopped",
        }
    }
}

/// Reconciles concurrently at most this many TrustyAIServices (never the same one twice).
const CONCURRENCY: u16 = 8;
/// How long running reconciles may take to finish after the stop request (the process gives
/// all its tasks 30 s).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);
/// Coalesces the burst of child events a reconcile causes into one follow-up reconcile.
const DEBOUNCE: Duration = Duration::from_millis(500);

/// Runs the TrustyAIService controller until `stop` is cancelled (then finishes the running
/// reconciles and returns `Ok`).
pub async fn run_controller(
    client: Client,
    config: ControllerConfig,
    stop: CancellationToken,
) -> Result<(), ControllerError> {
    let initial = discovery::discover(&client, OptionalApis::default()).await;
    initial.log("optional APIs discovered");
    let (apis_tx, apis_rx) = watch::channel(initial);
    tokio::spawn(discovery::maintain(client.clone(), apis_tx, stop.clone()));

    // The operator ConfigMap: cached (images and settings are read on every reconcile), and
    // its changes reconcile everything. Rendering before its first list would roll every
    // Deployment to the default images and back, so the controller waits for it.
    let (config_store, config_writer) = reflector::store::<ConfigMap>();
    let config_events = watcher(
        Api::<ConfigMap>::namespaced(client.clone(), &config.operator_namespace),
        watcher::Config::default().fields(&format!("metadata.name={}", config_map::NAME)),
    )
    .default_backoff()
    .reflect(config_writer)
    .touched_objects();
    let (config_tx, config_rx) = mpsc::unbounded_channel::<()>();
    tokio::spawn(forward(config_events, config_tx, stop.clone()));
    tokio::select! {
        _ = stop.cancelled() => return Ok(()),
        ready = config_store.wait_until_ready() => ready.map_err(|_| ControllerError::ConfigMapWatch)?,
    }

    let (deployments, deployments_writer) = reflector::store();
    let (services_cache, services_writer) = reflector::store();
    let (service_accounts, service_accounts_writer) = reflector::store();
    let (config_maps, config_maps_writer) = reflector::store();
    let (bindings, bindings_writer) = reflector::store();
    let (ca_bundles, ca_bundles_writer) = reflector::store();
    let (secrets, secrets_writer) = reflector::store();
    let children = ChildCaches {
        deployments,
        services: services_cache,
        service_accounts,
        config_maps,
        bindings,
        ca_bundles,
        secrets,
        applied: AppliedMemory::default(),
        certificates: AppliedMemory::default(),
        db_credentials: AppliedMemory::default(),
    };
    let context = Context::new(
        client.clone(),
        config,
        apis_rx.clone(),
        config_store,
        children,
    );

    let (reader, writer) = reflector::store::<TrustyAIService>();
    let services = watcher(
        Api::<TrustyAIService>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects()
    .predicate_filter(triggers::reconcile_relevant, PredicateConfig::default());
    let controller = Controller::for_stream(services, reader);
    let store = controller.store();

    let (dynamic_tx, dynamic_rx) = mpsc::unbounded_channel();
    tokio::spawn(triggers::optional_watches(
        client.clone(),
        apis_rx.clone(),
        store.clone(),
        dynamic_tx,
        stop.clone(),
    ));

    let ours = watcher::Config::default().labels(&format!(
        "{}={}",
        labels::PART_OF,
        labels::PART_OF_VALUE
    ));
    let secrets_store = store.clone();
    let modelmesh_store = store.clone();
    let bundle_store = store.clone();
    let everything = futures::stream::select(receiver_stream(config_rx), changes(apis_rx));
    let controller = controller
        .owns_stream(cached_metadata::<Deployment>(
            &client,
            ours.clone(),
            deployments_writer,
        ))
        .owns_stream(cached_metadata::<Service>(
            &client,
            ours.clone(),
            services_writer,
        ))
        .owns_stream(cached_metadata::<ServiceAccount>(
            &client,
            ours.clone(),
            service_accounts_writer,
        ))
        .owns_stream(cached_metadata::<ConfigMap>(
            &client,
            ours.clone(),
            config_maps_writer,
        ))
        .owns(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            ours.clone(),
        )
        .watches(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            ours,
            |claim| triggers::pvc_owner(&claim),
        )
        .watches_stream(
            cached_metadata::<ClusterRoleBinding>(
                &client,
                watcher::Config::default().labels(owner_labels::NAME),
                bindings_writer,
            ),
            |binding| triggers::binding_owner(&binding.metadata),
        )
        .watches(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default().labels(&modelmesh_selector()),
            move |deployment| {
                triggers::in_namespace(
                    &modelmesh_store.state(),
                    deployment.metadata.namespace.as_deref().unwrap_or_default(),
                )
            },
        )
        .watches_stream(
            // The custom CA bundle is mounted when it exists: its appearance changes the pods.
            cached_metadata::<ConfigMap>(
                &client,
                watcher::Config::default()
                    .labels(&format!("{}=true", custom_ca_bundle::INJECT_LABEL)),
                ca_bundles_writer,
            ),
            move |config_map| {
                triggers::in_namespace(
                    &bundle_store.state(),
                    config_map.metadata.namespace.as_deref().unwrap_or_default(),
                )
            },
        )
        .watches_stream(
            // Metadata only: the operator never caches Secret data.
            watcher(
                Api::<PartialObjectMeta<Secret>>::all(client.clone()),
                watcher::Config::default(),
            )
            .default_backoff()
            .modify(|secret| {
                // Not the webhook's `SecretCache` (every replica, its own watch): a reconcile must
                // see at least the change that triggered it, so the store and the trigger share
                // this one watch. Name, namespace and resourceVersion are all it needs.
                let meta = &mut secret.metadata;
                meta.managed_fields = None;
                meta.annotations = None;
                meta.labels = None;
                meta.owner_references = None;
            })
            .reflect(secrets_writer)
            .touched_objects(),
            move |secret| {
                triggers::secret_readers(
                    &secrets_store.state(),
                    secret.metadata.namespace.as_deref().unwrap_or_default(),
                    secret.metadata.name.as_deref().unwrap_or_default(),
                )
            },
        )
        .reconcile_all_on(everything)
        .reconcile_on(receiver_stream(dynamic_rx))
        .with_config(
            controller::Config::default()
                .concurrency(CONCURRENCY)
                .debounce(DEBOUNCE),
        )
        // Leader election comes with a later change: until then, run one replica of the
        // controller (every replica may serve the webhooks).
        .graceful_shutdown_on(stop.clone().cancelled_owned());

    tracing::info!("controller started");
    let metrics = context.config.metrics.clone();
    let reader = store.clone();
    let run = controller
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            if let Some(metrics) = &metrics {
                let services = store.state();
                let not_ready = services.iter().filter(|s| !is_ready(s)).count();
                metrics.set_managed(
                    i64::try_from(services.len()).unwrap_or(i64::MAX),
                    i64::try_from(not_ready).unwrap_or(i64::MAX),
                );
            }
            async move {
                match result {
                    Ok((object, _)) => tracing::debug!(%object, "reconcile finished"),
                    // Reconcile failures are logged by the error policy; these are the
                    // controller's own (a missing object, a queue error).
                    Err(controller::Error::ReconcilerFailed(..)) => {}
                    Err(error) => tracing::debug!(%error, "controller event"),
                }
            }
        });
    tokio::select! {
        () = run => {}
        () = shutdown_deadline(&stop, &reader) => {
            tracing::warn!("the controller did not finish its reconciles in time; stopping anyway");
        }
    }
    if stop.is_cancelled() {
        tracing::info!("controller stopped");
        Ok(())
    } else {
        Err(ControllerError::Stopped)
    }
}

/// Resolves when the controller must stop even if its graceful shutdown has not finished:
/// right away when the TrustyAIServices were never listed (kube's runner then holds its queue
/// forever, e.g. while the CRD is missing), else [`SHUTDOWN_GRACE`] after `stop`.
async fn shutdown_deadline(stop: &CancellationToken, services: &reflector::Store<TrustyAIService>) {
    stop.cancelled().await;
    let listed = services.wait_until_ready().now_or_never().is_some();
    if listed {
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    }
}

/// The metadata of the `K` objects `config` selects, kept in `writer`'s store (without
/// managedFields, the bulk of it), as a stream of the touched objects to trigger reconciles.
fn cached_metadata<K>(
    client: &Client,
    config: watcher::Config,
    writer: reflector::store::Writer<PartialObjectMeta<K>>,
) -> impl Stream<Item = Result<PartialObjectMeta<K>, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    watcher(Api::<PartialObjectMeta<K>>::all(client.clone()), config)
        .default_backoff()
        .modify(|meta| meta.metadata.managed_fields = None)
        .reflect(writer)
        .touched_objects()
}

/// Drives `events` (keeping its reflector current) and signals each one on `tx`, until `stop`.
async fn forward<S, K>(events: S, tx: mpsc::UnboundedSender<()>, stop: CancellationToken)
where
    S: Stream<Item = Result<K, watcher::Error>>,
{
    let mut events = std::pin::pin!(events);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(_)) => {
                    if tx.send(()).is_err() {
                        return;
                    }
                }
                Some(Err(error)) => tracing::debug!(%error, "operator ConfigMap watch error"),
                None => return,
            },
        }
    }
}

/// The items of `rx` as a stream.
fn receiver_stream<T: Send + 'static>(
    rx: mpsc::UnboundedReceiver<T>,
) -> impl Stream<Item = T> + Send {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

/// One item per change of the optional APIs.
fn changes(rx: watch::Receiver<OptionalApis>) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok().map(|()| ((), rx))
    })
}

/// Whether the status says `Ready=True`.
fn is_ready(service: &TrustyAIService) -> bool {
    service
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == trustyai_crds::contract::condition::READY && c.status == "True")
        })
}
