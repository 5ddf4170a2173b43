//! Applies the objects a TrustyAIService owns (or that are made for it), in dependency order:
//! identity and configuration first, then the Services and their certificates, the storage,
//! the Deployment, and last the optional monitoring and Route objects.
//!
//! Every object is rendered by the pure builders of [`super::resources`] and server-side
//! applied; a `Normal` event reports each one created or changed. Applies that the child
//! caches show to be no-ops are skipped ([`super::child_cache`]).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use trustyai_certs::ServiceNames;
use trustyai_certs::time::OffsetDateTime;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::custom_ca_bundle;

use super::apply::{self, Applied, Outcome};
use super::child_cache::{self, Cached, Owner, Tracking};
use super::context::Context;
use super::discovery::OptionalApis;
use super::error::{ReconcileError, is_not_found};
use super::operand_tls::{self, Decision};
use super::pvc_plan;
use super::resources::deployment::{self, DeploymentInputs};
use super::resources::images::Images;
use super::resources::{
    Instance, cluster_role_binding, config_map, pvc, route, service_account, service_monitor,
    services,
};

/// What the children's application leaves for the status and the requeue.
#[derive(Debug, Default)]
pub struct ChildrenApplied {
    /// When an operand certificate must be renewed next.
    pub renew_at: Option<OffsetDateTime>,
    /// The Deployment as the API server answered its apply (status included); `None` when
    /// the apply was skipped as a no-op.
    pub deployment: Option<Deployment>,
    /// Why the PVC could not grow to the spec's size (it kept its size).
    pub pvc_growth_refused: Option<String>,
}

/// The inputs of the Deployment that come from other objects of the namespace.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The resolved images.
    pub images: &'a Images,
    /// The custom CA bundle ConfigMap exists.
    pub custom_ca_bundle: bool,
    /// The `<cr>-db-ca` Secret exists.
    pub db_ca_exists: bool,
    /// The optional APIs.
    pub apis: OptionalApis,
}

/// Applies every child of `instance`.
pub async fn apply_all(
    ctx: &Context,
    instance: &Instance<'_>,
    inputs: Inputs<'_>,
) -> Result<ChildrenApplied, ReconcileError> {
    let service = instance.service();
    let client = &ctx.client;
    let ns = instance.namespace();
    let mut out = ChildrenApplied::default();

    let caches = &ctx.children;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    apply_cached(
        ctx,
        instance,
        &accounts,
        "ServiceAccount",
        &service_account::service_account(instance),
        &caches.service_accounts,
    )
    .await?;
    apply_binding(ctx, instance).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    apply_cached(
        ctx,
        instance,
        &config_maps,
        "ConfigMap",
        &config_map::kube_rbac_proxy_config(instance),
        &caches.config_maps,
    )
    .await?;
    let svcs: Api<Service> = Api::namespaced(client.clone(), ns);
    for rendered in [
        services::tls_service(instance),
        services::internal_service(instance),
    ] {
        apply_cached(ctx, instance, &svcs, "Service", &rendered, &caches.services).await?;
    }
    if !inputs.apis.service_ca() {
        out.renew_at = apply_serving_secrets(ctx, instance).await?;
    }
    out.pvc_growth_refused = apply_pvc(ctx, instance).await?;
    out.deployment = apply_deployment(ctx, instance, inputs).await?;
    if inputs.apis.service_monitors {
        let api = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            ns,
            &service_monitor::api_resource(),
        );
        apply_one(
            ctx,
            service,
            &api,
            "ServiceMonitor",
            &service_monitor::local(instance),
        )
        .await?;
        let central = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            &ctx.config.operator_namespace,
            &service_monitor::api_resource(),
        );
        // Shared by every TrustyAIService and owned by none: no event on the instance.
        let applied = apply::apply(
            &central,
            "ServiceMonitor",
            &service_monitor::central(&ctx.config.operator_namespace),
        )
        .await?;
        count(ctx, "ServiceMonitor", applied.outcome.label());
    }
    if inputs.apis.routes {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &route::api_resource());
        apply_one(ctx, service, &api, "Route", &route::route(instance)).await?;
    }
    Ok(out)
}

