//! The one path of every child: skip what the cache shows as the last apply left it (while
//! what that apply made stands), replace what cannot change in place, adapt to the live object
//! what its kind makes from it, apply the rest, delete what is no longer wanted.

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use trustyai_certs::time::OffsetDateTime;

use super::super::apply::{self, Applied};
use super::super::error::ReconcileError;
use super::super::resources::Instance;
use super::cache::{Cached, KindCache};
use super::changes::Changes;
use super::declaration::{Adapted, Declaration, Kind, Rendered, Wanted};
use super::memory::{Owner, ValidUntil, fingerprint, stands_at};
use super::{Children, count, delete_ignoring_absent};
use crate::controller::context::Context;

/// The owner under which shared children's applies are remembered (one memory for all).
fn shared_owner() -> Owner {
    Owner::default()
}

/// The API of `declaration`'s objects in `namespace` (`None`: cluster-scoped).
pub fn api(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// What the apply of one kind left.
#[derive(Debug, Default)]
pub struct KindApplied {
    /// The API server's answers to the applies made (skipped ones have none).
    pub answers: Vec<DynamicObject>,
    /// Why a wanted object could not be applied as rendered, when its kind's `on_refused`
    /// applied another instead.
    pub refused: Option<String>,
    /// When one of the objects must be looked at again although nothing changed (a
    /// certificate falls due); `None`: only when something changes.
    pub due: Option<OffsetDateTime>,
}

/// The earliest of `times`, if any.
pub fn earliest(times: impl IntoIterator<Item = Option<OffsetDateTime>>) -> Option<OffsetDateTime> {
    times.into_iter().flatten().min()
}

/// Applies the `wanted` objects of `kind` for `instance`, with the kind's `hooks`, then
/// deletes those of `instance` no longer wanted.
pub async fn apply_kind(
    ctx: &Context,
    kind: Kind,
    instance: &Instance<'_>,
    wanted: Vec<Wanted>,
    hooks: &Rendered,
    changes: &mut Changes,
) -> Result<KindApplied, ReconcileError> {
    let declaration = kind.declaration();
    let resource = (declaration.watch.resource)();
    let owner = &Owner::of(instance);
    let mut out = KindApplied::default();
    let mut names = HashSet::new();
    for wanted in wanted {
        let name = wanted.object.name_any();
        names.insert((wanted.object.namespace().unwrap_or_default(), name.clone()));
        let child = Child {
            ctx,
            kind,
            declaration,
            instance,
            hooks,
            resource: &resource,
            owner: if wanted.shared {
                shared_owner()
            } else {
                owner.clone()
            },
            namespace: declaration
                .watch
                .namespaced
                .then(|| wanted.object.namespace().unwrap_or_default()),
            name,
        };
        let done = child.apply(&wanted, changes).await?;
        out.due = earliest([out.due, done.valid_until]);
        if let Some((applied, refused)) = done.applied {
            out.answers.push(applied.object);
            out.refused = out.refused.or(refused);
        }
    }
    if declaration.lifecycle.removes_orphans() {
        remove_orphans(ctx, kind, &resource, owner, &names, changes).await?;
    }
    Ok(out)
}

/// What became of one object.
#[derive(Default)]
struct ChildApplied {
    /// The apply's answer and, when `on_refused` applied another object, why the wanted one
    /// was refused; `None` when no apply was made (skipped, kept as it is, or someone else's).
    applied: Option<(Applied<DynamicObject>, Option<String>)>,
    /// Until when it stands without a look at it.
    valid_until: ValidUntil,
}

/// One object of a kind, for one owner.
struct Child<'a> {
    ctx: &'a Context,
    kind: Kind,
    declaration: &'static Declaration,
    instance: &'a Instance<'a>,
    hooks: &'a Rendered,
    resource: &'a ApiResource,
    owner: Owner,
    namespace: Option<String>,
    name: String,
}

