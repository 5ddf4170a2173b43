//! What a watch knows about the objects of one kind, without asking the API server.
//!
//! One [`KindCache`] per watched kind, fed by its watch ([`super::watches`]): for each object
//! its version (as the kind's [`Tracking`] defines it), the TrustyAIService it belongs to, and
//! the few fields the reconciler reads (a [`Projection`]; a Deployment's status and selector,
//! a Route's admission). Nothing else is kept: no specs, no Secret data, no managedFields, so
//! the memory a TrustyAIService costs stays small.
//!
//! Until the watch has listed (or after its API went away) the cache answers
//! [`Cached::Unknown`] and the caller asks the API server.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::memory::{Owner, Tracking};

/// What a cache says about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    /// The watch has not finished its first list (or its API is not served, or the object
    /// lacks what the tracking needs): ask the API server.
    Unknown,
    /// The object does not exist.
    Absent,
    /// The object's version as its kind's [`Tracking`] defines it.
    Present(String),
}

impl Cached {
    /// The version, when present.
    pub fn version(&self) -> Option<&str> {
        match self {
            Self::Present(version) => Some(version),
            Self::Unknown | Self::Absent => None,
        }
    }

    /// Whether the object exists, when the cache can tell.
    pub fn exists(&self) -> Option<bool> {
        match self {
            Self::Present(_) => Some(true),
            Self::Absent => Some(false),
            Self::Unknown => None,
        }
    }
}

/// The fields of an object kept beside its version: JSON pointers (e.g. `/status`), each
/// copied to the same place of a sparse object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection(pub &'static [&'static str]);

impl Projection {
    /// Nothing beyond the metadata the cache always keeps.
    pub const NONE: Self = Self(&[]);

    /// Whether the watch needs whole objects (else a metadata-only watch suffices).
    pub fn needs_objects(self) -> bool {
        !self.0.is_empty()
    }

    /// The sparse copy of `object`'s projected fields.
    pub fn project(self, object: &Value) -> Option<Value> {
        if self.0.is_empty() {
            return None;
        }
        let mut out = Value::Object(serde_json::Map::new());
        for pointer in self.0 {
            if let Some(value) = object.pointer(pointer) {
                insert_at(&mut out, pointer, value.clone());
            }
        }
        trim_conditions(&mut out);
        Some(out)
    }
}

/// Projected fields as they are kept: compact JSON text, a fraction of what the same
/// fields weigh as a [`Value`] tree (a map and a string allocation per member). Every read
/// turns them into a typed object anyway, which parsing the text does as cheaply as cloning
/// a tree would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projected(Arc<str>);

impl Projected {
    /// Keeps `fields`.
    pub fn keep(fields: &Value) -> Self {
        Self(fields.to_string().into())
    }

    /// The fields, as a JSON value.
    pub fn value(&self) -> Value {
        // Written by `keep` from a `Value`, so it parses; `Null` would only read as absent.
        serde_json::from_str(&self.0).unwrap_or_default()
    }
}

/// Keeps only `type` and `status` of every condition below `value`: all the reconciler reads
/// of them, while their messages and timestamps are most of what a status weighs.
fn trim_conditions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "conditions"
                    && let Value::Array(conditions) = child
                {
                    for condition in conditions.iter_mut() {
                        if let Value::Object(fields) = condition {
                            fields.retain(|k, _| k == "type" || k == "status");
                        }
                    }
                } else {
                    trim_conditions(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(trim_conditions),
        _ => {}
    }
}

/// Sets `value` at `pointer` in `target`, creating the objects on the way.
fn insert_at(target: &mut Value, pointer: &str, value: Value) {
    // Given away at the last step (the loop cannot tell the compiler it is the last).
    let mut value = Some(value);
    let mut keys = pointer
        .split('/')
        .skip(1)
        .map(|key| key.replace("~1", "/").replace("~0", "~"))
        .peekable();
    let mut current = target;
    while let Some(key) = keys.next() {
        let next = keys.peek();
        let last = next.is_none();
        let next_is_index = next.is_some_and(|next| next.parse::<usize>().is_ok());
        // What a missing step holds: an array when the next step is an index.
        let empty = || {
            if next_is_index {
                Value::Array(Vec::new())
            } else {
                Value::Object(serde_json::Map::new())
            }
        };
        current = match current {
            Value::Object(map) if last => {
                map.insert(key, value.take().unwrap_or_default());
                return;
            }
            Value::Object(map) => map.entry(key).or_insert_with(empty),
            // Indices are projected in order (`…/0/…` before `…/1/…`), so an item is either
            // there or the next one.
            Value::Array(items) => match key.parse::<usize>() {
                Ok(index) if index < items.len() => match items.get_mut(index) {
                    Some(item) if last => {
                        *item = value.take().unwrap_or_default();
                        return;
                    }
                    Some(item) => item,
                    None => return,
                },
                Ok(index) if index == items.len() => {
                    items.push(if last {
                        value.take().unwrap_or_default()
                    } else {
                        empty()
                    });
                    if last {
                        return;
                    }
                    match items.last_mut() {
                        Some(item) => item,
                        None => return,
                    }
                }
                _ => return,
            },
            _ => return,
        };
    }
}

