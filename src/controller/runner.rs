//! The controller: which watches trigger a reconcile, and the loop that runs them until the
//! stop token is cancelled.
//!
//! Full objects are cached only for the TrustyAIServices and the operator ConfigMap. Every
//! child kind and input is watched by the watch its declaration states
//! ([`super::children::declaration::Kind`], [`super::children::inputs`]): label-scoped, metadata
//! only unless its cache keeps a few fields (a Deployment's status, a Route's admission), and
//! mapped to the TrustyAIServices it concerns. The watches of optional APIs (Route,
//! ServiceMonitor, Istio, InferenceService) run while their API is served. Besides those:
//!
//! | Watch | Scope | Reconciles |
//! |---|---|---|
//! | TrustyAIServices | all; generation, finalizers, annotations, deletion only | itself |
//! | operator ConfigMap | its name, operator namespace | all |
//! | optional APIs (discovery) | — | all, when one appears or goes |
//!
//! No periodic resync of everything: each object comes back after a long jittered safety
//! requeue, and errors back off per object.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector;
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::config_map;

use super::children::{Children, watches};
use super::context::{Context, ControllerConfig};
use super::discovery::{self, OptionalApis};
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
    let apis = start_discovery(&client, &stop).await;
    let Some((config_store, config_changes)) =
        operator_config(&client, &config.operator_namespace, &stop).await?
    else {
        return Ok(());
    };
    let children = Children::sharing(config.process_watches.clone());
    let context = Context::new(client.clone(), config, apis.clone(), config_store, children);
    let controller = trustyai_services(&client);
    let store = controller.store();
    let (children_tx, children_rx) = mpsc::unbounded_channel();
    start_watches(&context, &client, &apis, &store, children_tx, &stop);
    let everything = futures::stream::select(receiver_stream(config_changes), changes(apis));
    let controller = controller
        .reconcile_on(receiver_stream(children_rx))
        .reconcile_all_on(everything)
        .with_config(
            controller::Config::default()
                .concurrency(CONCURRENCY)
                .debounce(DEBOUNCE),
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned());
    tracing::info!("controller started");
    let series = context
        .config
        .metrics
        .as_ref()
        .map(|m| m.metric_series())
        .unwrap_or_default();
    let metrics = crate::metric_controller::run_when_served(
        client.clone(),
        series,
        store.clone(),
        stop.clone(),
    );
    let (result, ()) = tokio::join!(
        run_until_stopped(controller, context, store, &stop),
        metrics
    );
    result
}

/// Discovers the optional APIs, and keeps discovering them until `stop`.
async fn start_discovery(
    client: &Client,
    stop: &CancellationToken,
) -> watch::Receiver<OptionalApis> {
    let initial = discovery::discover(client, OptionalApis::default()).await;
    initial.log("optional APIs discovered");
    let (apis_tx, apis_rx) = watch::channel(initial);
    tokio::spawn(discovery::maintain(client.clone(), apis_tx, stop.clone()));
    apis_rx
}

/// The operator ConfigMap, cached (images and settings are read on every reconcile), and a
/// signal per change (each reconciles everything); `None` when stopped first. Rendering
/// before its first list would roll every Deployment to the default images and back, so this
/// waits for it.
async fn operator_config(
    client: &Client,
    namespace: &str,
    stop: &CancellationToken,
) -> Result<Option<(reflector::Store<ConfigMap>, mpsc::UnboundedReceiver<()>)>, ControllerError> {
    let (store, writer) = reflector::store::<ConfigMap>();
    let events = watcher(
        Api::<ConfigMap>::namespaced(client.clone(), namespace),
        crate::list_strategy::watcher_config()
            .fields(&format!("metadata.name={}", config_map::NAME)),
    )
    .default_backoff()
    .reflect(writer)
    .touched_objects();
    let (tx, rx) = mpsc::unbounded_channel::<()>();
    tokio::spawn(forward(events, tx, stop.clone()));
    // The stop ends the watch too: it is looked at first, so that is never taken for a failure.
    tokio::select! {
        biased;
        _ = stop.cancelled() => Ok(None),
        ready = store.wait_until_ready() => match ready {
            Ok(()) => Ok(Some((store, rx))),
            Err(_) if stop.is_cancelled() => Ok(None),
            Err(_) => Err(ControllerError::ConfigMapWatch),
        }
    }
}

/// The controller of TrustyAIServices, fed by a watch of them that lets through only the
/// changes a reconcile needs ([`triggers::reconcile_relevant`]).
fn trustyai_services(client: &Client) -> Controller<TrustyAIService> {
    let (reader, writer) = reflector::store::<TrustyAIService>();
    let services = watcher(
        Api::<TrustyAIService>::all(client.clone()),
        // With a list request first, from the API server's cache (any resourceVersion).
        crate::list_strategy::watcher_config().any_semantic(),
    )
    .default_backoff()
    // Nothing reads them, and they are much of what a stored object weighs.
    .modify(|service| service.metadata.managed_fields = None)
    .reflect(writer)
    .applied_objects()
    .predicate_filter(triggers::reconcile_relevant, PredicateConfig::default());
    Controller::for_stream(services, reader)
}

/// Runs `controller` until `stop` (then lets the running reconciles finish, within
/// [`SHUTDOWN_GRACE`]), keeping the managed and not-ready gauges current.
async fn run_until_stopped(
    controller: Controller<TrustyAIService>,
    context: Arc<Context>,
    store: reflector::Store<TrustyAIService>,
    stop: &CancellationToken,
) -> Result<(), ControllerError> {
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
                    Err(error) => tracing::debug!(error = %crate::error_chain::Chain(&error), "controller event"),
                }
            }
        });
    tokio::select! {
        () = run => {}
        () = shutdown_deadline(stop, &reader) => {
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

/// Starts the watch of every declared child kind and input; each keeps its cache in
/// `context` and sends the TrustyAIServices its events concern to `tx`.
fn start_watches(
    context: &Context,
    client: &Client,
    apis: &watch::Receiver<OptionalApis>,
    services: &reflector::Store<TrustyAIService>,
    tx: mpsc::UnboundedSender<reflector::ObjectRef<TrustyAIService>>,
    stop: &CancellationToken,
) {
    let queue = watches::Queue {
        services: services.clone(),
        tx,
    };
    if let Some(process) = context.children.process() {
        process.connect(queue.clone());
    }
    let shared = watches::Shared {
        client: client.clone(),
        apis: apis.clone(),
        targets: watches::Targets::Controller(queue),
        stop: stop.clone(),
    };
    for watched in context.children.watches() {
        tokio::spawn(watches::run(watched, shared.clone()));
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
                Some(Err(error)) => tracing::debug!(error = %crate::error_chain::Chain(&error), "operator ConfigMap watch error"),
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
