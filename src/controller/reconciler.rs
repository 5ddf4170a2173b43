//! One reconcile of a TrustyAIService: finalizer, children, wiring, status; or, when it is
//! being deleted, the cleanup.
//!
//! A failure while applying the children does not skip the status: the status is written with
//! the failure in `ProvisioningSucceeded` (so `kubectl get` shows why), a `Warning` event is
//! emitted once, and the error goes back to the controller for a backoff retry.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch};
use kube::runtime::controller::Action;
use serde_json::json;
use tracing::Instrument;
use trustyai_certs::time::OffsetDateTime;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::DB_MIGRATION_ANNOTATION;
use trustyai_crds::defaults::StorageMode;

use super::apply::update_params;
use super::backoff::{self, CONFLICT_RETRY};
use super::children::declaration::Kind;
use super::children::memory::Owner;
use super::children::{self, ChildrenApplied, RenderInputs, pvc};
use super::context::Context;
use super::discovery::OptionalApis;
use super::error::ReconcileError;
use super::events::topic;
use super::finalizer::{self, FinalizerAction};
use super::gather::{Gathered, gather};
use super::migration_trigger;
use super::model_servers;
use super::resources::{Instance, labels, names};
use super::single_writer;
use super::status::pod_problem::pod_problem;
use super::status::{self, DeploymentObservation, Observations, RouteObservation};

/// The key of an object's backoff state.
pub fn backoff_key(service: &TrustyAIService) -> String {
    format!(
        "{}/{}",
        service.namespace().unwrap_or_default(),
        service.name_any()
    )
}

/// Reconciles `service`.
pub async fn reconcile(
    service: Arc<TrustyAIService>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let span = tracing::info_span!(
        "reconcile",
        kind = "TrustyAIService",
        namespace = %service.namespace().unwrap_or_default(),
        name = %service.name_any()
    );
    let started = std::time::Instant::now();
    async move {
        let result = match finalizer::step(&service.metadata) {
            FinalizerAction::Ignore => Ok(Action::await_change()),
            FinalizerAction::Cleanup { remaining } => cleanup(&service, &ctx, remaining).await,
            FinalizerAction::Set(finalizers) => {
                set_finalizers(&ctx, &service, &finalizers).await?;
                converge(&service, &ctx).await
            }
            FinalizerAction::Reconcile => converge(&service, &ctx).await,
        };
        if result.is_ok() {
            ctx.backoffs.reset(&backoff_key(&service));
        }
        if let Some(metrics) = &ctx.config.metrics {
            metrics.reconciled(
                started.elapsed(),
                result.as_ref().err().map(ReconcileError::category),
            );
        }
        result
    }
    .instrument(span)
    .await
}

/// After a failed reconcile: a quick quiet retry for conflicts, else exponential backoff.
pub fn error_policy(
    service: Arc<TrustyAIService>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    let (namespace, name) = (service.namespace().unwrap_or_default(), service.name_any());
    if error.is_conflict() {
        tracing::debug!(%namespace, %name, error = %crate::error_chain::Chain(error), "write conflict; retrying");
        return Action::requeue(CONFLICT_RETRY);
    }
    let mut delay = ctx.backoffs.next_delay(&backoff_key(&service));
    // A failing cleanup comes back by its deadline at the latest, to give up then.
    if let Some(left) = finalizer::until_cleanup_expires(
        service.metadata.deletion_timestamp.as_ref(),
        &Time(Timestamp::now()),
        ctx.config.cleanup_timeout,
    ) {
        delay = delay.min(left + Duration::from_secs(1));
    }
    tracing::warn!(%namespace, %name, category = error.category(), error = %crate::error_chain::Chain(error), ?delay, "reconcile failed");
    Action::requeue(delay)
}

async fn set_finalizers(
    ctx: &Context,
    service: &TrustyAIService,
    finalizers: &[String],
) -> Result<(), ReconcileError> {
    let name = service.name_any();
    let api: Api<TrustyAIService> =
        Api::namespaced(ctx.client.clone(), &service.namespace().unwrap_or_default());
    let body = finalizer::patch(service.metadata.resource_version.as_deref(), finalizers);
    api.patch(&name, &update_params(), &Patch::Merge(&body))
        .await
        .map_err(ReconcileError::kube("patching", "TrustyAIService", &name))?;
    Ok(())
}

