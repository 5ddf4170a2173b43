//! The children of a TrustyAIService, each kind in one module.
//!
//! A kind's module holds everything the operator does with its objects: the renderer (a pure
//! function of the TrustyAIService and explicit inputs), and its
//! [`declaration::Declaration`]: how its objects are watched and cached, the hooks of its
//! apply, what happens to those no longer wanted and at the TrustyAIService's deletion, and
//! which optional API it needs. The `kinds!` list below names every kind with its declaration,
//! in the order they are applied. The runner starts one watch per kind ([`watches`]),
//! [`apply_all`] walks the same list in order, and the finalizer and `uninstall` act on each
//! kind's lifecycle ([`lifecycle`]): a kind cannot be applied without being watched, because
//! all of them walk `Kind::ALL`, generated from the list.
//!
//! **Adding a child** is its module here, its entry in the list (and the module's `mod` line),
//! and its RBAC in the chart.
//!
//! Every apply goes through one path (`rendered`): a child the cache shows exactly as the
//! last apply of the same rendering left it is skipped (no request) while what that apply
//! made stands (a serving certificate: until it is due); one whose immutable fields differ is
//! replaced; one whose content is made from the live object (a certificate, issued or kept)
//! is read and adapted; objects of the owner that are no longer wanted are deleted, except
//! claims and serving Secrets. What changed is reported in one event per reconcile
//! ([`changes`]).

pub mod cache;
pub mod changes;
pub mod declaration;
pub mod inputs;
pub mod lifecycle;
pub mod memory;
pub mod process_watches;
pub mod watches;

pub mod cluster_role_binding;
pub mod config_map;
pub mod deployment;
pub mod istio;
pub mod pvc;
mod rendered;
pub mod route;
mod service_account;
pub mod service_monitor;
pub mod services;
mod serving_secrets;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Resource;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::core::ApiResource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use trustyai_certs::time::OffsetDateTime;
use trustyai_crds::contract::custom_ca_bundle;

use super::children::config_map::ServiceAccess;
use super::context::Context;
use super::db_secret::DbSecretError;
use super::discovery::OptionalApis;
use super::error::{ReconcileError, is_not_found};
use super::resources::Instance;
use super::resources::images::Images;
use cache::KindCache;
use changes::Changes;
use declaration::{Mapping, Wanted, WatchSpec, ours};
use inputs::WatchedInput;
use memory::{AppliedMemory, Owner, Tracking, ValidUntil};
use process_watches::ProcessWatches;

pub use deployment::template_kept;
pub use pvc::ClaimApplied;

// The order of application: identity and configuration first, then the Services and their
// certificates, the storage, the Deployment, and last the monitoring, routing and mesh objects.
declaration::kinds! {
    /// The kube-rbac-proxy's ServiceAccount.
    ServiceAccount => service_account::DECLARATION,
    /// The per-instance ClusterRoleBinding of the proxy role.
    ClusterRoleBinding => cluster_role_binding::DECLARATION,
    /// The kube-rbac-proxy configuration.
    ConfigMap => config_map::DECLARATION,
    /// The `<cr>-tls` and `<cr>-internal` Services.
    Service => services::DECLARATION,
    /// The serving certificate Secrets, where no service-ca issues them.
    Secret => serving_secrets::DECLARATION,
    /// The storage claim in PVC and migration modes.
    PersistentVolumeClaim => pvc::DECLARATION,
    /// The service itself.
    Deployment => deployment::DECLARATION,
    /// The local ServiceMonitor and the shared one in the operator namespace.
    ServiceMonitor => service_monitor::DECLARATION,
    /// The OpenShift Route.
    Route => route::DECLARATION,
    /// The Istio DestinationRule for KServe InferenceServices behind Istio.
    DestinationRule => istio::DESTINATION_RULE,
    /// The Istio VirtualService for the same.
    VirtualService => istio::VIRTUAL_SERVICE,
}

/// The API resource of a built-in kind.
pub fn built_in<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// The watch of an owned, namespaced, built-in kind: the objects carrying this operator's
/// label, metadata only, mapped by owner reference.
const fn owned_watch(resource: fn() -> ApiResource) -> WatchSpec {
    WatchSpec {
        resource,
        namespaced: true,
        selector: Some(ours),
        served: None,
        mapping: Mapping::OwnerReferences,
        tracking: Tracking::ResourceVersion,
        projection: cache::Projection::NONE,
    }
}

/// [`owned_watch`] for a kind of an optional API, watched while `served`.
const fn optional_owned_watch(
    resource: fn() -> ApiResource,
    served: fn(&OptionalApis) -> bool,
) -> WatchSpec {
    WatchSpec {
        served: Some(served),
        ..owned_watch(resource)
    }
}

