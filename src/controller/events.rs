//! Kubernetes Events about TrustyAIServices, as reporter `trustyai-service-operator` (the Go
//! operator's name, so existing dashboards and `kubectl describe` filters keep working).
//!
//! `Normal` events report changes the operator made (a child created or changed, wiring added);
//! those happen once per change by nature. `Warning` events report problems, which persist
//! across reconciles: they are emitted on transitions only ([`Transitions`]), i.e. when a
//! problem appears or its message changes, not on every retry.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Client, Resource};
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::EVENT_REPORTER;

use super::event_series::{EventWriter, Occurrence};

/// Event topics: each has at most one outstanding warning.
pub mod topic {
    pub const PROVISIONING: &str = "provisioning";
    pub const DATABASE: &str = "database";
    pub const IMAGE: &str = "image";
    /// The pods keep the Java service's image.
    pub const IMAGE_UPGRADE: &str = "image-upgrade";
    pub const WIRING: &str = "wiring";
    pub const CLEANUP: &str = "cleanup";
    /// The service's pods do not serve (crashing, or unready for long).
    pub const SERVICE: &str = "service";
}

/// The Events API caps a note at 1 kB.
pub const NOTE_LIMIT: usize = 1000;

/// Remembers the last warning per (object, topic), to emit only on transitions.
#[derive(Debug, Default)]
pub struct Transitions {
    last: Mutex<HashMap<(String, &'static str), String>>,
}

impl Transitions {
    /// Whether a warning `fingerprint` for `topic` of `object` is new (and records it).
    pub fn is_new(&self, object: &str, topic: &'static str, fingerprint: &str) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.insert((object.to_owned(), topic), fingerprint.to_owned()) {
            Some(previous) => previous != fingerprint,
            None => true,
        }
    }

    /// The problem of `topic` is gone: the next occurrence is reported again.
    pub fn clear(&self, object: &str, topic: &'static str) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(object.to_owned(), topic));
    }

    /// Forgets everything about `object` (it was deleted).
    pub fn forget(&self, object: &str) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(o, _), _| o != object);
    }
}

/// Publishes events on TrustyAIServices.
pub struct Events {
    writer: EventWriter,
    transitions: Transitions,
}

impl Events {
    /// A publisher using `client`.
    pub fn new(client: Client) -> Self {
        Self {
            writer: EventWriter::new(client, EVENT_REPORTER),
            transitions: Transitions::default(),
        }
    }

    /// A `Normal` event: the operator did `action` with the outcome `reason`.
    pub async fn normal(
        &self,
        service: &TrustyAIService,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(&reference(service), "Normal", reason, action, note.into())
            .await;
    }

    /// A `Warning` about `topic` (one of a fixed set, e.g. `database`, `provisioning`),
    /// published only if it differs from the last warning about that topic.
    pub async fn warning(
        &self,
        service: &TrustyAIService,
        topic: &'static str,
        reason: &str,
        note: impl Into<String>,
    ) {
        let note = note.into();
        let key = key(service);
        if self
            .transitions
            .is_new(&key, topic, &format!("{reason}\n{note}"))
        {
            self.publish(&reference(service), "Warning", reason, topic, note)
                .await;
        }
    }

    /// The problem of `topic` is resolved.
    pub fn resolved(&self, service: &TrustyAIService, topic: &'static str) {
        self.transitions.clear(&key(service), topic);
    }

    /// The TrustyAIService is gone.
    pub fn forget(&self, service: &TrustyAIService) {
        self.transitions.forget(&key(service));
        if let Some(uid) = &service.metadata.uid {
            self.writer.forget(uid);
        }
    }

    async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: &str,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let note: String = note.chars().take(NOTE_LIMIT).collect();
        let occurrence = Occurrence {
            type_,
            reason,
            action,
            note: &note,
        };
        // Events are advisory: a failure to publish one never fails the reconcile.
        if let Err(error) = self.writer.write(regarding, occurrence).await {
            tracing::warn!(error = %crate::error_chain::Chain(&error), reason, "could not publish an event");
        }
    }
}

fn reference(service: &TrustyAIService) -> ObjectReference {
    service.object_ref(&())
}

fn key(service: &TrustyAIService) -> String {
    service.metadata.uid.clone().unwrap_or_else(|| {
        format!(
            "{:?}/{:?}",
            service.metadata.namespace, service.metadata.name
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_only_on_transitions() {
        let t = Transitions::default();
        assert!(t.is_new("a", "database", "missing key x"));
        assert!(!t.is_new("a", "database", "missing key x"));
        assert!(t.is_new("b", "database", "missing key x"));
        assert!(t.is_new("a", "provisioning", "missing key x"));
        assert!(t.is_new("a", "database", "missing key y"));
        assert!(t.is_new("a", "database", "missing key x"));
        t.clear("a", "database");
        assert!(t.is_new("a", "database", "missing key x"));
        t.forget("a");
        assert!(t.is_new("a", "provisioning", "missing key x"));
        assert!(!t.is_new("b", "database", "missing key x"));
    }
}
