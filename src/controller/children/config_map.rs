//! The kube-rbac-proxy configuration ConfigMap.

use k8s_openapi::api::core::v1::ConfigMap;

use super::super::resources::config_map;
use super::declaration::{Applying, Declaration, Lifecycle, Rendered, always};
use super::{built_in, owned_watch, render_one};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: owned_watch(built_in::<ConfigMap>),
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, inputs| {
        render_one(&config_map::kube_rbac_proxy_config(
            instance,
            inputs.service_access,
        ))
    })),
};