/// Brings the children and the status in line with the spec, in the steps of a reconcile: what
/// the rendering reads, the children applied in the order of their list, the model servers
/// wired, what the cluster shows of the result, the status, the events, and when to look again.
async fn converge(service: &TrustyAIService, ctx: &Context) -> Result<Action, ReconcileError> {
    let instance = Instance::new(service, &ctx.config.operator_version)?;
    let gathered = gather(ctx, &instance).await?;
    let provisioned = provision(ctx, &instance, &gathered).await?;
    let inference_services_present = gathered.survey.inference_services_present;
    let wired = model_servers::wire(ctx, &instance, gathered.survey, gathered.serverless).await;
    let seen = observe(ctx, &instance, gathered.mode, gathered.apis, &provisioned).await?;
    let observed = Observations {
        generation: service.metadata.generation,
        mode: gathered.mode,
        deployment: seen.deployment,
        pvc: seen.claim.observation.clone(),
        db_credentials: gathered.read.db_credentials,
        route: seen.route,
        inference_services_present,
        image: Some(gathered.images.service.image.clone()),
        image_held: gathered.image_held,
        provisioning_error: provisioned
            .error
            .as_ref()
            .map(|e| crate::error_chain::chain_text(e)),
        pvc_growth_refused: provisioned.applied.claim.growth_refused.clone(),
        pod_problem: pod_problem(&seen.pods, Timestamp::now(), &seen.missing_secrets),
    };
    write_status(ctx, service, &observed).await?;
    let pending_recheck = report(ctx, &instance, &observed, &seen, &provisioned, &wired).await;
    if let Some(e) = provisioned.error.or(wired.error) {
        return Err(e);
    }
    remove_migration_trigger(ctx, service).await?;
    tracing::info!("reconciled");
    // A pod waiting behind the single-writer gate is released once the pod holding the claim
    // is gone; the Deployment's status (its terminating replicas) triggers that reconcile, and
    // this requeue stands in should that update be missed.
    // A service that never became ready changes nothing in the Deployment's status when it
    // crashes or stays unready: it is looked at again to name the cause.
    let not_ready = observed.deployment.is_some_and(|d| !d.is_ready());
    let recheck = [
        pending_recheck,
        seen.pod_waits_for_claim.then_some(SINGLE_WRITER_RECHECK),
        not_ready.then_some(NOT_READY_RECHECK),
    ]
    .into_iter()
    .flatten()
    .min();
    Ok(Action::requeue(next_check(
        ctx,
        service,
        recheck,
        provisioned.applied.due,
    )))
}

/// What the cluster shows after the apply.
struct Seen {
    claim: pvc::ObservedClaim,
    deployment: Option<DeploymentObservation>,
    /// The service's pods, listed only while the Deployment is not settled.
    pods: Vec<Pod>,
    /// The serving certificate Secrets the service CA has not issued yet.
    missing_secrets: Vec<String>,
    /// A pod waits behind the single-writer gate for the claim.
    pod_waits_for_claim: bool,
    route: RouteObservation,
}

async fn observe(
    ctx: &Context,
    instance: &Instance<'_>,
    mode: StorageMode,
    apis: OptionalApis,
    provisioned: &Provisioned,
) -> Result<Seen, ReconcileError> {
    let applied = &provisioned.applied;
    let claim = pvc::observe(ctx, instance, mode, applied.claim.claim.clone()).await?;
    let (deployment, pods) = observe_deployment(ctx, instance, applied.deployment.clone()).await?;
    // Only the service CA issues them where it runs; looked at only while pods are listed
    // (the Deployment is not settled).
    let missing_secrets = if apis.service_ca() && !pods.is_empty() {
        children::missing_serving_secrets(ctx, instance).await?
    } else {
        Vec::new()
    };
    let pod_waits_for_claim = if mode.uses_pvc() {
        single_writer::release(ctx, instance, &pods).await?
    } else {
        false
    };
    let route = observe_route(ctx, instance, apis.routes, applied.route.clone()).await?;
    Ok(Seen {
        claim,
        deployment,
        pods,
        missing_secrets,
        pod_waits_for_claim,
        route,
    })
}

/// The Warning events of this reconcile (each once per problem) and their resolutions;
/// returns when to look again at a claim still pending.
async fn report(
    ctx: &Context,
    instance: &Instance<'_>,
    observed: &Observations,
    seen: &Seen,
    provisioned: &Provisioned,
    wired: &model_servers::Wired,
) -> Option<Duration> {
    let service = instance.service();
    report_pod_problem(ctx, service, observed).await;
    let pending_recheck = pvc::report_pending(ctx, instance, &seen.claim).await;
    pvc::report_growth(
        ctx,
        instance,
        observed.pvc_growth_refused.as_deref(),
        provisioned.error.is_none(),
    )
    .await;
    report_failures(
        ctx,
        service,
        provisioned.error.as_ref(),
        wired.error.as_ref(),
    )
    .await;
    pending_recheck
}

/// The children's application: what it left, or why it stopped (a conflict is returned at
/// once for a quick retry; other failures still get a status).
struct Provisioned {
    applied: ChildrenApplied,
    error: Option<ReconcileError>,
}