/// One cached object.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its version, per the kind's tracking; `None` when the object lacks what is tracked.
    pub version: Option<String>,
    /// Its resourceVersion (what an apply's answer is compared with).
    pub resource_version: Option<String>,
    /// The TrustyAIService it belongs to, per the kind's mapping.
    pub owner: Option<Owner>,
    /// The projected fields.
    pub fields: Option<Projected>,
    /// Whether this operator has applied it (its field manager is among the object's): one
    /// that another operator made and this one never applied is taken over by the next apply.
    pub applied_by_us: bool,
}

/// `(namespace, name)`; the namespace is empty for cluster-scoped kinds.
type Key = (String, String);

#[derive(Debug, Default)]
struct State {
    listed: bool,
    objects: HashMap<Key, Entry>,
    /// Objects received since the current (re)list began, swapped in when it ends.
    relisting: Option<HashMap<Key, Entry>>,
}

/// The cache of one kind.
#[derive(Debug)]
pub struct KindCache {
    tracking: Tracking,
    projection: Projection,
    state: RwLock<State>,
}

impl KindCache {
    /// An empty cache (it answers [`Cached::Unknown`] until its first list is complete).
    pub fn new(tracking: Tracking, projection: Projection) -> Self {
        Self {
            tracking,
            projection,
            state: RwLock::new(State::default()),
        }
    }

    /// What the cache says about `name` in `namespace` (`None` for cluster-scoped kinds).
    pub fn lookup(&self, namespace: Option<&str>, name: &str) -> Cached {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        if !state.listed {
            return Cached::Unknown;
        }
        match state.objects.get(&key(namespace, name)) {
            None => Cached::Absent,
            Some(entry) => entry
                .version
                .clone()
                .map_or(Cached::Unknown, Cached::Present),
        }
    }

    /// The cached entry of `name`; `None` when absent or not known.
    pub fn entry(&self, namespace: Option<&str>, name: &str) -> Option<Entry> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        state.objects.get(&key(namespace, name)).cloned()
    }

    /// Whether the cache has listed its objects.
    pub fn listed(&self) -> bool {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .listed
    }

    /// The names of the objects that belong to `owner`; `None` while the cache cannot tell.
    pub fn owned_by(&self, owner: &Owner) -> Option<Vec<(String, String)>> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        state.listed.then(|| {
            state
                .objects
                .iter()
                .filter(|(_, entry)| entry.owner.as_ref() == Some(owner))
                .map(|(key, _)| key.clone())
                .collect()
        })
    }

    /// Whether some object exists in `namespace`; `None` while the cache cannot tell.
    pub fn any_in(&self, namespace: &str) -> Option<bool> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        state
            .listed
            .then(|| state.objects.keys().any(|(ns, _)| ns == namespace))
    }

    /// The entry of an object with metadata `meta` (and, for a kind with a projection, the
    /// whole `object`), `owner` being what the kind's mapping says.
    pub fn entry_for(
        &self,
        meta: &ObjectMeta,
        object: Option<&Value>,
        owner: Option<Owner>,
    ) -> Entry {
        Entry {
            version: self.tracking.version(meta),
            resource_version: meta.resource_version.clone(),
            owner,
            fields: object
                .and_then(|o| self.projection.project(o))
                .map(|fields| Projected::keep(&fields)),
            applied_by_us: crate::controller::apply::applied_by_us(meta),
        }
    }

    /// A (re)list begins: the objects that follow replace the current ones when it is done.
    pub fn begin_list(&self) {
        self.state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .relisting = Some(HashMap::new());
    }

    /// An object of the (re)list.
    pub fn listed_object(&self, namespace: Option<&str>, name: &str, entry: Entry) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let key = key(namespace, name);
        match state.relisting.as_mut() {
            Some(relisting) => {
                relisting.insert(key, entry);
            }
            None => {
                state.objects.insert(key, entry);
            }
        }
    }

    /// The (re)list is complete.
    pub fn end_list(&self) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(objects) = state.relisting.take() {
            state.objects = objects;
        }
        state.listed = true;
    }

    /// An object was created or changed.
    pub fn applied(&self, namespace: Option<&str>, name: &str, entry: Entry) {
        self.state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .objects
            .insert(key(namespace, name), entry);
    }

    /// What an apply answered, written through so that a reconcile before the watch event sees
    /// it; never over a newer version the watch already brought. The watch can deliver the
    /// apply's own event and a later change (the Deployment controller's first status) before
    /// the apply's answer is written here, and nothing would correct an older answer put over
    /// them: no later event comes, and a reconcile would judge the object by what it was.
    pub fn written_through(&self, namespace: Option<&str>, name: &str, entry: Entry) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let key = key(namespace, name);
        if let Some(cached) = state.objects.get(&key)
            && !is_newer(
                entry.resource_version.as_deref(),
                cached.resource_version.as_deref(),
            )
        {
            return;
        }
        state.objects.insert(key, entry);
    }

    /// An object was deleted.
    pub fn deleted(&self, namespace: Option<&str>, name: &str) {
        self.state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .objects
            .remove(&key(namespace, name));
    }

    /// The API went away (or the watch stopped): the cache can no longer tell.
    pub fn reset(&self) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        *state = State::default();
    }
}