/// `object` as an object to apply.
fn wanted<K: Serialize>(object: &K) -> Result<Wanted, ReconcileError> {
    let encode = |source| ReconcileError::Encode {
        what: "a rendered child",
        source,
    };
    let object: DynamicObject =
        serde_json::from_value(serde_json::to_value(object).map_err(encode)?).map_err(encode)?;
    Ok(Wanted {
        object,
        shared: false,
    })
}

/// The one object of a kind.
fn render_one<K: Serialize>(object: &K) -> Result<Vec<Wanted>, ReconcileError> {
    Ok(vec![wanted(object)?])
}

/// The caches of every declared kind and input, and the memory of the applies.
pub struct Children {
    kinds: Vec<Arc<KindCache>>,
    /// The watches of the whole process whose caches these share, if any.
    process: Option<ProcessWatches>,
    inputs: Vec<Arc<KindCache>>,
    /// The last applies (and looks at what stands until a time, with that time).
    pub applied: AppliedMemory<ValidUntil>,
    /// The verdicts on the database credentials Secrets.
    pub db_credentials: AppliedMemory<Result<(), DbSecretError>>,
}

impl Default for Children {
    fn default() -> Self {
        Self::sharing(None)
    }
}

impl Children {
    /// Caches of their own for every kind, except those whose watch `process` runs (their
    /// cache is the process's).
    pub fn sharing(process: Option<ProcessWatches>) -> Self {
        let cache = |spec: WatchSpec| Arc::new(KindCache::new(spec.tracking, spec.projection));
        let kind_cache = |kind: &Kind| {
            process
                .as_ref()
                .and_then(|p| p.cache(*kind))
                .cloned()
                .unwrap_or_else(|| cache(kind.declaration().watch))
        };
        Self {
            // In the order of `Kind::ALL`, so a kind's discriminant is its index.
            kinds: Kind::ALL.iter().map(kind_cache).collect(),
            process,
            inputs: WatchedInput::ALL.iter().map(|i| cache(i.watch())).collect(),
            applied: AppliedMemory::default(),
            db_credentials: AppliedMemory::default(),
        }
    }

    /// The cache of `kind`.
    pub fn cache(&self, kind: Kind) -> &KindCache {
        &self.kinds[kind as usize]
    }

    /// The cache of `input`.
    pub fn input(&self, input: WatchedInput) -> &KindCache {
        &self.inputs[input as usize]
    }

    /// The watches of the whole process these caches share, if any.
    pub fn process(&self) -> Option<&ProcessWatches> {
        self.process.as_ref()
    }

    /// Every watch the controller runs: one per declared kind and input, except the kinds
    /// the process watches.
    pub fn watches(&self) -> Vec<watches::Watched> {
        let own = |kind: &&Kind| {
            self.process
                .as_ref()
                .is_none_or(|p| p.cache(**kind).is_none())
        };
        let kinds = Kind::ALL.iter().filter(own).map(|kind| watches::Watched {
            spec: kind.declaration().watch,
            cache: self.kinds[*kind as usize].clone(),
            label: kind.name(),
        });
        let inputs = WatchedInput::ALL.iter().map(|i| watches::Watched {
            spec: i.watch(),
            cache: self.inputs[*i as usize].clone(),
            label: i.label(),
        });
        kinds.chain(inputs).collect()
    }

    /// Forgets what is remembered about `owner`'s children (it is being deleted).
    pub fn forget_owner(&self, owner: &Owner) {
        self.applied.forget_owner(owner);
        self.db_credentials.forget_owner(owner);
    }
}

/// What the children's application leaves for the status and the requeue.
#[derive(Debug, Default)]
pub struct ChildrenApplied {
    /// When a child must be looked at again although nothing changed: an operand certificate
    /// falls due, or the operand CA takes its next step.
    pub due: Option<OffsetDateTime>,
    /// The Deployment as the API server answered its apply (status included); `None` when
    /// the apply was skipped as a no-op.
    pub deployment: Option<Deployment>,
    /// The Route as the API server answered its apply.
    pub route: Option<DynamicObject>,
    /// The claim's apply.
    pub claim: ClaimApplied,
}

/// The inputs of the rendering that come from elsewhere than the TrustyAIService.
#[derive(Debug, Clone, Copy)]
pub struct RenderInputs<'a> {
    /// The resolved images.
    pub images: &'a Images,
    /// The custom CA bundle ConfigMap exists.
    pub custom_ca_bundle: bool,
    /// The `<cr>-db-ca` Secret exists.
    pub db_ca_exists: bool,
    /// The optional APIs.
    pub apis: OptionalApis,
    /// An InferenceService of the namespace logs to this TrustyAIService through Istio.
    pub istio_wanted: bool,
    /// The ClusterRole the proxy's binding refers to.
    pub proxy_cluster_role: &'a str,
    /// The operator's namespace (of the shared ServiceMonitor).
    pub operator_namespace: &'a str,
    /// The verbs kube-rbac-proxy checks.
    pub service_access: ServiceAccess,
}

