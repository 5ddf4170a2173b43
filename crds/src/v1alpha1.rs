//! `trustyai.opendatahub.io/v1alpha1`: served and deprecated; v1 replaces it.
//!
//! The spec is the Go operator's v1alpha1 spec plus `storage.pv` (ADR-0003 had it). The status
//! is the Go operator's v1alpha1 status, except that every field is optional so that objects
//! with an absent or partial status are valid. Fields that exist only in v1 survive a trip
//! through this version in an annotation owned by the converter (see `conversion`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::limits;
/// The data file and metrics settings are the same in both versions.
pub use crate::v1::{DataSpec, MetricsSpec};

/// Desired state of a TrustyAI service (deprecated version; use `trustyai.opendatahub.io/v1`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "trustyai.opendatahub.io",
    version = "v1alpha1",
    kind = "TrustyAIService",
    plural = "trustyaiservices",
    singular = "trustyaiservice",
    shortname = "tas",
    category = "trustyai",
    namespaced,
    status = "TrustyAIServiceStatus",
    deprecated = "trustyai.opendatahub.io/v1alpha1 TrustyAIService is deprecated; use trustyai.opendatahub.io/v1 TrustyAIService"
)]
#[serde(rename_all = "camelCase")]
pub struct TrustyAIServiceSpec {
    /// Number of TrustyAI service replicas. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = limits::REPLICAS_MIN))]
    pub replicas: Option<i32>,

    /// Where the service keeps the inference data it receives.
    pub storage: StorageSpec,

    /// The data file the service reads and writes on a PVC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataSpec>,

    /// How often and over how many observations metrics are computed.
    pub metrics: MetricsSpec,
}

/// Storage of the inference data.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// Storage format: `PVC` or `DATABASE`. `DATABASE` with `folder` and `data.filename` set is
    /// migration mode.
    #[schemars(extend("enum" = ["PVC", "DATABASE"]))]
    pub format: String,

    /// Absolute path at which the PVC is mounted in the service container. Defaults to `/inputs`
    /// with PVC storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::FOLDER_MAX))]
    pub folder: Option<String>,

    /// Requested size of the PVC, a Kubernetes quantity such as `1Gi`. Defaults to `1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::SIZE_MAX))]
    pub size: Option<String>,

    /// Name of the Secret holding the database credentials. Defaults to `<name>-db-credentials`
    /// with DATABASE storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::OBJECT_NAME_MAX))]
    pub database_configurations: Option<String>,

    /// Name of an existing PersistentVolume to bind the PVC to. Cannot be changed once set;
    /// removed only with the end of a migration (the PVC is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::OBJECT_NAME_MAX))]
    pub pv: Option<String>,
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
