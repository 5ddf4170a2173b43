//! The per-instance ClusterRoleBinding that lets the proxy review tokens. Cluster-scoped, so
//! no owner reference: the owner labels map it back, and the finalizer deletes it. Its roleRef
//! is immutable: a binding to another ClusterRole (the proxy role flag changed) is replaced.
//!
//! `<cr>-<ns>-proxy-rolebinding` binds the proxy ServiceAccount to the proxy ClusterRole
//! (token reviews and subject access reviews, cluster-wide by nature). A cluster-scoped object
//! cannot be owned by a namespaced one: the Go operator's owner reference here is never
//! honoured by the garbage collector, so its binding leaks.

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
pub use trustyai_crds::contract::PROXY_CLUSTER_ROLE as DEFAULT_PROXY_CLUSTER_ROLE;
use trustyai_crds::contract::owner_labels;

use super::cache::Projection;
use super::declaration::{Declaration, Lifecycle, Mapping, Rendered, WatchSpec, always};
use super::memory::Tracking;
use super::{built_in, render_one};
use crate::controller::resources::{Instance, labels, names};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: WatchSpec {
        resource: built_in::<ClusterRoleBinding>,
        namespaced: false,
        selector: Some(|| owner_labels::NAME.to_owned()),
        served: None,
        mapping: Mapping::OwnerLabels,
        tracking: Tracking::ResourceVersion,
        projection: Projection(&["/roleRef"]),
    },
    applies_with: always,
    lifecycle: Lifecycle::ClusterScoped {
        name: names::proxy_cluster_role_binding,
    },
    applying: Rendered {
        must_replace: Some(|live, desired| live.get("roleRef") != desired.data.get("roleRef")),
        ..Rendered::new(|instance, inputs| {
            render_one(&cluster_role_binding(instance, inputs.proxy_cluster_role))
        })
    },
};

/// The ClusterRoleBinding of `<cr>-proxy` to `cluster_role` (by default
/// [`DEFAULT_PROXY_CLUSTER_ROLE`], the name the Go operator's manifests give the role; a Helm
/// release may name it differently).
pub fn cluster_role_binding(instance: &Instance<'_>, cluster_role: &str) -> ClusterRoleBinding {
    let mut metadata_labels = labels::metadata(instance);
    metadata_labels.extend(labels::owner(instance.name(), instance.namespace()));
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(names::proxy_cluster_role_binding(
                instance.name(),
                instance.namespace(),
            )),
            labels: Some(metadata_labels),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: cluster_role.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: names::proxy_service_account(instance.name()),
            namespace: Some(instance.namespace().to_owned()),
            api_group: None,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::test_support::pvc_instance;

    #[test]
    fn binds_the_proxy_account_without_owner_reference() {
        let instance = pvc_instance();
        let crb = cluster_role_binding(&instance, DEFAULT_PROXY_CLUSTER_ROLE);
        assert_eq!(
            crb.metadata.name.as_deref(),
            Some("tas-models-proxy-rolebinding")
        );
        assert!(crb.metadata.namespace.is_none());
        assert!(crb.metadata.owner_references.is_none());
        assert_eq!(crb.role_ref.name, "trustyai-service-operator-proxy-role");
        assert_eq!(crb.role_ref.kind, "ClusterRole");
        let subjects = crb.subjects.expect("subjects");
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].name, "tas-proxy");
        assert_eq!(subjects[0].namespace.as_deref(), Some("models"));
        let labels = crb.metadata.labels.expect("labels");
        assert_eq!(labels["trustyai.opendatahub.io/owner-name"], "tas");
        assert_eq!(labels["trustyai.opendatahub.io/owner-namespace"], "models");
        assert_eq!(labels["app.kubernetes.io/part-of"], "trustyai");
    }

    #[test]
    fn cluster_role_is_a_parameter() {
        let instance = pvc_instance();
        let crb = cluster_role_binding(&instance, "my-release-proxy-role");
        assert_eq!(crb.role_ref.name, "my-release-proxy-role");
    }
}
