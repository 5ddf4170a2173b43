//! The shape of a child declaration: everything the operator does with one kind of object,
//! stated in one place. The list is [`Kind::ALL`], each kind's declaration [`Kind::declaration`].

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::core::ApiResource;
use serde_json::Value;
use trustyai_certs::time::OffsetDateTime;
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::{labels, owner_labels};

use super::super::context::Context;
use super::super::discovery::OptionalApis;
use super::super::error::ReconcileError;
use super::super::resources::Instance;
use super::super::wiring::json_patch::JsonPatch;
use super::RenderInputs;
use super::cache::Projection;
use super::memory::{Owner, Tracking};

/// Declares the child kinds in the order they are applied, each with its declaration.
/// `Kind::ALL` is generated with the enum, so a kind cannot exist without being in the list
/// the runner watches and `apply_all` walks, and `Kind::declaration` is generated from the
/// same entries, so it cannot exist undeclared.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident => $declaration:path),+ $(,)?) => {
        /// A kind of object the operator makes for a TrustyAIService.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $($(#[$doc])* $variant),+
        }

        impl Kind {
            /// Every child kind, in the order they are applied.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),+];

            /// The Kubernetes kind, as metrics, logs and errors name it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Kind::$variant => stringify!($variant)),+
                }
            }

            /// Its declaration, stated in its module.
            pub fn declaration(self) -> &'static $crate::controller::children::declaration::Declaration {
                match self {
                    $(Kind::$variant => &$declaration),+
                }
            }
        }
    };
}
pub(crate) use kinds;

/// The list itself is in the children's module, beside the kinds' modules.
pub use super::Kind;

/// How the objects of a watched kind map to the TrustyAIServices an event concerns (and to
/// the one they belong to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// Owner references to a TrustyAIService of any served version.
    OwnerReferences,
    /// The `trustyai.opendatahub.io/owner-*` labels (cluster-scoped objects cannot have a
    /// namespaced owner).
    OwnerLabels,
    /// Owner references, or the instance label of a `<cr>-pvc` (a retained claim has no owner
    /// reference).
    Claim,
    /// The TrustyAIServices reading a Secret of that name (credentials, DB CA, certificates).
    SecretReaders,
    /// Every TrustyAIService of the object's namespace.
    Namespace,
}

impl Mapping {
    /// The TrustyAIService the object of `meta` belongs to.
    pub fn owner(self, meta: &ObjectMeta) -> Option<Owner> {
        let namespace = meta.namespace.clone().unwrap_or_default();
        let by_reference = || {
            super::super::triggers::owners(meta)
                .into_iter()
                .next()
                .map(|r| Owner::new(namespace.clone(), r.name))
        };
        match self {
            Self::OwnerReferences => by_reference(),
            Self::OwnerLabels => {
                let labels = meta.labels.as_ref()?;
                Some(Owner::new(
                    labels.get(owner_labels::NAMESPACE)?,
                    labels.get(owner_labels::NAME)?,
                ))
            }
            Self::Claim => by_reference().or_else(|| {
                let cr = meta.labels.as_ref()?.get(labels::INSTANCE)?;
                (meta.name.as_deref() == Some(super::super::resources::names::pvc(cr).as_str()))
                    .then(|| Owner::new(namespace.clone(), cr))
            }),
            Self::SecretReaders | Self::Namespace => None,
        }
    }
}

/// What a watch lists and keeps.
#[derive(Debug, Clone, Copy)]
pub struct WatchSpec {
    /// The API resource.
    pub resource: fn() -> ApiResource,
    /// Namespaced (else cluster-scoped).
    pub namespaced: bool,
    /// The label selector, if any.
    pub selector: Option<fn() -> String>,
    /// Whether its API is served; `None` for the built-in APIs, always served.
    pub served: Option<fn(&OptionalApis) -> bool>,
    /// How its objects map to TrustyAIServices.
    pub mapping: Mapping,
    /// Which changes count as a new version.
    pub tracking: Tracking,
    /// The fields kept beside the version.
    pub projection: Projection,
}

impl WatchSpec {
    /// Whether the watch runs with `apis` served.
    pub fn runs_with(&self, apis: &OptionalApis) -> bool {
        self.served.is_none_or(|served| served(apis))
    }
}

