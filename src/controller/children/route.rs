//! The OpenShift Route `<cr>` to the proxy Service. Its cache keeps the status: whether a
//! router admitted it is part of readiness. A Route without `metadata.generation` cannot be
//! tracked that way; it is then read before each apply.

use super::super::resources::route;
use super::cache::Projection;
use super::declaration::{Applying, Declaration, Lifecycle, Rendered, WatchSpec};
use super::memory::Tracking;
use super::{optional_owned_watch, render_one};

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    // Tracked by generation: a router's status writes would otherwise cost a no-op apply.
    watch: WatchSpec {
        tracking: Tracking::GenerationAndMetadata,
        projection: Projection(&["/status"]),
        ..optional_owned_watch(route::api_resource, |a| a.routes)
    },
    applies_with: |a| a.routes,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered(Rendered::new(|instance, _| {
        render_one(&route::route(instance))
    })),
};