async fn provision(
    ctx: &Context,
    instance: &Instance<'_>,
    gathered: &Gathered,
) -> Result<Provisioned, ReconcileError> {
    let (images, read, survey, apis) = (
        &gathered.images,
        &gathered.read,
        &gathered.survey,
        gathered.apis,
    );
    // Istio objects are left as they are while the InferenceServices cannot be listed.
    let istio_kept = survey.failed() && children::owns_any_istio(ctx, instance);
    let inputs = RenderInputs {
        images,
        custom_ca_bundle: read.custom_ca_bundle,
        db_ca_exists: read.db_ca_exists,
        apis,
        istio_wanted: survey.istio_wanted || istio_kept,
        proxy_cluster_role: &ctx.config.proxy_cluster_role,
        operator_namespace: &ctx.config.operator_namespace,
        service_access: ctx.config.service_access,
    };
    match children::apply_all(ctx, instance, inputs).await {
        Ok(applied) => Ok(Provisioned {
            applied,
            error: None,
        }),
        Err(e) if e.is_conflict() => Err(e),
        Err(e) => Ok(Provisioned {
            applied: ChildrenApplied::default(),
            error: Some(e),
        }),
    }
}

/// Warnings for a failed provisioning or wiring, once per problem.
async fn report_failures(
    ctx: &Context,
    service: &TrustyAIService,
    provisioning: Option<&ReconcileError>,
    wiring: Option<&ReconcileError>,
) {
    match provisioning {
        Some(e) => {
            ctx.events
                .warning(
                    service,
                    topic::PROVISIONING,
                    e.category(),
                    crate::error_chain::chain_text(e),
                )
                .await;
        }
        None => ctx.events.resolved(service, topic::PROVISIONING),
    }
    match wiring {
        Some(e) => {
            ctx.events
                .warning(
                    service,
                    topic::WIRING,
                    "WiringFailed",
                    crate::error_chain::chain_text(e),
                )
                .await;
        }
        None => ctx.events.resolved(service, topic::WIRING),
    }
}

/// A Warning when the service's pods say why they do not serve (once per cause), cleared
/// when the service is ready.
async fn report_pod_problem(ctx: &Context, service: &TrustyAIService, observed: &Observations) {
    let ready = observed.deployment.is_some_and(|d| d.is_ready());
    match &observed.pod_problem {
        Some(problem) if !ready => {
            ctx.events
                .warning(service, topic::SERVICE, problem.reason(), problem.message())
                .await;
        }
        _ => ctx.events.resolved(service, topic::SERVICE),
    }
}

/// How soon a TrustyAIService with a pod waiting for the claim is looked at again.
const SINGLE_WRITER_RECHECK: Duration = Duration::from_secs(5);
/// How soon a TrustyAIService whose Deployment is not ready is looked at again.
const NOT_READY_RECHECK: Duration = Duration::from_secs(15);

/// When to look again without a change: the jittered safety requeue, or earlier for a claim
/// still pending or a child due (a certificate, the operand CA).
fn next_check(
    ctx: &Context,
    service: &TrustyAIService,
    pending_recheck: Option<Duration>,
    due: Option<OffsetDateTime>,
) -> Duration {
    let uid = service.uid().unwrap_or_default();
    let mut next = backoff::jittered(ctx.config.safety_requeue, &uid);
    if let Some(recheck) = pending_recheck {
        next = next.min(recheck);
    }
    if let Some(due) = due {
        let until = (due - OffsetDateTime::now_utc()).max(trustyai_certs::time::Duration::ZERO);
        next = next.min(Duration::try_from(until).unwrap_or(Duration::ZERO));
    }
    next
}

/// Removes the Go operator's migration annotation once the children of the current spec are
/// applied (see [`migration_trigger`]).
async fn remove_migration_trigger(
    ctx: &Context,
    service: &TrustyAIService,
) -> Result<(), ReconcileError> {
    let Some(patch) = migration_trigger::removal_patch(&service.metadata) else {
        return Ok(());
    };
    let name = service.name_any();
    let patch = patch.to_kube_patch::<()>();
    let api: Api<TrustyAIService> =
        Api::namespaced(ctx.client.clone(), &service.namespace().unwrap_or_default());
    api.patch(&name, &update_params(), &patch)
        .await
        .map_err(ReconcileError::kube("patching", "TrustyAIService", &name))?;
    ctx.events
        .normal(
            service,
            "MigrationAnnotationRemoved",
            "Reconcile",
            format!(
                "{DB_MIGRATION_ANNOTATION} removed: the Deployment already runs the current spec"
            ),
        )
        .await;
    Ok(())
}

