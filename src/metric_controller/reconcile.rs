//! One reconcile of a TrustyAIMetric: the finalizer, the service and its processes, the
//! registrations the plan asks for, one scrape per process per interval, the status and its
//! events. And the cleanup at deletion, which never waits for a service or pod that is gone.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::{Instrument, info, warn};
use trustyai_crds::TrustyAIService;
use trustyai_crds::metric::FINALIZER;
use trustyai_crds::metric::kinds::MetricType;
use trustyai_crds::metric::request::{self, representative};
use trustyai_crds::metric::types::{Registration, TrustyAIMetric, TrustyAIMetricStatus};

use super::plan::{self, Process};
use super::processes;
use super::service_api::{CallError, ServiceApi};
use super::status::{self, BoundsChange, Observed, Standing};
use super::{Context, MetricError};
use trustyai_certs::ApiCallError;

/// The schedule a service without one runs on (the service's own default).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
/// How soon a metric whose service is missing or not ready is looked at again (the watches of
/// services, pods and endpoints bring it back sooner when something changes).
const WAITING_REQUEUE: Duration = Duration::from_secs(60);
/// The field manager of the metric's status.
const FIELD_MANAGER: &str = "trustyai-operator-metrics";

/// Reconciles one TrustyAIMetric.
pub async fn reconcile(
    metric: Arc<TrustyAIMetric>,
    ctx: Arc<Context>,
) -> Result<Action, MetricError> {
    let namespace = metric.namespace().unwrap_or_default();
    let name = metric.name_any();
    let span = tracing::info_span!("reconcile_metric", %namespace, %name);
    reconcile_in_span(metric, ctx, namespace, name)
        .instrument(span)
        .await
}

