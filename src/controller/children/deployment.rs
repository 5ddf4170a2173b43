//! The Deployment `<cr>`. Tracked by generation and metadata (its status moves with every pod,
//! which would otherwise cost a no-op apply each time); its cache keeps the status and the
//! selector, so observing it and checking the immutable selector need no read.

use k8s_openapi::api::apps::v1::Deployment;

use super::super::resources::deployment::{self, DeploymentInputs};
use super::cache::Projection;
use super::declaration::{
    Applying, Declaration, Kind, Lifecycle, Mapping, WatchSpec, always, ours,
};
use super::memory::Tracking;
use super::{built_in, render_one};

/// The fields the reconciler reads: what [`super::super::status::DeploymentObservation`]
/// needs, and the selector.
pub const PROJECTION: Projection = Projection(&[
    "/metadata/generation",
    "/spec/replicas",
    "/spec/selector",
    // Required by the typed Deployment; the labels are all the reconciler could want of it.
    "/spec/template/metadata/labels",
    "/status",
]);

/// The declaration.
pub const DECLARATION: Declaration = Declaration {
    kind: Kind::Deployment,
    label: "Deployment",
    watch: WatchSpec {
        resource: built_in::<Deployment>,
        namespaced: true,
        selector: Some(ours),
        served: None,
        mapping: Mapping::OwnerReferences,
        tracking: Tracking::GenerationAndMetadata,
        projection: PROJECTION,
    },
    applies_with: always,
    lifecycle: Lifecycle::Owned,
    applying: Applying::Rendered {
        render: |instance, inputs| {
            render_one(&deployment::deployment(
                instance,
                &DeploymentInputs {
                    images: inputs.images,
                    custom_ca_bundle: inputs.custom_ca_bundle,
                    db_ca_exists: inputs.db_ca_exists,
                },
            )?)
        },
        // One made by the Go operator selects on the version label too, and a selector is
        // immutable.
        must_replace: Some(|live, desired| {
            live.pointer("/spec/selector") != desired.data.pointer("/spec/selector")
        }),
    },
};