/// Applies `object` and reports a change as a `Normal` event.
pub async fn apply_one<K>(
    ctx: &Context,
    service: &TrustyAIService,
    api: &Api<K>,
    kind: &'static str,
    object: &K,
) -> Result<Applied<K>, ReconcileError>
where
    K: Resource + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let applied = apply::apply(api, kind, object).await?;
    count(ctx, kind, applied.outcome.label());
    announce(ctx, service, kind, &object.name_any(), applied.outcome).await;
    Ok(applied)
}

/// Counts what happened to a child of `kind` (`skipped`: known current, no request made).
fn count(ctx: &Context, kind: &'static str, outcome: &'static str) {
    if let Some(metrics) = &ctx.config.metrics {
        metrics.child_applied(kind, outcome);
    }
}

/// A rendered child checked against the cache and the memory of the last applies.
struct Known {
    owner: Owner,
    kind: &'static str,
    name: String,
    fingerprint: u64,
    tracking: Tracking,
    cached: Cached,
    /// The child is exactly as the last apply of this rendering left it.
    current: bool,
}

impl Known {
    fn of<K>(
        ctx: &Context,
        instance: &Instance<'_>,
        kind: &'static str,
        object: &K,
        store: &Store<PartialObjectMeta<K>>,
        tracking: Tracking,
    ) -> Result<Self, ReconcileError>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize,
    {
        let owner = (instance.namespace().to_owned(), instance.name().to_owned());
        let name = object.name_any();
        let cached =
            child_cache::lookup_tracked(store, object.meta().namespace.as_deref(), &name, tracking);
        let fingerprint =
            child_cache::fingerprint(object).map_err(|source| ReconcileError::Encode {
                what: "a rendered child",
                source,
            })?;
        let current = ctx
            .children
            .applied
            .current(&owner, kind, &name, fingerprint, &cached)
            .is_some();
        Ok(Self {
            owner,
            kind,
            name,
            fingerprint,
            tracking,
            cached,
            current,
        })
    }

    /// Counts what happened to the child (`skipped` when no request was made).
    fn count(&self, ctx: &Context, outcome: &'static str) {
        count(ctx, self.kind, outcome);
    }

    /// The child does not exist: the cache has listed and does not show it, and this process
    /// never applied it (else the cache might only lag behind that apply). No need to read it.
    fn surely_absent(&self, ctx: &Context) -> bool {
        self.cached == Cached::Absent
            && !ctx
                .children
                .applied
                .knows(&self.owner, self.kind, &self.name)
    }

    /// Remembers the apply of this rendering, which the API server answered with `applied`,
    /// and counts what it did.
    fn record(&self, ctx: &Context, applied: &ObjectMeta, outcome: Outcome) {
        self.count(ctx, outcome.label());
        ctx.children.applied.record(
            &self.owner,
            self.kind,
            &self.name,
            self.fingerprint,
            self.tracking.version(applied).as_deref(),
            (),
        );
    }

    /// The live object, read unless it is [surely absent](Self::surely_absent).
    async fn read<K>(&self, ctx: &Context, api: &Api<K>) -> Result<Option<K>, ReconcileError>
    where
        K: Resource + Clone + std::fmt::Debug + DeserializeOwned,
    {
        if self.surely_absent(ctx) {
            return Ok(None);
        }
        api.get_opt(&self.name)
            .await
            .map_err(ReconcileError::kube("reading", self.kind, &self.name))
    }
}

