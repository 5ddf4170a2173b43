//! The TrustyAIMetric controller: keeps each declared metric scheduled in every ready process
//! of its TrustyAI service (the service holds schedules in memory only, so a restart, rollout
//! or migration empties them), and reports the last value and whether it is within bounds.
//!
//! - [`plan`]: which processes to register with, keep, or forget (pure).
//! - [`status`]: the next status and its bounds events (pure).
//! - [`processes`]: the service's processes from its pods and EndpointSlices.
//! - [`service_api`]: HTTPS calls to one process, verified against the operand trust bundle.
//! - [`scrapes`], [`exposition`]: one `/q/metrics` read per process per interval.
//! - [`series`]: the operator's own series per metric, for alerts.
//! - [`reconcile`]: one reconcile, and the cleanup at deletion.
//!
//! A reconcile reads the cluster from caches, never with a request of its own: the
//! TrustyAIServices from the TrustyAIService controller's cache, the pods and EndpointSlices
//! from the caches of the watches below. Its only requests to the API server are its status
//! and finalizer writes, and a read of the trust bundle when the one it holds is older than
//! [`TRUST_TTL`] or a call failed.
//!
//! | Watch | Scope | Cached | Reconciles |
//! |---|---|---|---|
//! | TrustyAIMetrics | all | yes | itself |
//! | TrustyAIServices | all, metadata only | no (the TrustyAIService controller's cache is read) | the metrics of its namespace |
//! | Pods | `app.kubernetes.io/part-of=trustyai` | names, container states and address only | the metrics of its namespace |
//! | EndpointSlices | `app.kubernetes.io/part-of=trustyai` | yes | the metrics of its namespace |

pub mod exposition;
pub mod plan;
pub mod processes;
pub mod reconcile;
pub mod scrapes;
pub mod series;
pub mod service_api;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::labels;
use trustyai_crds::metric::{TrustyAIMetric, TrustyAIMetricStatus};

use scrapes::Scrapes;
use series::Series;

/// Reconciles at most this many metrics at once.
const CONCURRENCY: u16 = 4;
/// How long the metric controller may take to stop after the stop request.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Retry delay after a failed reconcile.
const ERROR_REQUEUE: Duration = Duration::from_secs(15);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] trustyai_certs::ApiCallError),
    /// A value the operator built did not serialize.
    #[error("internal: {0}")]
    Internal(String),
    /// A cache the reconcile reads stopped before its first list (the process is stopping).
    #[error("the cache of {0} stopped before its first list")]
    CacheClosed(&'static str),
}

/// How long a trust bundle read for a service is used before it is read again (a failed call
/// reads it again at once: the CA may have been rotated).
pub const TRUST_TTL: Duration = Duration::from_secs(300);

/// The cluster objects a reconcile reads, kept current by watches.
pub struct Caches {
    /// Every TrustyAIService (the TrustyAIService controller's cache).
    pub services: Store<TrustyAIService>,
    /// The pods of TrustyAIServices, pruned to what [`processes`] reads.
    pub pods: Store<Pod>,
    /// The EndpointSlices of TrustyAIServices' Services.
    pub slices: Store<EndpointSlice>,
}

impl Caches {
    /// Resolves once every cache has its first list.
    async fn ready(&self) -> Result<(), MetricError> {
        let closed = |what| move |_| MetricError::CacheClosed(what);
        self.services
            .wait_until_ready()
            .await
            .map_err(closed("TrustyAIServices"))?;
        self.pods.wait_until_ready().await.map_err(closed("pods"))?;
        self.slices
            .wait_until_ready()
            .await
            .map_err(closed("EndpointSlices"))?;
        Ok(())
    }
}

/// What every reconcile shares.
pub struct Context {
    client: Client,
    recorder: Recorder,
    scrapes: Scrapes,
    series: Arc<Series>,
    caches: Caches,
    /// The process's stop: a reconcile waiting for the caches' first list gives up at it.
    stop: CancellationToken,
    /// The trust of each service (by namespace and name) and when it was read.
    trust: std::sync::Mutex<
        std::collections::HashMap<(String, String), (std::time::Instant, service_api::ServiceApi)>,
    >,
    /// The status last written per metric (by uid): only the leader writes it.
    written: std::sync::Mutex<std::collections::HashMap<String, TrustyAIMetricStatus>>,
}

/// How often the operator looks again for the TrustyAIMetric API when it is not served.
const API_POLL: Duration = Duration::from_secs(30);