/// The label every object this operator makes carries.
pub fn ours() -> String {
    format!("{}={}", labels::PART_OF, labels::PART_OF_VALUE)
}

/// What may happen to an object of the kind that is no longer wanted, and on deletion of its
/// TrustyAIService ([`super::lifecycle`] acts on it there and at uninstall).
#[derive(Debug, Clone, Copy)]
pub enum Lifecycle {
    /// Owned by the TrustyAIService: garbage-collected with it; deleted when no longer wanted.
    Owned,
    /// Cluster-scoped, so no namespaced owner can own it and garbage collection never deletes
    /// it: deleted when no longer wanted, by the finalizer (by its owner labels and by `name`,
    /// the name it is made under: an object made by the Go operator has no owner labels), and
    /// by `uninstall` (every object with owner labels).
    ClusterScoped {
        /// The name of the TrustyAIService `cr` of `namespace`'s object.
        name: fn(cr: &str, namespace: &str) -> String,
    },
    /// Holds data: never deleted by the operator while the TrustyAIService exists (the
    /// retention policy decides, through the owner reference); at its deletion, `at_deletion`
    /// applies the retention the spec says then.
    Data {
        /// Run by the finalizer.
        at_deletion: AtDeletion,
    },
    /// Issued credentials a running pod may still read: owned (garbage-collected) but never
    /// deleted while the TrustyAIService exists.
    Credentials,
}

/// What the finalizer does with a kind's objects of the TrustyAIService being deleted.
pub type AtDeletion =
    for<'a> fn(&'a Context, &'a TrustyAIService) -> BoxFuture<'a, Result<(), ReconcileError>>;

impl Lifecycle {
    /// Whether an object that is no longer wanted is deleted.
    pub fn removes_orphans(self) -> bool {
        matches!(self, Self::Owned | Self::ClusterScoped { .. })
    }
}

/// One object to apply.
#[derive(Debug, Clone)]
pub struct Wanted {
    /// The rendered object.
    pub object: DynamicObject,
    /// Shared by every TrustyAIService and owned by none (no event on the instance, one
    /// memory of its apply for all).
    pub shared: bool,
}

/// The objects of a rendered kind that `instance` wants, from the TrustyAIService and the
/// inputs alone.
pub type Render = fn(&Instance<'_>, &RenderInputs<'_>) -> Result<Vec<Wanted>, ReconcileError>;

/// The objects of a kind that `instance` wants, from what the kind reads itself when it is
/// applied as well (the serving Secrets: the operand CA, which may be read, made or rotated
/// then).
pub type ReadingRender = for<'a> fn(
    &'a Context,
    &'a Instance<'a>,
    &'a RenderInputs<'a>,
) -> BoxFuture<'a, Result<Rendering, ReconcileError>>;

/// How a kind's wanted objects are made.
#[derive(Debug, Clone, Copy)]
pub enum Renderer {
    /// A pure function of the TrustyAIService and the inputs.
    Pure(Render),
    /// Reads what it renders from first.
    Reading(ReadingRender),
}

impl Renderer {
    /// The objects `instance` wants now.
    pub async fn render(
        self,
        ctx: &Context,
        instance: &Instance<'_>,
        inputs: &RenderInputs<'_>,
    ) -> Result<Rendering, ReconcileError> {
        match self {
            Self::Pure(render) => Ok(Rendering {
                wanted: render(instance, inputs)?,
                changes_at: None,
            }),
            Self::Reading(render) => render(ctx, instance, inputs).await,
        }
    }
}

/// What a rendering wants.
#[derive(Debug, Default)]
pub struct Rendering {
    /// The objects.
    pub wanted: Vec<Wanted>,
    /// When what they were rendered from changes by itself (the operand CA's next step): the
    /// reconcile looks again then. `None`: only when something it watches changes.
    pub changes_at: Option<OffsetDateTime>,
}

/// Whether the live object (its projected fields) must be deleted before `desired` can be
/// applied: a field that cannot change in place differs.
pub type MustReplace = fn(&Value, &DynamicObject) -> bool;