impl Child<'_> {
    fn children(&self) -> &Children {
        &self.ctx.children
    }

    fn cache(&self) -> &KindCache {
        self.children().cache(self.kind)
    }

    fn api(&self) -> Api<DynamicObject> {
        api(&self.ctx.client, self.resource, self.namespace.as_deref())
    }

    /// Applies `wanted` unless the last apply left it current, adapting it to the live object
    /// first as its kind's hooks say.
    /// Records that the child, rendered as `rendered`, stands as `metadata` shows it (nothing
    /// known: forgotten) until `valid_until`.
    fn remember(&self, rendered: u64, metadata: Option<&ObjectMeta>, valid_until: ValidUntil) {
        let tracking = self.declaration.watch.tracking;
        self.children().applied.record(
            &self.owner,
            self.kind,
            &self.name,
            rendered,
            metadata.and_then(|meta| tracking.version(meta)).as_deref(),
            valid_until,
        );
    }

    async fn apply(
        &self,
        wanted: &Wanted,
        changes: &mut Changes,
    ) -> Result<ChildApplied, ReconcileError> {
        let kind = self.kind;
        let memory = &self.children().applied;
        let rendered = fingerprint(&wanted.object).map_err(|source| ReconcileError::Encode {
            what: "a rendered child",
            source,
        })?;
        let cached = self.cache().lookup(self.namespace.as_deref(), &self.name);
        let now = OffsetDateTime::now_utc();
        if let Some(valid_until) = memory
            .current(&self.owner, kind, &self.name, rendered, &cached)
            .filter(|valid_until| stands_at(*valid_until, now))
        {
            count(self.ctx, kind, "skipped");
            return Ok(ChildApplied {
                applied: None,
                valid_until,
            });
        }
        let api = self.api();
        let mut live = self.live(&api, &cached).await?;
        let mut live_rv = live.as_ref().and_then(|l| l.resource_version.clone());
        let mut object = wanted.object.clone();
        let taken_over = match (self.hooks.keep_live, &live) {
            (Some(keep_live), Some(live)) => keep_live(&live.fields, &mut object),
            _ => false,
        };
        if let (Some(must_replace), Some(current)) = (self.hooks.must_replace, &live)
            && must_replace(&current.fields, &object)
        {
            delete_ignoring_absent(&api, kind.name(), &self.name).await?;
            changes.replaced(kind, &self.name);
            live_rv = None;
            // Gone: no hook below may patch it or plan from it.
            live = None;
        }
        let mut issued: Option<(String, OffsetDateTime)> = None;
        if let Some(adapt) = self.hooks.adapt_to_live {
            let whole = live.as_ref().and_then(|l| l.object.as_ref());
            match adapt(self.ctx, self.instance, object, whole).await? {
                Adapted::Foreign => return Ok(ChildApplied::default()),
                Adapted::Keep { valid_until } => {
                    count(self.ctx, kind, "unchanged");
                    self.remember(rendered, whole.map(|o| &o.metadata), Some(valid_until));
                    return Ok(ChildApplied {
                        applied: None,
                        valid_until: Some(valid_until),
                    });
                }
                Adapted::Issue {
                    object: adapted,
                    reason,
                    valid_until,
                } => {
                    object = *adapted;
                    issued = Some((reason, valid_until));
                }
            }
        }
        // It exists, but not as this TrustyAIService's, or made by another operator (the Go
        // operator's children name the TrustyAIService as their owner too): the apply takes
        // it over. A kind that adapts to the live object has judged whose it is (someone
        // else's is left alone): its apply takes nothing over.
        let taking_over = taken_over
            || self.hooks.adapt_to_live.is_none()
                && live.as_ref().is_some_and(|l| {
                    !wanted.shared && (l.owner.as_ref() != Some(&self.owner) || !l.applied_by_us)
                });
        if let (Some(prepare), Some(live)) = (self.hooks.prepare_live, &live)
            && let Some(patch) = prepare(self.instance, &live.with_version())
        {
            api.patch(
                &self.name,
                &apply::update_params(),
                &patch.to_kube_patch::<()>(),
            )
            .await
            .map_err(ReconcileError::kube("patching", kind.name(), &self.name))?;
            tracing::info!(kind = kind.name(), name = %self.name, "patched the live object before the apply");
        }
        let (applied, refused) = match apply::apply_taking_over(
            &api,
            kind.name(),
            &object,
            live_rv.clone(),
            taking_over,
        )
        .await
        {
            Ok(applied) => (applied, None),
            Err(error) => {
                let instead = match (self.hooks.on_refused, &live) {
                    (Some(on_refused), Some(live)) => {
                        on_refused(&error, &object, &live.with_version())
                    }
                    _ => None,
                };
                let Some((instead, refused)) = instead else {
                    return Err(error);
                };
                tracing::warn!(kind = kind.name(), name = %self.name, %refused, "applying what the live object allows");
                let applied =
                    apply::apply_taking_over(&api, kind.name(), &instead, live_rv, taking_over)
                        .await?;
                (applied, Some(refused))
            }
        };
        count(self.ctx, kind, applied.outcome.label());
        // Remembered only when the wanted object was applied: a refused one is tried again.
        if refused.is_none() {
            self.remember(
                rendered,
                Some(&applied.object.metadata),
                issued.as_ref().map(|(_, valid_until)| *valid_until),
            );
        }
        // Written through: a reconcile before the watch event sees what this apply left.
        let owner = self
            .declaration
            .watch
            .mapping
            .owner(&applied.object.metadata);
        let whole = if self.declaration.watch.projection.needs_objects() {
            serde_json::to_value(&applied.object).ok()
        } else {
            None
        };
        let entry = self
            .cache()
            .entry_for(&applied.object.metadata, whole.as_ref(), owner);
        if self.cache().listed() {
            self.cache()
                .written_through(self.namespace.as_deref(), &self.name, entry);
        }
        if !wanted.shared {
            match &issued {
                Some((reason, _)) => changes.issued(kind, &self.name, reason),
                None => changes.applied(kind, &self.name, applied.outcome),
            }
        }
        Ok(ChildApplied {
            valid_until: issued.map(|(_, valid_until)| valid_until),
            applied: Some((applied, refused)),
        })
    }

    /// The live object's resourceVersion and projected fields: from the cache when it
    /// knows; not read when surely absent (the cache has listed and does not show it, and
    /// this process never applied it, else the cache might only lag behind that apply).
    /// For a kind that adapts to the live object, always read: its hook judges the object's
    /// data, which no cache holds (and a Secret made by someone else just now is theirs).
    async fn live(
        &self,
        api: &Api<DynamicObject>,
        cached: &Cached,
    ) -> Result<Option<Live>, ReconcileError> {
        let kind = self.kind;
        let cached = if self.hooks.adapt_to_live.is_some() {
            &Cached::Unknown
        } else {
            cached
        };
        match cached {
            Cached::Present(_) => {
                let projected = self.declaration.watch.projection.needs_objects();
                // An entry without the fields the kind's checks read is read instead: an
                // empty projection would look like a selector or roleRef that differs.
                if let Some(entry) = self.cache().entry(self.namespace.as_deref(), &self.name)
                    && (entry.fields.is_some() || !projected)
                {
                    return Ok(Some(Live {
                        owner: entry.owner,
                        applied_by_us: entry.applied_by_us,
                        resource_version: entry.resource_version,
                        fields: entry.fields.map(|f| f.value()).unwrap_or_default(),
                        object: None,
                    }));
                }
            }
            Cached::Absent if !self.children().applied.knows(&self.owner, kind, &self.name) => {
                return Ok(None);
            }
            Cached::Absent | Cached::Unknown => {}
        }
        let found = api.get_opt(&self.name).await.map_err(ReconcileError::kube(
            "reading",
            kind.name(),
            &self.name,
        ))?;
        Ok(found.map(|object| {
            let value = serde_json::to_value(&object).unwrap_or_default();
            Live {
                owner: self.declaration.watch.mapping.owner(&object.metadata),
                applied_by_us: crate::controller::apply::applied_by_us(&object.metadata),
                resource_version: object.metadata.resource_version.clone(),
                fields: self
                    .declaration
                    .watch
                    .projection
                    .project(&value)
                    .unwrap_or_default(),
                object: Some(object),
            }
        }))
    }
}