/// Applies `object` unless the cache shows it exactly as the last apply of the same rendering
/// left it, and reports a change as a `Normal` event. The cache also answers whether it
/// existed before; only an object it does not show (new, or a cache still listing) is read.
async fn apply_cached<K>(
    ctx: &Context,
    instance: &Instance<'_>,
    api: &Api<K>,
    kind: &'static str,
    object: &K,
    store: &Store<PartialObjectMeta<K>>,
) -> Result<Outcome, ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let known = Known::of(
        ctx,
        instance,
        kind,
        object,
        store,
        Tracking::ResourceVersion,
    )?;
    if known.current {
        known.count(ctx, "skipped");
        return Ok(Outcome::Unchanged);
    }
    let applied = match &known.cached {
        Cached::Present(before) => {
            apply::apply_after(api, kind, object, Some(before.clone())).await?
        }
        _ if known.surely_absent(ctx) => apply::apply_after(api, kind, object, None).await?,
        _ => apply::apply(api, kind, object).await?,
    };
    known.record(ctx, applied.object.meta(), applied.outcome);
    announce(ctx, instance.service(), kind, &known.name, applied.outcome).await;
    Ok(applied.outcome)
}

/// A `Normal` event for a created or changed child.
pub async fn announce(
    ctx: &Context,
    service: &TrustyAIService,
    kind: &'static str,
    name: &str,
    outcome: Outcome,
) {
    if let Some(reason) = outcome.reason(kind) {
        let verb = if outcome == Outcome::Created {
            "created"
        } else {
            "updated"
        };
        ctx.events
            .normal(service, &reason, "Apply", format!("{kind} {name} {verb}"))
            .await;
    }
}

/// The ClusterRoleBinding. Its roleRef is immutable: a binding to another ClusterRole (the
/// proxy role flag changed) is deleted first.
async fn apply_binding(ctx: &Context, instance: &Instance<'_>) -> Result<(), ReconcileError> {
    let desired =
        cluster_role_binding::cluster_role_binding(instance, &ctx.config.proxy_cluster_role);
    let name = desired.name_any();
    let known = Known::of(
        ctx,
        instance,
        "ClusterRoleBinding",
        &desired,
        &ctx.children.bindings,
        Tracking::ResourceVersion,
    )?;
    if known.current {
        known.count(ctx, "skipped");
        return Ok(());
    }
    let api: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
    let live = known.read(ctx, &api).await?;
    let live_rv = match live {
        Some(live) if live.role_ref != desired.role_ref => {
            delete_ignoring_absent(&api, "ClusterRoleBinding", &name).await?;
            None
        }
        live => live.and_then(|l| l.metadata.resource_version),
    };
    let applied = apply::apply_after(&api, "ClusterRoleBinding", &desired, live_rv).await?;
    known.record(ctx, applied.object.meta(), applied.outcome);
    announce(
        ctx,
        instance.service(),
        "ClusterRoleBinding",
        &name,
        applied.outcome,
    )
    .await;
    Ok(())
}

