//! The per-instance ClusterRoleBinding that lets the proxy review tokens. Cluster-scoped, so
//! no owner reference: the owner labels map it back, and the finalizer deletes it. Its roleRef
//! is immutable: a binding to another ClusterRole (the proxy role flag changed) is replaced.

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use trustyai_crds::contract::owner_labels;

use super::super::resources::{cluster_role_binding, names};
use super::cache::Projection;
use super::declaration::{Applying, Declaration, Lifecycle, Mapping, Rendered, WatchSpec, always};
use super::memory::Tracking;
use super::{built_in, render_one};

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
    applying: Applying::Rendered(Rendered {
        must_replace: Some(|live, desired| live.get("roleRef") != desired.data.get("roleRef")),
        ..Rendered::new(|instance, inputs| {
            render_one(&cluster_role_binding::cluster_role_binding(
                instance,
                inputs.proxy_cluster_role,
            ))
        })
    }),
};
