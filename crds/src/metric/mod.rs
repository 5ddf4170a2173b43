//! The TrustyAIMetric API (`trustyai.opendatahub.io/v1alpha1`): one fairness or drift metric
//! the TrustyAI service computes on a schedule, declared as a Kubernetes object so that it
//! survives the service's restarts and says in its status whether the model is within bounds.
//!
//! - [`types`]: the resource, its spec and status.
//! - [`kinds`]: the metric types by the service's route names, their aliases and routes.
//! - [`defaults`]: a deprecated type name replaced by the current one (webhook and offline).
//! - [`validation`]: every rule, all errors at once with field paths (webhook and offline).
//! - [`request`]: what the operator sends to the service, and the bounds a value is judged by.
//! - [`crd`]: the generated CRD.

pub mod crd;
pub mod defaults;
pub mod kinds;
pub mod request;
pub mod types;
pub mod validation;

pub use types::{TrustyAIMetric, TrustyAIMetricSpec, TrustyAIMetricStatus};

/// The operator's finalizer on a TrustyAIMetric: removes the metric's requests from the
/// service before the object goes, and never waits for a service or pod that is gone.
pub const FINALIZER: &str = "trustyai.opendatahub.io/metric-requests";

/// The condition types of a TrustyAIMetric's status.
pub mod conditions {
    /// `True` when the metric is scheduled in every ready pod of its service.
    pub const REGISTERED: &str = "Registered";
    /// `True` when the last value is within bounds, `False` when not, `Unknown` before a value
    /// or without bounds.
    pub const WITHIN_BOUNDS: &str = "WithinBounds";
}