/// Whether resourceVersion `written` is newer than `cached`. The API server's are etcd
/// revisions, decimal and increasing; where either is not one, the cached entry (from the
/// watch, which delivers in order) is kept: its later events correct it.
fn is_newer(written: Option<&str>, cached: Option<&str>) -> bool {
    let revision = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
    matches!((revision(written), revision(cached)), (Some(w), Some(c)) if w > c)
}

fn key(namespace: Option<&str>, name: &str) -> Key {
    (namespace.unwrap_or_default().to_owned(), name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::DynamicObject;
    use serde_json::json;

    fn object(name: &str, rv: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "generation": 1},
            "spec": {"replicas": 1, "template": {"big": "x"}},
            "status": {"readyReplicas": 1}
        }))
        .expect("object")
    }

    fn cache() -> KindCache {
        KindCache::new(
            Tracking::ResourceVersion,
            Projection(&["/spec/replicas", "/status"]),
        )
    }

    fn put(cache: &KindCache, name: &str, rv: &str, owner: Option<Owner>) {
        let object = object(name, rv);
        let value = serde_json::to_value(&object).expect("value");
        let entry = cache.entry_for(&object.metadata, Some(&value), owner);
        cache.listed_object(Some("ns"), name, entry);
    }

    fn entry(cache: &KindCache, rv: &str) -> Entry {
        let object = object("tas", rv);
        let value = serde_json::to_value(&object).expect("value");
        cache.entry_for(&object.metadata, Some(&value), None)
    }

    #[test]
    fn an_apply_answer_never_replaces_a_newer_watch_event() {
        let cache = cache();
        cache.begin_list();
        cache.end_list();
        // The watch brought the apply's own version and then the controller's status (12),
        // before the apply's answer (11) was written through.
        cache.applied(Some("ns"), "tas", entry(&cache, "12"));
        cache.written_through(Some("ns"), "tas", entry(&cache, "11"));
        let kept = cache.entry(Some("ns"), "tas").expect("cached");
        assert_eq!(kept.resource_version.as_deref(), Some("12"));
        // An answer ahead of the watch goes in; the watch's later events replace it as usual.
        cache.written_through(Some("ns"), "tas", entry(&cache, "13"));
        let ahead = cache.entry(Some("ns"), "tas").expect("cached");
        assert_eq!(ahead.resource_version.as_deref(), Some("13"));
        // Where versions are not revisions, the watch's entry stays.
        cache.written_through(Some("ns"), "tas", entry(&cache, "opaque"));
        let opaque = cache.entry(Some("ns"), "tas").expect("cached");
        assert_eq!(opaque.resource_version.as_deref(), Some("13"));
        // Nothing cached yet: the answer is written.
        cache.written_through(Some("ns"), "other", entry(&cache, "5"));
        assert!(cache.entry(Some("ns"), "other").is_some());
    }

    #[test]
    fn each_projected_pointer_lands_at_the_same_place() {
        let projection = Projection(&[
            "/metadata/annotations/example.com~1a",
            "/spec/containers/0/name",
            "/spec/containers/0/image",
            "/spec/containers/1/name",
            "/spec/containers/2/name",
        ]);
        let object = json!({
            "metadata": {"annotations": {"example.com/a": "x", "b": "y"}},
            "spec": {"containers": [{"name": "one", "image": "i", "env": []}, {"name": "two"}]}
        });
        let projected = projection.project(&object).expect("projected");
        assert_eq!(
            projected,
            json!({
                "metadata": {"annotations": {"example.com/a": "x"}},
                "spec": {"containers": [{"name": "one", "image": "i"}, {"name": "two"}]}
            })
        );
        assert_eq!(
            projected.pointer("/metadata/annotations/example.com~1a"),
            Some(&json!("x"))
        );
    }

    #[test]
    fn unknown_until_listed_then_answers() {
        let cache = cache();
        assert_eq!(cache.lookup(Some("ns"), "a"), Cached::Unknown);
        assert_eq!(cache.any_in("ns"), None);
        cache.begin_list();
        put(&cache, "a", "5", None);
        assert_eq!(cache.lookup(Some("ns"), "a"), Cached::Unknown);
        cache.end_list();
        assert_eq!(cache.lookup(Some("ns"), "a"), Cached::Present("5".into()));
        assert_eq!(cache.lookup(Some("other"), "a"), Cached::Absent);
        assert_eq!(cache.any_in("ns"), Some(true));
        assert_eq!(cache.any_in("other"), Some(false));
        cache.deleted(Some("ns"), "a");
        assert_eq!(cache.lookup(Some("ns"), "a"), Cached::Absent);
        cache.reset();
        assert_eq!(cache.lookup(Some("ns"), "a"), Cached::Unknown);
    }

    #[test]
    fn a_relist_replaces_what_was_there() {
        let cache = cache();
        cache.begin_list();
        put(&cache, "gone", "1", None);
        cache.end_list();
        cache.begin_list();
        put(&cache, "new", "2", None);
        // Still answering from the previous list while the new one runs.
        assert_eq!(
            cache.lookup(Some("ns"), "gone"),
            Cached::Present("1".into())
        );
        cache.end_list();
        assert_eq!(cache.lookup(Some("ns"), "gone"), Cached::Absent);
        assert_eq!(cache.lookup(Some("ns"), "new"), Cached::Present("2".into()));
    }

    #[test]
    fn keeps_only_the_projected_fields() {
        let cache = cache();
        let object = object("a", "1");
        let value = serde_json::to_value(&object).expect("value");
        let entry = cache.entry_for(&object.metadata, Some(&value), None);
        assert_eq!(
            entry.fields.map(|f| f.value()),
            Some(json!({"spec": {"replicas": 1}, "status": {"readyReplicas": 1}}))
        );
        let bare = KindCache::new(Tracking::ResourceVersion, Projection::NONE);
        assert!(
            bare.entry_for(&object.metadata, Some(&value), None)
                .fields
                .is_none()
        );
    }

    #[test]
    fn projected_conditions_keep_only_what_the_reconciler_reads() {
        let projection = Projection(&["/status"]);
        let route = json!({"status": {"ingress": [{"host": "h", "conditions": [
            {"type": "Admitted", "status": "True", "lastTransitionTime": "t", "message": "long"}]}]}});
        assert_eq!(
            projection.project(&route),
            Some(json!({"status": {"ingress": [{"host": "h",
                "conditions": [{"type": "Admitted", "status": "True"}]}]}}))
        );
    }

    #[test]
    fn owned_by_lists_the_owners_objects() {
        let cache = cache();
        let owner = Owner::new("ns", "tas");
        assert_eq!(cache.owned_by(&owner), None);
        cache.begin_list();
        put(&cache, "mine", "1", Some(owner.clone()));
        put(&cache, "theirs", "1", Some(Owner::new("ns", "other")));
        put(&cache, "nobodys", "1", None);
        cache.end_list();
        assert_eq!(
            cache.owned_by(&owner),
            Some(vec![("ns".to_owned(), "mine".to_owned())])
        );
    }
}