/// `<cr>-tls` and `<cr>-internal`, issued from the operand CA where needed. Returns when the
/// next one is due.
async fn apply_serving_secrets(
    ctx: &Context,
    instance: &Instance<'_>,
) -> Result<Option<OffsetDateTime>, ReconcileError> {
    let ca = ctx.operand_ca.get(&ctx.client).await?;
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), instance.namespace());
    let lifetimes = *ctx.operand_ca.lifetimes();
    let mut next: Option<OffsetDateTime> = None;
    let owner = (instance.namespace().to_owned(), instance.name().to_owned());
    // A certificate found good stays good until it is due, as long as neither the Secret (its
    // resourceVersion in the cache) nor the CA changed: no read, no parsing until then.
    let ca_fingerprint =
        child_cache::fingerprint(&ca.cert_pem()).map_err(|source| ReconcileError::Encode {
            what: "the operand CA",
            source,
        })?;
    let memory = &ctx.children.certificates;
    for (secret_name, service_name) in operand_tls::serving_secrets(instance.name()) {
        let now = OffsetDateTime::now_utc();
        let cached = child_cache::lookup(
            &ctx.children.secrets,
            Some(instance.namespace()),
            &secret_name,
        );
        if let Some(renew_at) =
            memory.current(&owner, "Secret", &secret_name, ca_fingerprint, &cached)
            && now < renew_at
        {
            count(ctx, "Secret", "skipped");
            next = Some(next.map_or(renew_at, |n| n.min(renew_at)));
            continue;
        }
        let live = api
            .get_opt(&secret_name)
            .await
            .map_err(ReconcileError::kube("reading", "Secret", &secret_name))?;
        let names = ServiceNames::new(&service_name, instance.namespace());
        let renew_at = match operand_tls::decide(live.as_ref(), &ca, &names, now) {
            Decision::Foreign => continue,
            Decision::Keep { renew_at } => {
                count(ctx, "Secret", "unchanged");
                let live_rv = live
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.as_deref());
                memory.record(
                    &owner,
                    "Secret",
                    &secret_name,
                    ca_fingerprint,
                    live_rv,
                    renew_at,
                );
                renew_at
            }
            Decision::Issue(reason) => {
                tracing::info!(secret = %secret_name, %reason, "issuing an operand certificate");
                let secret =
                    operand_tls::issue(instance, &ca, &lifetimes, &secret_name, &service_name, now)
                        .await?;
                let live_rv = live.and_then(|l| l.metadata.resource_version);
                let applied = apply::apply_after(&api, "Secret", &secret, live_rv).await?;
                count(ctx, "Secret", applied.outcome.label());
                let renew_at = now + lifetimes.serving * 2 / 3;
                memory.record(
                    &owner,
                    "Secret",
                    &secret_name,
                    ca_fingerprint,
                    applied.object.metadata.resource_version.as_deref(),
                    renew_at,
                );
                ctx.events
                    .normal(
                        instance.service(),
                        "CertificateIssued",
                        "Apply",
                        format!("Serving certificate Secret {secret_name} issued ({reason})"),
                    )
                    .await;
                renew_at
            }
        };
        next = Some(next.map_or(renew_at, |n| n.min(renew_at)));
    }
    Ok(next)
}

/// The PVC, in PVC and migration modes: created when absent, grown when the spec asks for
/// more, never shrunk or re-created; with `retention: Retain`, an owner reference to this
/// TrustyAIService (the Go operator's) is removed. Returns why a growth was refused.
async fn apply_pvc(
    ctx: &Context,
    instance: &Instance<'_>,
) -> Result<Option<String>, ReconcileError> {
    let Some(desired) = pvc::pvc(instance)? else {
        return Ok(None);
    };
    let name = desired.name_any();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), instance.namespace());
    let live = api.get_opt(&name).await.map_err(ReconcileError::kube(
        "reading",
        "PersistentVolumeClaim",
        &name,
    ))?;
    if let Some(live) = &live
        && !instance.spec().storage.deletes_pvc_with_service()
        && let Some(patch) = pvc_plan::drop_owner_patch(live, instance.uid())
    {
        let patch = patch
            .to_kube_patch::<()>()
            .map_err(|source| ReconcileError::Encode {
                what: "the PVC owner patch",
                source,
            })?;
        api.patch(&name, &apply::update_params(), &patch)
            .await
            .map_err(ReconcileError::kube(
                "patching",
                "PersistentVolumeClaim",
                &name,
            ))?;
        tracing::info!(pvc = %name, "removed the owner reference of a retained PVC");
    }
    let live_rv = live
        .as_ref()
        .and_then(|l| l.metadata.resource_version.clone());
    let body = pvc_plan::apply_body(desired, live.as_ref());
    let growth = live.as_ref().and_then(|l| pvc_plan::growth(&body, l));
    let (applied, refused) =
        match apply::apply_after(&api, "PersistentVolumeClaim", &body, live_rv.clone()).await {
            Ok(applied) => (applied, None),
            // A class that cannot expand (or a quota) refuses the growth: the claim keeps its
            // size and still serves, so the rest of the spec goes on being applied.
            Err(ref e) if let (Some(growth), Some(why)) = (&growth, e.refusal()) => {
                let refused = format!(
                    "it could not grow from {} to {}: {why}",
                    growth.from.0, growth.to.0
                );
                tracing::warn!(pvc = %name, %refused, "the PVC keeps its size");
                let kept = pvc_plan::with_size(body, growth.from.clone());
                let applied =
                    apply::apply_after(&api, "PersistentVolumeClaim", &kept, live_rv).await?;
                (applied, Some(refused))
            }
            Err(e) => return Err(e),
        };
    count(ctx, "PersistentVolumeClaim", applied.outcome.label());
    // The Go operator's reason is `PVCCreated`.
    announce(ctx, instance.service(), "PVC", &name, applied.outcome).await;
    Ok(refused)
}