/// What the replacement check and the outcome need of the live object.
struct Live {
    /// The TrustyAIService it belongs to, per the kind's mapping.
    owner: Option<Owner>,
    /// Whether this operator has applied it before.
    applied_by_us: bool,
    resource_version: Option<String>,
    fields: serde_json::Value,
    /// The whole object, when it was read (always, for a kind that adapts to it).
    object: Option<DynamicObject>,
}

impl Live {
    /// Its projected fields with `metadata.resourceVersion`, for the hooks that patch it.
    fn with_version(&self) -> serde_json::Value {
        let mut value = if self.fields.is_object() {
            self.fields.clone()
        } else {
            serde_json::json!({})
        };
        if let (Some(object), Some(rv)) = (value.as_object_mut(), &self.resource_version) {
            let meta = object
                .entry("metadata")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("resourceVersion".to_owned(), rv.clone().into());
            }
        }
        value
    }
}

/// Deletes the objects of `kind` that belong to `owner` but are not in `wanted`, as
/// far as its cache knows (a cache that has not listed deletes nothing: the next reconcile
/// will).
async fn remove_orphans(
    ctx: &Context,
    kind: Kind,
    resource: &ApiResource,
    owner: &Owner,
    wanted: &HashSet<(String, String)>,
    changes: &mut Changes,
) -> Result<(), ReconcileError> {
    let Some(owned) = ctx.children.cache(kind).owned_by(owner) else {
        return Ok(());
    };
    for (namespace, name) in owned {
        if wanted.contains(&(namespace.clone(), name.clone())) {
            continue;
        }
        let namespace = kind
            .declaration()
            .watch
            .namespaced
            .then_some(namespace.as_str());
        let api = api(&ctx.client, resource, namespace);
        delete_ignoring_absent(&api, kind.name(), &name).await?;
        // Written through, like the applies: a reconcile before the watch event would delete
        // it again and report a second deletion.
        ctx.children.cache(kind).deleted(namespace, &name);
        tracing::info!(kind = kind.name(), name, "deleted a child no longer wanted");
        count(ctx, kind, "deleted");
        changes.deleted(kind, &name);
    }
    Ok(())
}
