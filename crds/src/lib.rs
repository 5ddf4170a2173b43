//! The TrustyAIService API: types of each served version, the generated CRD, and (as pure
//! functions, with no Kubernetes client and no I/O) defaulting, validation and conversion, and
//! [`review`], which plays them in admission's order for the webhooks and the offline `validate`.

pub mod contract;
pub mod conversion;
pub mod crd;
pub mod defaults;
pub mod limits;
pub mod manifests;
pub mod metric;
pub mod patterns;
pub mod quantity;
mod quote;
pub mod review;
pub mod rule_messages;
mod shared_spec;
pub mod v1;
pub mod v1alpha1;
pub mod validation;

/// The storage version's resource type, the one the operator reconciles.
pub use v1::TrustyAIService;