/// The Deployment; one made by the Go operator (its selector holds the version label, which is
/// immutable) is deleted and created again. Returns the applied Deployment, `None` when the
/// apply was a known no-op and skipped.
async fn apply_deployment(
    ctx: &Context,
    instance: &Instance<'_>,
    inputs: Inputs<'_>,
) -> Result<Option<Deployment>, ReconcileError> {
    let desired = deployment::deployment(
        instance,
        &DeploymentInputs {
            images: inputs.images,
            custom_ca_bundle: inputs.custom_ca_bundle,
            db_ca_exists: inputs.db_ca_exists,
        },
    )?;
    let name = desired.name_any();
    let known = Known::of(
        ctx,
        instance,
        "Deployment",
        &desired,
        &ctx.children.deployments,
        Tracking::GenerationAndMetadata,
    )?;
    if known.current {
        known.count(ctx, "skipped");
        return Ok(None);
    }
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), instance.namespace());
    let live = known.read(ctx, &api).await?;
    let live_rv = match live {
        Some(live) if deployment::must_recreate(&live, &desired) => {
            delete_ignoring_absent(&api, "Deployment", &name).await?;
            ctx.events
                .normal(
                    instance.service(),
                    "DeploymentRecreated",
                    "Apply",
                    format!(
                        "Deployment {name} re-created: its selector cannot be changed in place"
                    ),
                )
                .await;
            None
        }
        live => live.and_then(|l| l.metadata.resource_version),
    };
    let applied = apply::apply_after(&api, "Deployment", &desired, live_rv).await?;
    known.record(ctx, applied.object.meta(), applied.outcome);
    announce(
        ctx,
        instance.service(),
        "Deployment",
        &name,
        applied.outcome,
    )
    .await;
    Ok(Some(applied.object))
}

/// Deletes `name`; absent is fine.
pub async fn delete_ignoring_absent<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
) -> Result<(), ReconcileError>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(ReconcileError::kube("deleting", kind, name)(e)),
    }
}

/// Whether the custom CA bundle ConfigMap (`odh-trusted-ca-bundle`, labelled for injection)
/// exists in `namespace`. The cache of labelled ConfigMaps answers once it has listed them.
pub async fn custom_ca_bundle_exists(
    ctx: &Context,
    namespace: &str,
) -> Result<bool, ReconcileError> {
    match child_cache::lookup(
        &ctx.children.ca_bundles,
        Some(namespace),
        custom_ca_bundle::CONFIG_MAP,
    ) {
        Cached::Present(_) => return Ok(true),
        Cached::Absent => return Ok(false),
        Cached::Unknown => {}
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let found = api
        .get_metadata_opt(custom_ca_bundle::CONFIG_MAP)
        .await
        .map_err(ReconcileError::kube(
            "reading",
            "ConfigMap",
            custom_ca_bundle::CONFIG_MAP,
        ))?;
    Ok(found.is_some_and(|cm| {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(custom_ca_bundle::INJECT_LABEL))
            .is_some_and(|v| v == "true")
    }))
}

/// Whether the Secret `name` exists in `namespace` (metadata only: its content is not needed).
/// The Secret metadata cache answers once it has listed them.
pub async fn secret_exists(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<bool, ReconcileError> {
    match child_cache::lookup(&ctx.children.secrets, Some(namespace), name) {
        Cached::Present(_) => return Ok(true),
        Cached::Absent => return Ok(false),
        Cached::Unknown => {}
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    api.get_metadata_opt(name)
        .await
        .map(|s| s.is_some())
        .map_err(ReconcileError::kube("reading", "Secret", name))
}
