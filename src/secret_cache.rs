//! Which Secrets exist, for the validating webhook's "database credentials Secret does not exist
//! yet" warning, answered from memory so that admission never waits on an API call.
//!
//! The cache is a reflector over Secret *metadata* only (`PartialObjectMeta<Secret>`, fetched
//! with the API server's `as=PartialObjectMetadata` representation), cluster-wide, because a
//! TrustyAIService may live in any namespace. Secret data never reaches the process. Of the
//! metadata only the name and namespace are kept: annotations can hold the data after all
//! (`kubectl apply` copies the whole Secret into `kubectl.kubernetes.io/last-applied-configuration`),
//! and labels and managedFields would only cost memory.
//!
//! Until the first list has completed the cache says nothing ([`SecretCache::exists`] returns
//! `None`), and the webhook then skips the warning rather than warn about a Secret it has not
//! seen yet.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use trustyai_webhooks::SecretLookup;

/// Why the cache's reflector stopped. It retries API errors with backoff forever, so this only
/// happens when the watch stream ends, which it is not supposed to.
#[derive(Debug, thiserror::Error)]
pub enum SecretCacheError {
    #[error("the Secret metadata watch ended")]
    StreamEnded,
}

/// The names of every Secret in the cluster, kept current by a watch.
#[derive(Clone)]
pub struct SecretCache {
    store: Store<PartialObjectMeta<Secret>>,
    /// Set once the first full list is in the store. Kept separately because [`Store`] only
    /// offers an async wait, and the lookup runs synchronously inside a request handler.
    ready: Arc<AtomicBool>,
}

impl std::fmt::Debug for SecretCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCache")
            .field("ready", &self.is_ready())
            .field("secrets", &self.store.state().len())
            .finish()
    }
}

impl SecretCache {
    /// The cache and the reflector that fills it. The cache is empty (and not ready) until the
    /// returned future is polled; run it as a supervised task.
    pub fn start(
        client: Client,
    ) -> (
        SecretCache,
        impl Future<Output = Result<(), SecretCacheError>> + Send + 'static,
    ) {
        let (store, writer) = reflector::store();
        let ready = Arc::new(AtomicBool::new(false));
        let cache = SecretCache {
            store,
            ready: ready.clone(),
        };
        // `Api<PartialObjectMeta<_>>` lists and watches metadata only; it is what kube 5 offers in
        // place of the deprecated `metadata_watcher`, with the same requests.
        let api: Api<PartialObjectMeta<Secret>> = Api::all(client);
        let stream = watcher(api, watcher::Config::default().any_semantic())
            .default_backoff()
            .modify(keep_only_the_key)
            .reflect(writer);
        let run = async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        if !ready.swap(true, Ordering::SeqCst) {
                            tracing::info!("Secret metadata cache ready");
                        }
                    }
                    Ok(_) => {}
                    // The watcher restarts itself after the backoff; until then the store keeps
                    // the last state, which is still the best answer there is.
                    Err(e) => {
                        tracing::warn!(error = %crate::error_chain::Chain(&e), "watching Secret metadata failed; retrying")
                    }
                }
            }
            Err(SecretCacheError::StreamEnded)
        };
        (cache, run)
    }

    /// Whether the first list has completed.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// `Some(true)` when Secret `namespace/name` exists, `Some(false)` when it does not, `None`
    /// while the cache is not ready.
    pub fn exists(&self, namespace: &str, name: &str) -> Option<bool> {
        if !self.is_ready() {
            return None;
        }
        let key = ObjectRef::<PartialObjectMeta<Secret>>::new(name).within(namespace);
        Some(self.store.get(&key).is_some())
    }
}

impl SecretLookup for SecretCache {
    fn exists(&self, namespace: &str, name: &str) -> Option<bool> {
        SecretCache::exists(self, namespace, name)
    }
}

/// Drops every metadata field but the ones the store's key needs.
fn keep_only_the_key(secret: &mut PartialObjectMeta<Secret>) {
    let meta = std::mem::take(&mut secret.metadata);
    secret.metadata = ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        ..ObjectMeta::default()
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectMeta;

    fn secret(namespace: &str, name: &str) -> PartialObjectMeta<Secret> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            _phantom: Default::default(),
        }
    }

    #[test]
    fn lookups_say_nothing_until_ready_then_match_namespace_and_name() {
        let (store, mut writer) = reflector::store();
        let cache = SecretCache {
            store,
            ready: Arc::new(AtomicBool::new(false)),
        };
        assert_eq!(cache.exists("ns", "creds"), None);
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(secret("ns", "creds")),
            watcher::Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
        }
        // The reflector task sets the flag when it sees InitDone.
        cache.ready.store(true, Ordering::SeqCst);
        assert_eq!(cache.exists("ns", "creds"), Some(true));
        assert_eq!(cache.exists("other", "creds"), Some(false));
        assert_eq!(cache.exists("ns", "other"), Some(false));
        writer.apply_watcher_event(&watcher::Event::Delete(secret("ns", "creds")));
        assert_eq!(cache.exists("ns", "creds"), Some(false));
    }

    #[test]
    fn only_name_and_namespace_are_kept() {
        let mut secret = PartialObjectMeta::<Secret> {
            types: None,
            metadata: ObjectMeta {
                name: Some("creds".into()),
                namespace: Some("ns".into()),
                annotations: Some(
                    [(
                        "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                        r#"{"data":{"databasePassword":"c2VjcmV0"}}"#.to_owned(),
                    )]
                    .into(),
                ),
                labels: Some([("a".to_owned(), "b".to_owned())].into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            _phantom: Default::default(),
        };
        keep_only_the_key(&mut secret);
        assert_eq!(
            secret.metadata,
            ObjectMeta {
                name: Some("creds".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            }
        );
    }
}