async fn reconcile_in_span(
    metric: Arc<TrustyAIMetric>,
    ctx: Arc<Context>,
    namespace: String,
    name: String,
) -> Result<Action, MetricError> {
    let api: Api<TrustyAIMetric> = Api::namespaced(ctx.client.clone(), &namespace);
    // Until the caches have their first list, an empty one would read as "no service"; the
    // stop is not kept waiting for that list.
    tokio::select! {
        ready = ctx.caches.ready() => ready?,
        () = ctx.stop.cancelled() => return Ok(Action::await_change()),
    }
    if metric.metadata.deletion_timestamp.is_some() {
        cleanup(&metric, &ctx, &namespace).await;
        remove_finalizer(&api, &metric).await?;
        ctx.forget(&metric);
        ctx.series.forget(&namespace, &name);
        return Ok(Action::await_change());
    }
    if !metric.finalizers().iter().any(|f| f == FINALIZER) {
        add_finalizer(&api, &metric).await?;
        // The patch brings the object back with its finalizer.
        return Ok(Action::await_change());
    }
    let generation = metric.metadata.generation.unwrap_or(0);
    let request_name = request::request_name(&namespace, &name);
    let bounds = request::bounds(&metric.spec);
    let records = ctx
        .last_status(&metric)
        .map(|s| s.registrations)
        .unwrap_or_default();
    let mut observed = Observed {
        generation,
        service: None,
        request_name: request_name.clone(),
        registrations: records.clone(),
        standing: Standing::Registered,
        value: None,
        bounds,
    };
    let Some(metric_type) = request::metric_type(&metric) else {
        // Admission refuses unknown types; one written while the webhook was down waits.
        observed.standing = Standing::RegistrationFailed(format!(
            "spec.type {:?} is not a metric type this operator knows",
            metric.spec.type_
        ));
        write_status(&api, &metric, &ctx, &observed).await?;
        return Ok(Action::await_change());
    };
    let service = match find_service(
        &ctx.caches.services,
        &namespace,
        metric.spec.service.as_deref(),
    ) {
        Ok(service) => service,
        Err(standing) => {
            observed.service = metric.spec.service.clone();
            // Its processes are unknown: the records stay until the pods say otherwise.
            observed.standing = standing;
            write_status(&api, &metric, &ctx, &observed).await?;
            return Ok(Action::requeue(WAITING_REQUEUE));
        }
    };
    let cr = service.name_any();
    observed.service = Some(cr.clone());
    let interval = schedule_interval(&service);
    let processes = processes::of(&ctx.caches, &namespace, &cr);
    let plan = plan::plan(generation, &processes.ready, &processes.running, &records);
    if processes.ready.is_empty() {
        observed.registrations = plan.keep.clone();
        observed.standing = Standing::ServiceNotReady(format!(
            "TrustyAIService {cr} has no ready pod to schedule the metric in"
        ));
        write_status(&api, &metric, &ctx, &observed).await?;
        return Ok(Action::requeue(
            interval.clamp(Duration::from_secs(5), WAITING_REQUEUE),
        ));
    }
    let service_api = match ctx.trusted(&namespace, &cr).await {
        Ok(service_api) => service_api,
        Err(e) => {
            observed.registrations = plan.keep.clone();
            observed.standing =
                Standing::RegistrationFailed(crate::error_chain::Chain(&e).to_string());
            write_status(&api, &metric, &ctx, &observed).await?;
            return Ok(Action::requeue(interval.max(Duration::from_secs(5))));
        }
    };
    let mut registrations = plan.keep.clone();
    let mut failures = Vec::new();
    for (process, old) in &plan.replace {
        if let Err(e) = unregister(&service_api, metric_type, process, &old.request_id).await {
            warn!(pod = %process.pod, error = %crate::error_chain::Chain(&e), "removing the previous request");
        }
    }
    let to_register = plan.replace.iter().map(|(p, _)| p).chain(&plan.register);
    for process in to_register {
        match register(&service_api, &metric, metric_type, &request_name, process).await {
            Ok(id) => {
                info!(pod = %process.pod, request_id = %id, "registered");
                ctx.publish(
                    &metric,
                    EventType::Normal,
                    "Registered",
                    format!(
                        "{} of {} scheduled in pod {} (request {id})",
                        metric.spec.type_, metric.spec.model, process.pod
                    ),
                )
                .await;
                registrations.push(Registration {
                    pod: process.pod.clone(),
                    pod_uid: process.pod_uid.clone(),
                    started_at: process.started_at.clone(),
                    request_id: id,
                    generation,
                });
            }
            Err(e) => failures.push(format!(
                "pod {}: {}",
                process.pod,
                crate::error_chain::Chain(&e)
            )),
        }
    }
    observed.registrations = registrations.clone();
    observed.standing = if !failures.is_empty() {
        Standing::RegistrationFailed(failures.join("; "))
    } else if plan::covers(&processes.ready, &registrations, generation) {
        Standing::Registered
    } else {
        Standing::RegistrationFailed("not scheduled in every ready pod".into())
    };
    let (value, scrape_failed) = read_value(
        &ctx,
        &service_api,
        metric_type,
        &request_name,
        &processes.ready,
        &registrations,
        interval,
        bounds.as_ref(),
    )
    .await;
    observed.value = value;
    if scrape_failed || !failures.is_empty() {
        // The CA may have been rotated since the bundle was read.
        ctx.distrust(&namespace, &cr);
    }
    write_status(&api, &metric, &ctx, &observed).await?;
    Ok(Action::requeue(interval))
}

