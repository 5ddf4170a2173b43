//! What makes a TrustyAIService reconcile: which of its own changes count, and which
//! TrustyAIServices an event on another object concerns.
//!
//! The functions mapping objects to TrustyAIServices are pure (they read the controller's store
//! of TrustyAIServices, passed in as a slice), so they are unit-tested here; the watches that
//! use them are [`super::children::watches`].

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Predicate, predicates};
use trustyai_crds::TrustyAIService;
use trustyai_crds::contract::owner_labels;

use super::resources::names;

/// The part of a TrustyAIService whose change needs a reconcile: generation (the spec),
/// finalizers, annotations and the deletion request. Status writes (ours included) and label
/// edits change none of them, so they do not trigger one.
pub fn reconcile_relevant(service: &TrustyAIService) -> Option<u64> {
    predicates::generation::<TrustyAIService>
        .combine(predicates::finalizers::<TrustyAIService>)
        .combine(predicates::annotations::<TrustyAIService>)
        .combine(deletion_requested)
        .hash_property(service)
}

/// The deletion timestamp (whether the API server bumps the generation with it is not part of
/// its contract).
fn deletion_requested(service: &TrustyAIService) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    service
        .metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// A reference to the TrustyAIService `name` in `namespace`.
pub fn service_ref(name: &str, namespace: &str) -> ObjectRef<TrustyAIService> {
    ObjectRef::new(name).within(namespace)
}

/// The TrustyAIService a ClusterRoleBinding was made for (by its owner labels).
pub fn binding_owner(binding: &ObjectMeta) -> Option<ObjectRef<TrustyAIService>> {
    let labels = binding.labels.as_ref()?;
    Some(service_ref(
        labels.get(owner_labels::NAME)?,
        labels.get(owner_labels::NAMESPACE)?,
    ))
}

/// The TrustyAIServices owning the object of `meta` (owner references to any served version).
pub fn owners(meta: &ObjectMeta) -> Vec<ObjectRef<TrustyAIService>> {
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let group = format!("{}/", TrustyAIService::group(&()));
    meta.owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == TrustyAIService::kind(&()) && o.api_version.starts_with(&group))
        .map(|o| service_ref(&o.name, namespace))
        .collect()
}

/// Every TrustyAIService of `namespace`.
pub fn in_namespace(
    services: &[Arc<TrustyAIService>],
    namespace: &str,
) -> Vec<ObjectRef<TrustyAIService>> {
    services
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// The TrustyAIServices of `namespace` that read the Secret `secret`: its database credentials,
/// its database CA, or one of its serving certificates.
pub fn secret_readers(
    services: &[Arc<TrustyAIService>],
    namespace: &str,
    secret: &str,
) -> Vec<ObjectRef<TrustyAIService>> {
    services
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
        .filter(|s| {
            let cr = s.metadata.name.as_deref().unwrap_or_default();
            [
                names::db_credentials(cr, &s.spec),
                names::db_ca(cr),
                names::tls(cr),
                names::internal(cr),
            ]
            .iter()
            .any(|n| n == secret)
        })
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::{database_service, pvc_service, with_name};
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    use serde_json::json;

    fn arcs(services: Vec<TrustyAIService>) -> Vec<Arc<TrustyAIService>> {
        services.into_iter().map(Arc::new).collect()
    }

    #[test]
    fn status_label_or_resource_version_changes_are_not_relevant() {
        let a = pvc_service();
        let mut b = a.clone();
        b.status = Some(Default::default());
        b.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
        b.metadata.resource_version = Some("99".into());
        assert_eq!(reconcile_relevant(&a), reconcile_relevant(&b));
    }

    #[test]
    fn spec_finalizer_annotation_or_deletion_changes_are_relevant() {
        let a = pvc_service();
        for change in [
            |s: &mut TrustyAIService| s.metadata.generation = Some(4),
            |s: &mut TrustyAIService| s.metadata.finalizers = Some(vec!["f".into()]),
            |s: &mut TrustyAIService| {
                s.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into())
            },
            |s: &mut TrustyAIService| {
                s.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ))
            },
        ] {
            let mut c = a.clone();
            change(&mut c);
            assert_ne!(reconcile_relevant(&a), reconcile_relevant(&c));
        }
    }

    #[test]
    fn binding_maps_by_owner_labels() {
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "x", "labels": {
                "trustyai.opendatahub.io/owner-name": "tas",
                "trustyai.opendatahub.io/owner-namespace": "models"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}
        }))
        .unwrap_or_default();
        assert_eq!(
            binding_owner(&binding.metadata),
            Some(service_ref("tas", "models"))
        );
        assert_eq!(binding_owner(&ObjectMeta::default()), None);
    }

    #[test]
    fn owners_of_either_version() {
        let meta: ObjectMeta = serde_json::from_value(json!({"namespace": "models",
            "ownerReferences": [
                {"apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService", "name": "a", "uid": "1"},
                {"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIService", "name": "b", "uid": "2"},
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "c", "uid": "3"}
            ]}))
        .unwrap_or_default();
        assert_eq!(
            owners(&meta),
            vec![service_ref("a", "models"), service_ref("b", "models")]
        );
    }

    #[test]
    fn secrets_map_to_their_readers_only() {
        let mut elsewhere = pvc_service();
        elsewhere.metadata.namespace = Some("other".into());
        let services = arcs(vec![
            pvc_service(),
            database_service(),
            with_name(
                "second",
                json!({"storage": {"format": "DATABASE"}, "metrics": {"schedule": "5s"}}),
            ),
            elsewhere,
        ]);
        let names = |refs: Vec<ObjectRef<TrustyAIService>>| -> Vec<String> {
            refs.into_iter().map(|r| r.name).collect()
        };
        assert_eq!(
            names(secret_readers(&services, "models", "db-creds")),
            ["tas"]
        );
        assert_eq!(
            names(secret_readers(&services, "models", "second-db-credentials")),
            ["second"]
        );
        assert_eq!(
            names(secret_readers(&services, "models", "tas-tls")),
            ["tas", "tas"]
        );
        assert!(secret_readers(&services, "models", "unrelated").is_empty());
        assert_eq!(
            names(secret_readers(&services, "other", "tas-internal")),
            ["tas"]
        );
        assert_eq!(in_namespace(&services, "models").len(), 3);
    }
}