/// Applies every child of `instance`, in the order of [`Kind::ALL`], and reports what
/// changed in one event.
pub async fn apply_all(
    ctx: &Context,
    instance: &Instance<'_>,
    inputs: RenderInputs<'_>,
) -> Result<ChildrenApplied, ReconcileError> {
    let mut changes = Changes::default();
    let result = apply_declared(ctx, instance, inputs, &mut changes).await;
    // Reported even when a later child failed: what was done is done.
    changes.publish(&ctx.events, instance.service()).await;
    result
}

async fn apply_declared(
    ctx: &Context,
    instance: &Instance<'_>,
    inputs: RenderInputs<'_>,
    changes: &mut Changes,
) -> Result<ChildrenApplied, ReconcileError> {
    let mut out = ChildrenApplied::default();
    for &kind in Kind::ALL {
        let declaration = kind.declaration();
        if !(declaration.applies_with)(&inputs.apis) {
            continue;
        }
        let hooks = &declaration.applying;
        let rendering = hooks.render.render(ctx, instance, &inputs).await?;
        let applied =
            rendered::apply_kind(ctx, kind, instance, rendering.wanted, hooks, changes).await?;
        out.due = rendered::earliest([out.due, rendering.changes_at, applied.due]);
        keep_answers(kind, applied, &mut out)?;
    }
    Ok(out)
}

/// Keeps what the status reads of the applies (it then needs no read of its own).
fn keep_answers(
    kind: Kind,
    applied: rendered::KindApplied,
    out: &mut ChildrenApplied,
) -> Result<(), ReconcileError> {
    let answer = applied.answers.into_iter().next();
    match kind {
        Kind::Deployment => out.deployment = answer.map(typed).transpose()?,
        Kind::Route => out.route = answer,
        Kind::PersistentVolumeClaim => {
            out.claim = ClaimApplied {
                claim: answer.map(typed).transpose()?,
                growth_refused: applied.refused,
            };
        }
        _ => {}
    }
    Ok(())
}

/// A dynamic object as its typed kind.
pub fn typed<K: DeserializeOwned>(object: DynamicObject) -> Result<K, ReconcileError> {
    let encode = |source| ReconcileError::Encode {
        what: "an API answer",
        source,
    };
    serde_json::from_value(serde_json::to_value(object).map_err(encode)?).map_err(encode)
}

/// Counts what happened to a child of `kind` (`skipped`: known current, no request made).
fn count(ctx: &Context, kind: Kind, outcome: &'static str) {
    if let Some(metrics) = &ctx.config.metrics {
        metrics.child_applied(kind, outcome);
    }
}

/// An object as a cache knows it (its projected fields only).
#[derive(Debug, Clone)]
enum CachedObject<K> {
    /// The cache cannot tell: ask the API server.
    Unknown,
    /// It does not exist.
    Absent,
    /// Its projected fields, as the typed object.
    Present(K),
}

/// The child `name` of `kind` in `namespace` as this reconcile knows it: `applied` (the answer
/// of its apply), else its cache (the projected fields the status reads), else read from the
/// API server.
pub async fn current<K: DeserializeOwned>(
    ctx: &Context,
    kind: Kind,
    namespace: &str,
    name: &str,
    applied: Option<K>,
) -> Result<Option<K>, ReconcileError> {
    if let Some(applied) = applied {
        return Ok(Some(applied));
    }
    match cached_named(ctx, kind, namespace, name) {
        CachedObject::Present(object) => Ok(Some(object)),
        CachedObject::Absent => Ok(None),
        CachedObject::Unknown => {
            let resource = (kind.declaration().watch.resource)();
            let api = rendered::api(&ctx.client, &resource, Some(namespace));
            let found = api.get_opt(name).await.map_err(ReconcileError::kube(
                "reading",
                kind.name(),
                name,
            ))?;
            found.map(typed).transpose()
        }
    }
}