/// The value the service reports for the metric in its ready processes, one scrape per
/// process per interval, and whether a scrape failed; removes duplicates of the metric's
/// requests found on the way.
#[allow(clippy::too_many_arguments)]
async fn read_value(
    ctx: &Context,
    service_api: &ServiceApi,
    metric_type: &MetricType,
    request_name: &str,
    ready: &[Process],
    registrations: &[Registration],
    interval: Duration,
    bounds: Option<&trustyai_crds::metric::types::Bounds>,
) -> (Option<f64>, bool) {
    let mut values = Vec::new();
    let mut failed = false;
    for process in ready {
        let keep = registrations
            .iter()
            .find(|r| r.pod_uid == process.pod_uid && r.started_at == process.started_at)
            .map(|r| r.request_id.as_str());
        let samples = match ctx.scrapes.of(service_api, process, interval).await {
            Ok(samples) => samples,
            Err(e) => {
                warn!(pod = %process.pod, error = %crate::error_chain::Chain(&e), "scraping the service");
                failed = true;
                continue;
            }
        };
        let ours = samples.iter().filter(|s| s.gauge == metric_type.gauge);
        for stray in plan::strays(
            request_name,
            keep,
            ours.clone()
                .map(|s| (s.request_id.as_str(), s.request_name.as_deref())),
        ) {
            info!(pod = %process.pod, request_id = %stray, "removing a duplicate request");
            if let Err(e) = unregister(service_api, metric_type, process, &stray).await {
                warn!(pod = %process.pod, error = %crate::error_chain::Chain(&e), "removing a duplicate request");
            }
        }
        values.extend(
            ours.filter(|s| Some(s.request_id.as_str()) == keep)
                .map(|s| s.value),
        );
    }
    (representative(&values, bounds), failed)
}

/// Registers the metric with one process; the request id the service gave it.
async fn register(
    api: &ServiceApi,
    metric: &TrustyAIMetric,
    metric_type: &MetricType,
    request_name: &str,
    process: &Process,
) -> Result<String, CallError> {
    let body = request::request_body(&metric.spec, request_name).unwrap_or(Value::Null);
    let path = format!("{}/request", metric_type.route);
    let (status, answer) = api
        .call(&process.address, http::Method::POST, &path, Some(&body))
        .await?;
    let failed = |message: String| CallError::Http {
        method: "POST".into(),
        path: path.clone(),
        address: process.address.clone(),
        message,
    };
    if !status.is_success() {
        return Err(failed(format!(
            "answered {status}: {}",
            String::from_utf8_lossy(&answer)
        )));
    }
    serde_json::from_slice::<Value>(&answer)
        .ok()
        .and_then(|v| {
            v.get("requestId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .ok_or_else(|| {
            failed(format!(
                "no requestId in {}",
                String::from_utf8_lossy(&answer)
            ))
        })
}

/// Removes the request `id` from one process.
async fn unregister(
    api: &ServiceApi,
    metric_type: &MetricType,
    process: &Process,
    id: &str,
) -> Result<(), CallError> {
    let path = format!("{}/request", metric_type.route);
    let (status, answer) = api
        .call(
            &process.address,
            http::Method::DELETE,
            &path,
            Some(&json!({"requestId": id})),
        )
        .await?;
    // 404: the process no longer holds it, which is what was asked.
    if status.is_success() || status == http::StatusCode::NOT_FOUND {
        Ok(())
    } else {
        Err(CallError::Http {
            method: "DELETE".into(),
            path,
            address: process.address.clone(),
            message: format!("answered {status}: {}", String::from_utf8_lossy(&answer)),
        })
    }
}

/// Removes the metric's requests from the processes that still run them. Best effort: a
/// service or pod that is gone took its requests with it, and nothing here blocks deletion.
async fn cleanup(metric: &TrustyAIMetric, ctx: &Context, namespace: &str) {
    let Some(metric_type) = request::metric_type(metric) else {
        return;
    };
    let last = ctx.last_status(metric).unwrap_or_default();
    let records = last.registrations;
    let Some(cr) = last.service else {
        return;
    };
    if records.is_empty() {
        return;
    }
    let processes = processes::of(&ctx.caches, namespace, &cr);
    let Ok(service_api) = ctx.trusted(namespace, &cr).await else {
        return;
    };
    for record in &records {
        let Some(process) = processes
            .running
            .iter()
            .find(|p| p.pod_uid == record.pod_uid && p.started_at == record.started_at)
        else {
            continue;
        };
        match unregister(&service_api, metric_type, process, &record.request_id).await {
            Ok(()) => info!(pod = %process.pod, request_id = %record.request_id, "request removed"),
            Err(e) => {
                warn!(pod = %process.pod, error = %crate::error_chain::Chain(&e), "removing the request; it stays until the pod restarts")
            }
        }
    }
}

/// The TrustyAIService computing the metric, from the cache: the one named, else the only one
/// of the namespace; or why there is none.
fn find_service(
    services: &Store<TrustyAIService>,
    namespace: &str,
    named: Option<&str>,
) -> Result<Arc<TrustyAIService>, Standing> {
    let found = match named {
        Some(name) => services
            .get(&ObjectRef::new(name).within(namespace))
            .ok_or_else(|| {
                Standing::ServiceNotFound(format!(
                    "no TrustyAIService {name} in namespace {namespace}"
                ))
            }),
        None => {
            let all: Vec<_> = services
                .state()
                .into_iter()
                .filter(|s| s.namespace().as_deref() == Some(namespace))
                .collect();
            match all.len() {
                1 => all
                    .into_iter()
                    .next()
                    .ok_or_else(|| Standing::ServiceNotFound(String::new())),
                0 => Err(Standing::ServiceNotFound(format!(
                    "no TrustyAIService in namespace {namespace}"
                ))),
                n => Err(Standing::ServiceNotFound(format!(
                    "{n} TrustyAIServices in namespace {namespace}: set spec.service to one of them"
                ))),
            }
        }
    };
    found.and_then(|service| {
        if service.metadata.deletion_timestamp.is_some() {
            Err(Standing::ServiceNotReady(format!(
                "TrustyAIService {} is being deleted",
                service.name_any()
            )))
        } else {
            Ok(service)
        }
    })
}

/// How often the service computes its metrics (`spec.metrics.schedule`), at least a second.
fn schedule_interval(service: &TrustyAIService) -> Duration {
    let millis = trustyai_crds::validation::schedule_millis(&service.spec.metrics.schedule);
    if millis == 0 {
        return DEFAULT_INTERVAL;
    }
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX)).max(Duration::from_secs(1))
}

