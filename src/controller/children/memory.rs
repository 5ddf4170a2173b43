//! What the operator remembers of its own applies.
//!
//! Every apply records a fingerprint of what was applied with the version the API server
//! answered. A child whose cached version ([`super::cache`]) is still the recorded one, and
//! whose rendering still has the recorded fingerprint, is exactly as this operator left it:
//! applying it again would be a no-op, so the reconcile skips the read and the apply. Any
//! change by anyone moves the version, and its watch event reconciles the owner, which then
//! applies again: drift is still corrected, only no-op round trips go. What an apply made that
//! stands only until a time (a serving certificate, until it is due) is remembered with that
//! time ([`ValidUntil`]), and is current only before it.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use trustyai_certs::time::OffsetDateTime;

use super::cache::Cached;
use super::declaration::Kind;

/// Prefix of the annotations the Deployment controller writes on Deployments.
const DEPLOYMENT_CONTROLLER_PREFIX: &str = "deployment.kubernetes.io/";

/// Which changes of a child mean its apply must be repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracking {
    /// Any change: the version is the resourceVersion.
    ResourceVersion,
    /// Changes of the spec (`metadata.generation`) and of labels, annotations and owner
    /// references; not of the status. For Deployments, whose status moves with every pod,
    /// and Routes, whose status a router writes: each would otherwise cost a no-op apply.
    GenerationAndMetadata,
}

impl Tracking {
    /// The version of an object with metadata `meta`; `None` when it lacks what is tracked.
    pub fn version(self, meta: &ObjectMeta) -> Option<String> {
        match self {
            Self::ResourceVersion => meta.resource_version.clone(),
            Self::GenerationAndMetadata => {
                let generation = meta.generation?;
                // The Deployment controller's own annotations (the revision) change on every
                // rollout and are none of this operator's business.
                let annotations: Vec<_> = meta
                    .annotations
                    .iter()
                    .flatten()
                    .filter(|(key, _)| !key.starts_with(DEPLOYMENT_CONTROLLER_PREFIX))
                    .collect();
                let digest =
                    fingerprint(&(&meta.labels, annotations, &meta.owner_references)).ok()?;
                Some(format!("{generation}/{digest:x}"))
            }
        }
    }
}

/// A stable digest of a rendered object (stable within the process, which is all the memory
/// below needs: it starts empty).
pub fn fingerprint<T: Serialize>(object: &T) -> Result<u64, serde_json::Error> {
    let bytes = serde_json::to_vec(object)?;
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    Ok(hasher.finish())
}

/// The TrustyAIService a child belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Owner {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl Owner {
    /// The TrustyAIService `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The TrustyAIService being rendered.
    pub fn of(instance: &crate::controller::resources::Instance<'_>) -> Self {
        Self::new(instance.namespace(), instance.name())
    }
}

/// Until when what an apply left stands without a look at the live object: `None` for what is
/// rendered (until the object or its rendering changes), the time for what was issued (a
/// certificate, until it is due).
pub type ValidUntil = Option<OffsetDateTime>;

/// One child of an owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Child {
    kind: Kind,
    name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Record<V> {
    fingerprint: u64,
    version: String,
    value: V,
}

/// The last apply (or check) of each child: a fingerprint of its inputs, the resourceVersion
/// it produced or saw, and what was learnt then (`V`; nothing for plain applies).
#[derive(Debug)]
pub struct AppliedMemory<V = ()> {
    by_owner: Mutex<HashMap<Owner, HashMap<Child, Record<V>>>>,
}

impl<V> Default for AppliedMemory<V> {
    fn default() -> Self {
        Self {
            by_owner: Mutex::new(HashMap::new()),
        }
    }
}

impl<V: Clone> AppliedMemory<V> {
    /// What was learnt when `cached` showed the child as it is now and its inputs had
    /// `fingerprint`; `None` when the child moved on, the inputs changed, or nothing is known.
    pub fn current(
        &self,
        owner: &Owner,
        kind: Kind,
        name: &str,
        fingerprint: u64,
        cached: &Cached,
    ) -> Option<V> {
        let live = cached.version()?;
        let by_owner = self.by_owner.lock().unwrap_or_else(PoisonError::into_inner);
        by_owner
            .get(owner)
            .and_then(|children| {
                children.get(&Child {
                    kind,
                    name: name.to_owned(),
                })
            })
            .filter(|r| r.fingerprint == fingerprint && r.version == live)
            .map(|r| r.value.clone())
    }