/// The child `name` of `kind` in `namespace` as its cache knows it (its projected fields);
/// `None` when absent or when the cache cannot tell.
pub fn cached<K: DeserializeOwned>(
    ctx: &Context,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Option<K> {
    match cached_named(ctx, kind, namespace, name) {
        CachedObject::Present(object) => Some(object),
        CachedObject::Absent | CachedObject::Unknown => None,
    }
}

fn cached_named<K: DeserializeOwned>(
    ctx: &Context,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> CachedObject<K> {
    let cache = ctx.children.cache(kind);
    if !cache.listed() {
        return CachedObject::Unknown;
    }
    let Some(entry) = cache.entry(Some(namespace), name) else {
        return CachedObject::Absent;
    };
    let Some(fields) = entry.fields else {
        return CachedObject::Unknown;
    };
    let mut value = fields.value();
    if let Some(object) = value.as_object_mut() {
        let meta = object
            .entry("metadata")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("name".to_owned(), name.into());
            meta.insert("namespace".to_owned(), namespace.into());
        }
    }
    // A kind's typed form may require fields the projection leaves out: then ask.
    serde_json::from_value(value).map_or(CachedObject::Unknown, CachedObject::Present)
}

/// Whether the cache shows an Istio object of `instance` (unknown counts as yes: keep them).
pub fn owns_any_istio(ctx: &Context, instance: &Instance<'_>) -> bool {
    let owner = Owner::of(instance);
    [Kind::DestinationRule, Kind::VirtualService]
        .iter()
        .any(|kind| {
            ctx.children
                .cache(*kind)
                .owned_by(&owner)
                .is_none_or(|owned| !owned.is_empty())
        })
}

/// Whether the custom CA bundle ConfigMap (`odh-trusted-ca-bundle`, labelled for injection)
/// exists in `namespace`. Its cache answers once it has listed them.
pub async fn custom_ca_bundle_exists(
    ctx: &Context,
    namespace: &str,
) -> Result<bool, ReconcileError> {
    let cache = ctx.children.input(WatchedInput::CaBundles);
    if let Some(exists) = cache
        .lookup(Some(namespace), custom_ca_bundle::CONFIG_MAP)
        .exists()
    {
        return Ok(exists);
    }
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(ctx.client.clone(), namespace);
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

/// The serving certificate Secrets of `instance` that do not exist.
pub async fn missing_serving_secrets(
    ctx: &Context,
    instance: &Instance<'_>,
) -> Result<Vec<String>, ReconcileError> {
    let mut missing = Vec::new();
    for name in serving_secrets::secret_names(instance.name()) {
        if !secret_exists(ctx, instance.namespace(), &name).await? {
            missing.push(name);
        }
    }
    Ok(missing)
}

/// Whether the Secret `name` exists in `namespace` (metadata only: its content is not needed).
/// The Secret cache answers once it has listed them.
pub async fn secret_exists(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<bool, ReconcileError> {
    let cache = ctx.children.cache(Kind::Secret);
    if let Some(exists) = cache.lookup(Some(namespace), name).exists() {
        return Ok(exists);
    }
    let api: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(ctx.client.clone(), namespace);
    api.get_metadata_opt(name)
        .await
        .map(|s| s.is_some())
        .map_err(ReconcileError::kube("reading", "Secret", name))
}

/// Deletes `name`; absent is fine. Returns whether it existed.
pub async fn delete_ignoring_absent<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
) -> Result<bool, ReconcileError>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(ReconcileError::kube("deleting", kind, name)(e)),
    }
}

#[cfg(test)]
mod apply_tests;
#[cfg(test)]
mod every_kind_tests;

#[cfg(test)]
mod tests {
    use super::declaration::Lifecycle;
    use super::*;

    #[test]
    fn a_kinds_discriminant_is_its_place_in_the_list() {
        for (index, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, index, "{kind:?}");
        }
    }

    #[test]
    fn every_kind_is_watched_with_this_operators_label_or_a_reason() {
        for &kind in Kind::ALL {
            let watch = kind.declaration().watch;
            match kind {
                // Credentials are not ours: every Secret, names only.
                Kind::Secret => assert!(watch.selector.is_none()),
                Kind::ClusterRoleBinding => assert_eq!(watch.mapping, Mapping::OwnerLabels),
                _ => assert_eq!(watch.selector.map(|s| s()), Some(ours()), "{kind:?}"),
            }
        }
    }

    #[test]
    fn only_stateful_kinds_survive_when_unwanted() {
        for &kind in Kind::ALL {
            let kept = !kind.declaration().lifecycle.removes_orphans();
            let expected = matches!(kind, Kind::PersistentVolumeClaim | Kind::Secret);
            assert_eq!(kept, expected, "{kind:?}");
        }
        assert!(matches!(
            Kind::PersistentVolumeClaim.declaration().lifecycle,
            Lifecycle::Data { .. }
        ));
    }

    #[test]
    fn optional_kinds_are_applied_only_where_their_api_is_served() {
        let none = OptionalApis::default();
        let all = OptionalApis {
            routes: true,
            service_monitors: true,
            inference_services: true,
            destination_rules: true,
            virtual_services: true,
        };
        for &kind in Kind::ALL {
            let declaration = kind.declaration();
            if let Some(served) = declaration.watch.served {
                assert!(!served(&none) && served(&all), "{kind:?}");
                assert!(!(declaration.applies_with)(&none), "{kind:?}");
            }
        }
    }
}