/// Writes the status when it changed, raises the events of a bounds change and exports the
/// metric's series.
async fn write_status(
    api: &Api<TrustyAIMetric>,
    metric: &TrustyAIMetric,
    ctx: &Context,
    observed: &Observed,
) -> Result<(), MetricError> {
    let now = Time(Timestamp::now());
    let last = ctx.last_status(metric);
    let (next, change) = status::next(last.as_ref(), observed, &now);
    ctx.series.record(metric, &next);
    if last.as_ref() == Some(&next) && metric.status.as_ref() == Some(&next) {
        return Ok(());
    }
    let name = metric.name_any();
    let patch = json!({
        "apiVersion": TrustyAIMetric::api_version(&()),
        "kind": TrustyAIMetric::kind(&()),
        "metadata": {"name": name},
        "status": next,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(ApiCallError::on(
        "writing the status of",
        "TrustyAIMetric",
        name.as_str(),
    ))?;
    info!(
        value = ?next.value,
        within_bounds = ?next.within_bounds,
        registrations = next.registrations.len(),
        "status written"
    );
    ctx.remember(metric, next);
    let described = format!("{} of {}", metric.spec.type_, metric.spec.model);
    let range = status::range(observed.bounds.as_ref());
    match change {
        Some(BoundsChange::Left(v)) => {
            ctx.publish(
                metric,
                EventType::Warning,
                "OutsideBounds",
                format!("{described} is {v}, outside {range}"),
            )
            .await;
        }
        Some(BoundsChange::Returned(v)) => {
            ctx.publish(
                metric,
                EventType::Normal,
                "WithinBounds",
                format!("{described} is {v}, back within {range}"),
            )
            .await;
        }
        None => {}
    }
    Ok(())
}

/// Adds the finalizer (a JSON patch that fails if the object changed meanwhile).
async fn add_finalizer(
    api: &Api<TrustyAIMetric>,
    metric: &TrustyAIMetric,
) -> Result<(), MetricError> {
    let name = metric.name_any();
    let patch = if metric.metadata.finalizers.is_none() {
        json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": metric.resource_version()},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": metric.resource_version()},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
        ])
    };
    json_patch(api, &name, patch).await
}

