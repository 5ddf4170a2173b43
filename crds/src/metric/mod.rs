//! The TrustyAIMetric API (`trustyai.opendatahub.io/v1alpha1`): one fairness or drift metric
//! the TrustyAI service computes on a schedule, declared as a Kubernetes object so that it
//! survives the service's restarts and says in its status whether the model is within bounds.
//!
//! - [`types`]: the resource, its spec and status.
//! - [`kinds`]: the metric types by the service's route names, their aliases and routes.
//! - [`validation`]: every rule, all errors at once with field paths (webhook and offline).
//! - [`request`]: what the operator sends to the service, and the bounds a value is judged by.
//! - [`crd`]: the generated CRD.

pub mod crd;
pub mod kinds;
pub mod request;
pub mod types;
pub mod validation;

pub use types::{TrustyAIMetric, TrustyAIMetricSpec, TrustyAIMetricStatus};
