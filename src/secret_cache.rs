//! Which Secrets exist, for the validating webhook's "database credentials Secret does not exist
//! yet" warning, answered from memory so that admission never waits on an API call.
//!
//! The answer comes from the process-wide Secret watch
//! ([`crate::controller::children::process_watches`]): Secret *metadata* only, cluster-wide,
//! because a TrustyAIService may live in any namespace. It is the same watch and cache the
//! controller reads, so the process lists and watches Secrets once. Secret data never reaches
//! the process, and of the metadata the cache keeps only the key, the resourceVersion and an
//! owner reference to a TrustyAIService: annotations can hold the data after all (`kubectl
//! apply` copies the whole Secret into `kubectl.kubernetes.io/last-applied-configuration`).
//!
//! Until the first list has completed the cache says nothing ([`SecretCache::exists`] returns
//! `None`), and the webhook then skips the warning rather than warn about a Secret it has not
//! seen yet.

use std::sync::Arc;

use trustyai_webhooks::SecretLookup;

use crate::controller::children::cache::{Cached, KindCache};
use crate::controller::children::declaration::Kind;
use crate::controller::children::process_watches::ProcessWatches;

/// The names of every Secret in the cluster, kept current by the process-wide Secret watch.
#[derive(Clone)]
pub struct SecretCache {
    secrets: Arc<KindCache>,
}

impl std::fmt::Debug for SecretCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCache")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl SecretCache {
    /// The Secret cache of `watches` (filled once they run).
    pub fn of(watches: &ProcessWatches) -> Option<SecretCache> {
        watches.cache(Kind::Secret).map(|secrets| SecretCache {
            secrets: secrets.clone(),
        })
    }

    /// Whether the first list has completed.
    pub fn is_ready(&self) -> bool {
        self.secrets.listed()
    }

    /// `Some(true)` when Secret `namespace/name` exists, `Some(false)` when it does not, `None`
    /// while the cache is not ready.
    pub fn exists(&self, namespace: &str, name: &str) -> Option<bool> {
        match self.secrets.lookup(Some(namespace), name) {
            Cached::Unknown if !self.is_ready() => None,
            Cached::Absent => Some(false),
            Cached::Present(_) | Cached::Unknown => Some(true),
        }
    }
}

impl SecretLookup for SecretCache {
    fn exists(&self, namespace: &str, name: &str) -> Option<bool> {
        SecretCache::exists(self, namespace, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectMeta;

    fn meta(namespace: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        }
    }

    /// A Secret cache over fresh process watches, and the Secret kind cache their watch fills.
    fn unlisted() -> (SecretCache, Arc<KindCache>) {
        let watches = ProcessWatches::default();
        let cache = SecretCache::of(&watches).expect("the process watches Secrets");
        let secrets = watches.cache(Kind::Secret).expect("a Secret cache").clone();
        (cache, secrets)
    }

    /// Starts a list of `secrets` and lists Secret `ns/creds` in it, leaving the list open.
    fn listing_creds(secrets: &KindCache) {
        secrets.begin_list();
        let entry = secrets.entry_for(&meta("ns", "creds"), None, None);
        secrets.listed_object(Some("ns"), "creds", entry);
    }

    /// A cache whose first list, of Secret `ns/creds` alone, has completed.
    fn listed_with_creds() -> (SecretCache, Arc<KindCache>) {
        let (cache, secrets) = unlisted();
        listing_creds(&secrets);
        secrets.end_list();
        (cache, secrets)
    }

    #[test]
    fn lookups_say_nothing_until_the_first_list_completes() {
        let (cache, secrets) = unlisted();
        assert_eq!(cache.exists("ns", "creds"), None);
        listing_creds(&secrets);
        assert_eq!(
            cache.exists("ns", "creds"),
            None,
            "not until the list is complete"
        );
    }

    #[test]
    fn a_listed_secret_matches_only_its_own_namespaced_name() {
        let (cache, _secrets) = listed_with_creds();
        assert_eq!(cache.exists("ns", "creds"), Some(true));
        assert_eq!(cache.exists("other", "creds"), Some(false));
        assert_eq!(cache.exists("ns", "other"), Some(false));
    }

    #[test]
    fn a_deleted_secret_is_reported_absent() {
        let (cache, secrets) = listed_with_creds();
        secrets.deleted(Some("ns"), "creds");
        assert_eq!(cache.exists("ns", "creds"), Some(false));
    }
}