/// Runs the TrustyAIMetric controller until `stop`, once the API server serves TrustyAIMetrics
/// (a cluster whose CRDs are managed by hand may not have it yet). `services` is the
/// TrustyAIService controller's cache.
pub async fn run_when_served(
    client: Client,
    series: Arc<Series>,
    services: Store<TrustyAIService>,
    stop: CancellationToken,
) {
    let api: Api<TrustyAIMetric> = Api::all(client.clone());
    let mut told = false;
    loop {
        match api
            .list_metadata(&kube::api::ListParams::default().limit(1))
            .await
        {
            Ok(_) => break,
            Err(e) => {
                if !told {
                    tracing::info!(error = %crate::error_chain::Chain(&e), "TrustyAIMetrics are not served: the metric controller waits for the API");
                    told = true;
                }
            }
        }
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = tokio::time::sleep(API_POLL) => {}
        }
    }
    run(client, series, services, stop).await;
}

/// Only what [`processes`] reads of a pod: its names and uid, its labels, whether it is being
/// deleted, its address and its containers' states. The rest (the spec above all) is most of
/// what a pod weighs.
fn prune_pod(pod: &mut Pod) {
    pod.spec = None;
    pod.metadata.managed_fields = None;
    pod.metadata.annotations = None;
    pod.metadata.owner_references = None;
    if let Some(status) = pod.status.as_mut() {
        status.conditions = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
}

/// Runs the TrustyAIMetric controller until `stop`.
pub async fn run(
    client: Client,
    series: Arc<Series>,
    services: Store<TrustyAIService>,
    stop: CancellationToken,
) {
    let metrics: Api<TrustyAIMetric> = Api::all(client.clone());
    let controller = Controller::new(
        metrics,
        crate::list_strategy::watcher_config().any_semantic(),
    );
    let store = controller.store();
    let selector = format!("{}={}", labels::PART_OF, labels::PART_OF_VALUE);
    let in_namespace = |store: Store<TrustyAIMetric>| {
        move |namespace: Option<String>| {
            store
                .state()
                .iter()
                .filter(|m| m.namespace() == namespace)
                .map(|m| ObjectRef::from_obj(m.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let by_service = in_namespace(store.clone());
    let by_pod = in_namespace(store.clone());
    let by_slice = in_namespace(store.clone());
    let (pods, pods_writer) = reflector::store::<Pod>();
    let pod_events = watcher(
        Api::<Pod>::all(client.clone()),
        crate::list_strategy::watcher_config().labels(&selector),
    )
    .default_backoff()
    .modify(prune_pod)
    .reflect(pods_writer)
    .touched_objects();
    let (slices, slices_writer) = reflector::store::<EndpointSlice>();
    let slice_events = watcher(
        Api::<EndpointSlice>::all(client.clone()),
        crate::list_strategy::watcher_config().labels(&selector),
    )
    .default_backoff()
    .modify(|slice| slice.metadata.managed_fields = None)
    .reflect(slices_writer)
    .touched_objects();
    // What a service's change means to its metrics is read from the cache; its metadata says
    // when.
    let service_events = watcher(
        Api::<PartialObjectMeta<TrustyAIService>>::all(client.clone()),
        crate::list_strategy::watcher_config(),
    )
    .default_backoff()
    .touched_objects();
    let context = Arc::new(Context {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: trustyai_crds::contract::EVENT_REPORTER.into(),
                instance: None,
            },
        ),
        client: client.clone(),
        scrapes: Scrapes::default(),
        series,
        caches: Caches {
            services,
            pods,
            slices,
        },
        stop: stop.clone(),
        trust: std::sync::Mutex::default(),
        written: std::sync::Mutex::default(),
    });
    let run = controller
        .watches_stream(service_events, move |s| by_service(s.namespace()))
        .watches_stream(pod_events, move |p| by_pod(p.namespace()))
        .watches_stream(slice_events, move |s| by_slice(s.namespace()))
        .with_config(controller::Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile::reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(controller::Error::ReconcilerFailed(error, object)) = result {
                tracing::warn!(%object, error = %crate::error_chain::Chain(&error), "metric reconcile failed");
            }
        });
    tracing::info!("metric controller started");
    // The controller ends once its running reconciles have finished after the stop; the
    // webhook server drains only after that, so the wait is short. kube's runner never ends
    // before its cache's first list, and there is nothing to finish then: it stops at once.
    // Otherwise the metrics (whose reconciles are short and idempotent) get a few seconds,
    // then stop anyway.
    let stopped = async {
        stop.cancelled().await;
        if store.wait_until_ready().now_or_never().is_none() {
            return;
        }
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        () = run => {}
        () = stopped => tracing::info!("metric controller stopped"),
    }
}

fn error_policy(_: Arc<TrustyAIMetric>, _: &MetricError, _: Arc<Context>) -> Action {
    Action::requeue(ERROR_REQUEUE)
}
