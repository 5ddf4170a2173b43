//! The kube-rbac-proxy's ServiceAccount `<cr>-proxy`.

use k8s_openapi::api::core::v1::ServiceAccount;

use super::super::resources::service_account;
use super::declaration::{Applying, Declaration, Lifecycle, Rendered, always};
use super::{built_in, owned_watch, render_one};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    watch: owned_watch(built_in::<ServiceAccount>),
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, _| {
        render_one(&service_account::service_account(instance))
    })),
};