    /// Whether anything is remembered about the child.
    pub fn knows(&self, owner: &Owner, kind: Kind, name: &str) -> bool {
        self.by_owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(owner)
            .is_some_and(|children| {
                children.contains_key(&Child {
                    kind,
                    name: name.to_owned(),
                })
            })
    }

    /// Records an apply or check that left the child at `version`; without one, forgets the
    /// child instead.
    pub fn record(
        &self,
        owner: &Owner,
        kind: Kind,
        name: &str,
        fingerprint: u64,
        version: Option<&str>,
        value: V,
    ) {
        let mut by_owner = self.by_owner.lock().unwrap_or_else(PoisonError::into_inner);
        let children = by_owner.entry(owner.clone()).or_default();
        let child = Child {
            kind,
            name: name.to_owned(),
        };
        match version {
            Some(rv) => {
                children.insert(
                    child,
                    Record {
                        fingerprint,
                        version: rv.to_owned(),
                        value,
                    },
                );
            }
            None => {
                children.remove(&child);
            }
        }
    }

    /// Forgets every child of `owner` (it is being deleted).
    pub fn forget_owner(&self, owner: &Owner) {
        self.by_owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(owner);
    }

    /// How many owners are remembered.
    #[cfg(test)]
    pub fn owners(&self) -> usize {
        self.by_owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Whether what an apply left, valid until `valid_until`, still stands at `now`: with
/// [`AppliedMemory::current`], the skip rule of the apply path.
pub fn stands_at(valid_until: ValidUntil, now: OffsetDateTime) -> bool {
    valid_until.is_none_or(|until| now < until)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use kube::core::PartialObjectMeta;
    use trustyai_certs::time;

    fn owner() -> Owner {
        Owner::new("ns", "tas")
    }

    fn meta(name: &str, rv: Option<&str>) -> PartialObjectMeta<Service> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                resource_version: rv.map(str::to_owned),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    #[test]
    fn a_record_is_current_only_for_the_same_rendering_at_the_cached_version() {
        let memory = AppliedMemory::<()>::default();
        let known = |kind: Kind, name: &str, fingerprint: u64, cached: &Cached| {
            memory
                .current(&owner(), kind, name, fingerprint, cached)
                .is_some()
        };
        let present = Cached::Present("7".to_owned());
        assert!(!known(Kind::Service, "tas", 1, &present));
        memory.record(&owner(), Kind::Service, "tas", 1, Some("7"), ());
        assert!(known(Kind::Service, "tas", 1, &present));
        // Another rendering, another object, another kind: not current.
        assert!(!known(Kind::Service, "tas", 2, &present));
        assert!(!known(Kind::Service, "tas-tls", 1, &present));
        assert!(!known(Kind::ConfigMap, "tas", 1, &present));
        // Someone changed it, or the cache cannot tell, or it is gone: apply again.
        let moved = Cached::Present("8".to_owned());
        assert!(!known(Kind::Service, "tas", 1, &moved));
        assert!(!known(Kind::Service, "tas", 1, &Cached::Unknown));
        assert!(!known(Kind::Service, "tas", 1, &Cached::Absent));
    }

    /// A memory holding the Service `tas` of [`owner`], applied with fingerprint 1 at version 7.
    fn remembering_the_service() -> AppliedMemory<()> {
        let memory = AppliedMemory::<()>::default();
        memory.record(&owner(), Kind::Service, "tas", 1, Some("7"), ());
        memory
    }

    /// What `memory` holds for the Service `tas` at fingerprint 1 while the cache shows version 7.
    fn current_service(memory: &AppliedMemory<()>) -> Option<()> {
        memory.current(
            &owner(),
            Kind::Service,
            "tas",
            1,
            &Cached::Present("7".to_owned()),
        )
    }

    #[test]
    fn an_answer_without_resource_version_forgets_the_child() {
        let memory = remembering_the_service();
        memory.record(&owner(), Kind::Service, "tas", 1, None, ());
        assert_eq!(current_service(&memory), None);
    }

    #[test]
    fn a_forgotten_owners_children_are_forgotten() {
        let memory = remembering_the_service();
        assert_eq!(memory.owners(), 1);
        memory.forget_owner(&owner());
        assert_eq!(memory.owners(), 0);
        assert_eq!(current_service(&memory), None);
    }

    #[test]
    fn what_was_learnt_comes_back_while_current() {
        let memory = AppliedMemory::<u32>::default();
        let present = Cached::Present("7".to_owned());
        let current =
            |fingerprint| memory.current(&owner(), Kind::Secret, "tas-tls", fingerprint, &present);
        memory.record(&owner(), Kind::Secret, "tas-tls", 9, Some("7"), 42);
        assert_eq!(current(9), Some(42));
        assert_eq!(current(8), None);
    }

    #[test]
    fn what_stands_until_a_time_is_current_only_before_it() {
        let memory = AppliedMemory::<ValidUntil>::default();
        let present = Cached::Present("7".to_owned());
        let now = OffsetDateTime::now_utc();
        let at = |when| {
            memory
                .current(&owner(), Kind::Secret, "tas-tls", 9, &present)
                .filter(|valid_until| stands_at(*valid_until, when))
        };
        memory.record(&owner(), Kind::Secret, "tas-tls", 9, Some("7"), Some(now));
        assert_eq!(at(now - time::Duration::SECOND), Some(Some(now)));
        assert_eq!(at(now), None);
        // What is rendered stands until it or its rendering changes.
        memory.record(&owner(), Kind::Secret, "tas-tls", 9, Some("7"), None);
        assert_eq!(at(now + time::Duration::DAY), Some(None));
    }

    #[test]
    fn knows_what_was_recorded() {
        let memory = AppliedMemory::<()>::default();
        assert!(!memory.knows(&owner(), Kind::Service, "tas"));
        memory.record(&owner(), Kind::Service, "tas", 1, Some("7"), ());
        assert!(memory.knows(&owner(), Kind::Service, "tas"));
        assert!(!memory.knows(&owner(), Kind::Service, "tas-tls"));
    }

    #[test]
    fn generation_tracking_ignores_status_but_not_metadata() {
        let tracking = Tracking::GenerationAndMetadata;
        let mut meta = ObjectMeta {
            generation: Some(2),
            resource_version: Some("10".to_owned()),
            labels: Some([("app".to_owned(), "tas".to_owned())].into()),
            ..ObjectMeta::default()
        };
        let version = tracking.version(&meta).expect("a version");
        // A status update: new resourceVersion, same generation and metadata.
        meta.resource_version = Some("11".to_owned());
        assert_eq!(tracking.version(&meta), Some(version.clone()));
        assert_ne!(
            Tracking::ResourceVersion.version(&meta),
            Some("10".to_owned())
        );
        // A label edited by someone, or a spec change: another version.
        let mut relabelled = meta.clone();
        relabelled.labels = Some([("app".to_owned(), "other".to_owned())].into());
        assert_ne!(tracking.version(&relabelled), Some(version.clone()));
        let mut annotated = meta.clone();
        annotated.annotations = Some([("a".to_owned(), "b".to_owned())].into());
        assert_ne!(tracking.version(&annotated), Some(version.clone()));
        // The Deployment controller's revision annotation is not ours to track.
        let mut revised = meta.clone();
        revised.annotations = Some(
            [(
                "deployment.kubernetes.io/revision".to_owned(),
                "2".to_owned(),
            )]
            .into(),
        );
        assert_eq!(tracking.version(&revised), Some(version.clone()));
        meta.generation = Some(3);
        assert_ne!(tracking.version(&meta), Some(version));
        meta.generation = None;
        assert_eq!(tracking.version(&meta), None);
    }

    #[test]
    fn fingerprints_follow_the_content() {
        let a = meta("a", Some("1"));
        let b = meta("b", Some("1"));
        let fa = fingerprint(&a).expect("serializes");
        assert_eq!(fa, fingerprint(&a.clone()).expect("serializes"));
        assert_ne!(fa, fingerprint(&b).expect("serializes"));
    }
}