/// The Deployment as observed, and its pods where they were read (only while its status says
/// some pod is not updated, ready and available, see [`status::pods_may_be_failing`]: a pod
/// waiting behind the single-writer gate is one); `applied` (the answer of this reconcile's
/// apply) saves reading the Deployment again.
async fn observe_deployment(
    ctx: &Context,
    instance: &Instance<'_>,
    applied: Option<Deployment>,
) -> Result<(Option<DeploymentObservation>, Vec<Pod>), ReconcileError> {
    let name = names::workload(instance.name());
    let current = children::current(ctx, Kind::Deployment, instance.namespace(), &name, applied);
    let Some(deployment) = current.await? else {
        return Ok((None, Vec::new()));
    };
    let pods = if status::pods_may_be_failing(&deployment) {
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), instance.namespace());
        let selector = labels::selector_string(&labels::selector(instance.name()));
        pods.list(&ListParams::default().labels(&selector))
            .await
            .map_err(ReconcileError::kube("listing", "Pod", instance.namespace()))?
            .items
    } else {
        Vec::new()
    };
    let observation = DeploymentObservation::from_deployment(&deployment, &pods);
    Ok((Some(observation), pods))
}

/// The Route: `applied` (this reconcile's answer), else its cache, else read.
async fn observe_route(
    ctx: &Context,
    instance: &Instance<'_>,
    served: bool,
    applied: Option<DynamicObject>,
) -> Result<RouteObservation, ReconcileError> {
    if !served {
        return Ok(RouteObservation::NotSupported);
    }
    let name = names::workload(instance.name());
    let found: Option<DynamicObject> =
        children::current(ctx, Kind::Route, instance.namespace(), &name, applied).await?;
    Ok(RouteObservation::from_route(found.as_ref()))
}

/// Writes the status computed from `observed` if it differs from the current one.
async fn write_status(
    ctx: &Context,
    service: &TrustyAIService,
    observed: &Observations,
) -> Result<(), ReconcileError> {
    let now = Time(Timestamp::now());
    let new = status::compute(service.status.as_ref(), observed, &now);
    if !status::changed(service.status.as_ref(), &new) {
        return Ok(());
    }
    let name = service.name_any();
    let api: Api<TrustyAIService> =
        Api::namespaced(ctx.client.clone(), &service.namespace().unwrap_or_default());
    // A merge patch replaces `conditions` as a whole: `compute` returns the complete list,
    // keeping conditions of types written by others.
    let body = json!({ "status": new });
    api.patch_status(&name, &update_params(), &Patch::Merge(&body))
        .await
        .map_err(ReconcileError::kube(
            "writing the status of",
            "TrustyAIService",
            &name,
        ))?;
    tracing::info!(
        phase = new.phase.as_deref().unwrap_or_default(),
        "status written"
    );
    Ok(())
}

/// The finalizer's work: undo the wiring, delete the cluster-scoped children, apply the
/// claim's retention, then release the object. A failing step is retried with backoff until
/// `cleanup_timeout` after the deletion request, then given up with a warning.
async fn cleanup(
    service: &TrustyAIService,
    ctx: &Context,
    remaining: Vec<String>,
) -> Result<Action, ReconcileError> {
    match undo(service, ctx).await {
        Ok(()) => ctx.events.resolved(service, topic::CLEANUP),
        Err(e) if e.is_conflict() => return Err(e),
        Err(e) => {
            let now = Time(Timestamp::now());
            let expired = finalizer::cleanup_expired(
                service.metadata.deletion_timestamp.as_ref(),
                &now,
                ctx.config.cleanup_timeout,
            );
            if !expired {
                ctx.events
                    .warning(
                        service,
                        topic::CLEANUP,
                        "CleanupFailed",
                        crate::error_chain::chain_text(&e),
                    )
                    .await;
                return Err(e);
            }
            ctx.events
                .warning(
                    service,
                    topic::CLEANUP,
                    "CleanupAbandoned",
                    format!(
                        "cleanup still failing {:?} after the deletion request; deleting anyway: {}",
                        ctx.config.cleanup_timeout,
                        crate::error_chain::Chain(&e)
                    ),
                )
                .await;
        }
    }
    children::lifecycle::settle_data(ctx, service).await?;
    set_finalizers(ctx, service, &remaining).await?;
    ctx.events.forget(service);
    ctx.children.forget_owner(&Owner::new(
        service.namespace().unwrap_or_default(),
        service.name_any(),
    ));
    tracing::info!("finalized");
    Ok(Action::await_change())
}

pub(crate) async fn undo(service: &TrustyAIService, ctx: &Context) -> Result<(), ReconcileError> {
    let wiring = model_servers::unwire(ctx, service, ctx.apis()).await;
    let cluster_scoped = children::lifecycle::delete_cluster_scoped(ctx, service).await;
    wiring.and(cluster_scoped)
}
