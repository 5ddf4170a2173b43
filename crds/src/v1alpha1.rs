//! `trustyai.opendatahub.io/v1alpha1`: served and deprecated; v1 replaces it.
//!
//! The spec is the Go operator's v1alpha1 spec plus `storage.pv` (both versions have it). The status
//! is the Go operator's v1alpha1 status, except that every field is optional so that objects
//! with an absent or partial status are valid. Fields that exist only in v1 survive a trip
//! through this version in an annotation owned by the converter (see `conversion`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The data file and metrics settings are the same in both versions.
pub use crate::v1::{DataSpec, MetricsSpec};

crate::shared_spec::trustyai_service_spec! {
    /// Desired state of a TrustyAI service (deprecated version; use
    /// `trustyai.opendatahub.io/v1`).
    version: "v1alpha1",
    kube {
        deprecated = "trustyai.opendatahub.io/v1alpha1 TrustyAIService is deprecated; use trustyai.opendatahub.io/v1 TrustyAIService"
    },
    extra {}
}

crate::shared_spec::storage_spec! {
    extra {}
}

/// Observed state of a TrustyAI service.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrustyAIServiceStatus {
    /// `Ready` or `Not Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// Number of service replicas that are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Conditions of the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,

    /// Deprecated: use the condition of type `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
}

/// One aspect of the service's state (v1alpha1 shape: `status` is a free string).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition, for example `Ready`.
    #[serde(rename = "type")]
    pub type_: String,

    /// Status of the condition, usually `True`, `False` or `Unknown`.
    pub status: String,

    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,

    /// Machine-readable reason for the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
