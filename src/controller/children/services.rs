//! The Services `<cr>-tls` (the proxy, the one clients use) and `<cr>-internal`.

use k8s_openapi::api::core::v1::Service;

use super::super::resources::services;
use super::declaration::{Applying, Declaration, Lifecycle, Rendered, always};
use super::{built_in, owned_watch, wanted};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: owned_watch(built_in::<Service>),
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, _| {
        [
            services::tls_service(instance),
            services::internal_service(instance),
        ]
        .iter()
        .map(wanted)
        .collect()
    })),
};