/// Removes the finalizer, if there.
async fn remove_finalizer(
    api: &Api<TrustyAIMetric>,
    metric: &TrustyAIMetric,
) -> Result<(), MetricError> {
    let Some(index) = metric.finalizers().iter().position(|f| f == FINALIZER) else {
        return Ok(());
    };
    let patch = json!([
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]);
    json_patch(api, &metric.name_any(), patch).await
}

async fn json_patch(
    api: &Api<TrustyAIMetric>,
    name: &str,
    patch: Value,
) -> Result<(), MetricError> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| MetricError::Internal(e.to_string()))?;
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(()),
        // Gone already, or changed meanwhile: the watch brings the current object back.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 || s.code == 422 => Ok(()),
        Err(e) => {
            Err(ApiCallError::new("patching the finalizers of", "TrustyAIMetric", name, e).into())
        }
    }
}

impl Context {
    /// How to reach the processes of `cr`: the trust bundle read at most [`super::TRUST_TTL`]
    /// ago, else read now.
    async fn trusted(&self, namespace: &str, cr: &str) -> Result<ServiceApi, CallError> {
        let key = (namespace.to_owned(), cr.to_owned());
        let held = self
            .trust
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .filter(|(read, _)| read.elapsed() < super::TRUST_TTL)
            .map(|(_, api)| api.clone());
        if let Some(api) = held {
            return Ok(api);
        }
        let api = ServiceApi::of(&self.client, namespace, cr).await?;
        self.trust
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (std::time::Instant::now(), api.clone()));
        Ok(api)
    }

    /// Forgets the trust bundle of `cr`: the next call reads it again.
    fn distrust(&self, namespace: &str, cr: &str) {
        self.trust
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(namespace.to_owned(), cr.to_owned()));
    }

    /// The status this process last wrote for `metric`, else the one it carries: the cache may
    /// still hold the object from before that write, and registering from its older records
    /// would schedule the metric twice.
    fn last_status(&self, metric: &TrustyAIMetric) -> Option<TrustyAIMetricStatus> {
        let written = metric.uid().and_then(|uid| {
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&uid)
                .cloned()
        });
        written.or_else(|| metric.status.clone())
    }

    /// Remembers the status just written for `metric`.
    fn remember(&self, metric: &TrustyAIMetric, status: TrustyAIMetricStatus) {
        if let Some(uid) = metric.uid() {
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(uid, status);
        }
    }

    /// Forgets `metric` (it is gone).
    fn forget(&self, metric: &TrustyAIMetric) {
        if let Some(uid) = metric.uid() {
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&uid);
        }
    }

    /// Publishes an event on `metric` (a failure is logged: events are advice).
    async fn publish(&self, metric: &TrustyAIMetric, type_: EventType, reason: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &metric.object_ref(&())).await {
            warn!(error = %crate::error_chain::Chain(&e), reason, "publishing an event");
        }
    }
}

#[cfg(test)]
mod tests {
    use http::Method;
    use kube::runtime::events::{Recorder, Reporter};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;

    use super::*;
    use crate::controller::mock_api::{Expected, MockApi};
    use crate::metric_controller::Caches;

    const STATUS: &str =
        "/apis/trustyai.opendatahub.io/v1alpha1/namespaces/models/trustyaimetrics/bias/status";