/// Adapts `desired` to fields of the live object (its projection) that must stay as they
/// are: what lets an object made by someone else be adopted in place. Returns whether this
/// apply takes the object over from another operator (it is then reported `Adopted`, although
/// its owner reference may already name this TrustyAIService).
pub type KeepLive = fn(&Value, &mut DynamicObject) -> bool;

/// Patches the live object (its projected fields and `metadata.resourceVersion`) before the
/// apply, for what server-side apply cannot change (a field another manager owns); `None` when
/// nothing needs it.
pub type PrepareLive = fn(&Instance<'_>, &Value) -> Option<JsonPatch>;

/// When the API server refuses to apply `body` over the live object (as for [`PrepareLive`]):
/// what to apply instead and why the wanted object could not be (kept for the status until
/// an apply of the wanted object succeeds); `None` when the refusal stands.
pub type OnRefused = fn(&ReconcileError, &DynamicObject, &Value) -> Option<(DynamicObject, String)>;

/// Completes `desired` from the whole live object (`None`: absent), read for it because no
/// cache holds an object's data: for content made when it is applied rather than rendered,
/// which stands until a time (a serving certificate and key, issued from the operand CA and
/// renewed when due). Runs only when the skip rule did not skip the object.
pub type AdaptToLive = for<'a> fn(
    &'a Context,
    &'a Instance<'a>,
    DynamicObject,
    Option<&'a DynamicObject>,
) -> BoxFuture<'a, Result<Adapted, ReconcileError>>;

/// What [`AdaptToLive`] decided for one object.
#[derive(Debug)]
pub enum Adapted {
    /// Apply `object`, made for `reason` (reported as issued, with it); what it holds stands
    /// until `valid_until`.
    Issue {
        /// The object to apply (boxed: it is much larger than the other answers).
        object: Box<DynamicObject>,
        /// Why it is issued (the event's note says it).
        reason: String,
        /// When it must be looked at again.
        valid_until: OffsetDateTime,
    },
    /// The live object stands as it is until `valid_until`: nothing to apply.
    Keep {
        /// When it must be looked at again.
        valid_until: OffsetDateTime,
    },
    /// Someone else's: left alone, and not remembered (it is looked at again next time).
    Foreign,
}

/// How a kind is applied: its objects and the hooks its apply takes.
#[derive(Debug, Clone, Copy)]
pub struct Rendered {
    /// The objects wanted.
    pub render: Renderer,
    /// What of the live object the apply keeps.
    pub keep_live: Option<KeepLive>,
    /// When the live object must be replaced instead (after `keep_live`).
    pub must_replace: Option<MustReplace>,
    /// What to patch on the live object before the apply.
    pub prepare_live: Option<PrepareLive>,
    /// What to apply when the wanted object is refused.
    pub on_refused: Option<OnRefused>,
    /// What completes the object from the whole live object (read, then, on every apply that
    /// is not skipped).
    pub adapt_to_live: Option<AdaptToLive>,
}

impl Rendered {
    /// Objects applied as rendered, with no hook.
    pub const fn new(render: Render) -> Self {
        Self {
            render: Renderer::Pure(render),
            keep_live: None,
            must_replace: None,
            prepare_live: None,
            on_refused: None,
            adapt_to_live: None,
        }
    }
}

impl Kind {
    /// How event reasons and notes name it: the kind, except the claim's, which is `PVC`
    /// (`PVCCreated`, as the Go operator's reason is).
    pub const fn event_name(self) -> &'static str {
        match self {
            Kind::PersistentVolumeClaim => "PVC",
            other => other.name(),
        }
    }
}

/// Everything about one child kind (which kind is [`Kind::declaration`]'s to say).
#[derive(Debug, Clone, Copy)]
pub struct Declaration {
    /// Its watch and cache.
    pub watch: WatchSpec,
    /// Whether the kind is wanted at all on a cluster serving `apis` (its API, or another
    /// API that makes it unnecessary).
    pub applies_with: fn(&OptionalApis) -> bool,
    /// What happens to objects no longer wanted.
    pub lifecycle: Lifecycle,
    /// How it is applied: through the one path of every kind (`rendered.rs`), with its hooks.
    pub applying: Rendered,
}

/// For [`Declaration::applies_with`]: wanted on every cluster.
pub fn always(_: &OptionalApis) -> bool {
    true
}