    /// A cache that has had its first list, of `objects`.
    fn listed<K>(objects: Vec<K>) -> Store<K>
    where
        K: kube::Resource + Clone + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let mut writer = Writer::<K>::default();
        let store = writer.as_reader();
        writer.apply_watcher_event(&watcher::Event::Init);
        for object in objects {
            writer.apply_watcher_event(&watcher::Event::InitApply(object));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        store
    }

    fn metric() -> TrustyAIMetric {
        serde_json::from_value(json!({
            "apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIMetric",
            "metadata": {"name": "bias", "namespace": "models", "uid": "uid-bias",
                         "generation": 1, "finalizers": [FINALIZER]},
            "spec": {"model": "m", "type": "spd", "protectedAttribute": "gender",
                     "privilegedValue": 1, "unprivilegedValue": 0, "outcomeName": "income",
                     "favorableOutcome": 1},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn context(client: kube::Client) -> Arc<Context> {
        let service = service("models", "demo");
        Arc::new(Context {
            recorder: Recorder::new(
                client.clone(),
                Reporter {
                    controller: "test".into(),
                    instance: None,
                },
            ),
            client,
            scrapes: super::super::Scrapes::default(),
            series: Arc::default(),
            caches: Caches {
                services: listed(vec![service]),
                pods: listed(vec![]),
                slices: listed(vec![]),
            },
            stop: tokio_util::sync::CancellationToken::new(),
            trust: std::sync::Mutex::default(),
            written: std::sync::Mutex::default(),
        })
    }

    /// The reconciles that come every schedule interval read the cluster from the caches: once
    /// the status says what the caches show, they make no API request.
    #[tokio::test]
    async fn a_metric_whose_status_is_current_costs_no_api_request() {
        let mut stored = serde_json::to_value(metric()).unwrap_or_default();
        stored["status"] = json!({});
        let (api, client) = MockApi::new([Expected::answer(Method::PATCH, STATUS, 200, stored)]);
        let ctx = context(client);
        // No ready pod: the status says so, in one write.
        let first = reconcile(Arc::new(metric()), ctx.clone()).await;
        assert!(first.is_ok(), "{first:?}");
        let written = ctx.last_status(&metric());
        let standing = written
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Registered"))
            .and_then(|c| c.reason.clone());
        assert_eq!(standing.as_deref(), Some("ServiceNotReady"), "{written:?}");
        // The next reconcile, of the object as the watch brings it back, writes nothing.
        let mut current = metric();
        current.status = written;
        let second = reconcile(Arc::new(current), ctx).await;
        assert!(second.is_ok(), "{second:?}");
        let requests: Vec<String> = api.requests().iter().map(ToString::to_string).collect();
        assert_eq!(requests, [format!("PATCH {STATUS}")]);
    }

    fn service(namespace: &str, name: &str) -> TrustyAIService {
        serde_json::from_value(json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The service a metric names, or the only one of its namespace; a missing or ambiguous
    /// one is said with what to do.
    #[test]
    fn the_service_is_the_named_one_or_the_only_one_of_the_namespace() {
        let services = listed(vec![
            service("models", "demo"),
            service("other", "demo"),
            service("other", "second"),
        ]);
        let found = |namespace, named| {
            find_service(&services, namespace, named)
                .map(|s| format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()))
        };
        assert_eq!(found("models", Some("demo")), Ok("models/demo".to_owned()));
        assert_eq!(found("models", None), Ok("models/demo".to_owned()));
        assert_eq!(
            found("other", Some("second")),
            Ok("other/second".to_owned())
        );
        assert_eq!(
            found("models", Some("second")),
            Err(Standing::ServiceNotFound(
                "no TrustyAIService second in namespace models".to_owned()
            ))
        );
        assert_eq!(
            found("other", None),
            Err(Standing::ServiceNotFound(
                "2 TrustyAIServices in namespace other: set spec.service to one of them".to_owned()
            ))
        );
        assert_eq!(
            found("empty", None),
            Err(Standing::ServiceNotFound(
                "no TrustyAIService in namespace empty".to_owned()
            ))
        );
    }
}
