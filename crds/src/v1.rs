//! `trustyai.opendatahub.io/v1`: the storage version.
//!
//! The spec is the Go operator's v1 spec (every manifest that works there works here) plus the
//! optional fields `storage.pv`, `storage.retention` and `image`. Every string field is a plain
//! `String`, not a Rust enum: a stored object that breaks a newer rule must still deserialize,
//! or one odd object would make every list and watch fail. The schema and the admission webhook
//! enforce the allowed values.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::limits;

use crate::contract::{retention, storage_format};

crate::shared_spec::trustyai_service_spec! {
    /// Desired state of a TrustyAI service: how it stores the inference data it monitors and
    /// how often it computes metrics.
    version: "v1",
    kube {},
    extra {
        /// A custom TrustyAI service image for this instance only, for example
        /// `quay.io/trustyai/trustyai-service:v0.28.0`. It must start with one of the image
        /// prefixes the operator's configuration allows. When unset, the operator's configured
        /// image is used (and follows operator upgrades). Where the operator's environment names
        /// the service image (`RELATED_IMAGE_ODH_TRUSTYAI_SERVICE_PY_IMAGE`, which the Helm chart
        /// sets), that image is used instead and a `SpecImageIgnored` Warning event says so.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(length(max = limits::IMAGE_MAX))]
        pub image: Option<String>,
    }
}

crate::shared_spec::storage_spec! {
    extra {
        /// What happens to the PVC when the TrustyAIService is deleted: `Retain` (the default:
        /// the PVC and its data are kept, and a TrustyAIService re-created with the same name
        /// adopts it) or `Delete`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("enum" = ["Retain", "Delete"]))]
        pub retention: Option<String>,
    }
}

/// The data file on the PVC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataSpec {
    /// Name of the data file inside `storage.folder`, for example `data.csv`. Defaults to
    /// `data.csv` with PVC storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::FILENAME_MAX))]
    pub filename: Option<String>,

    /// Format of the data file. `CSV` is the only format the service reads from a volume.
    /// Defaults to `CSV` with PVC storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::DATA_FORMAT_MAX))]
    pub format: Option<String>,
}

/// Metrics computation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSpec {
    /// Interval between metric computations: one or more `<integer><unit>` groups with unit
    /// `ms`, `s`, `m` or `h`, for example `5s` or `1m30s`; at least one second in total.
    #[schemars(length(max = limits::SCHEDULE_MAX))]
    pub schedule: String,

    /// Number of most recent observations each metric is computed over. Defaults to 5000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = limits::BATCH_SIZE_MIN))]
    pub batch_size: Option<i64>,
}

/// Observed state of a TrustyAI service.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrustyAIServiceStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` or `Not Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,

    /// Number of service replicas that are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Deprecated: use the condition of type `Ready`. `True` or `False`, kept in step with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,

    /// Latest observations of the service's state, one per type: `Ready`, `Available`,
    /// `PVCAvailable`, `DBAvailable`, `RouteAvailable`, `InferenceServicesPresent`,
    /// `ProvisioningSucceeded`, `Degraded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,

    /// The TrustyAI service image actually deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// One aspect of the service's state, in the shape of `metav1.Condition`. `lastTransitionTime`,
/// `reason` and `message` are optional so that conditions written by the Go operator stay valid.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of the condition, in CamelCase, for example `Ready`.
    #[serde(rename = "type")]
    pub type_: String,

    /// `True`, `False` or `Unknown`.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,

    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,

    /// Machine-readable reason for the last transition, in CamelCase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl StorageSpec {
    /// `format` is `PVC`.
    pub fn is_pvc(&self) -> bool {
        self.format == storage_format::PVC
    }

    /// `format` is `DATABASE` (including migration mode).
    pub fn is_database(&self) -> bool {
        self.format == storage_format::DATABASE
    }

    /// The PVC is deleted with the TrustyAIService (`retention: Delete`); otherwise it is kept.
    pub fn deletes_pvc_with_service(&self) -> bool {
        self.retention.as_deref() == Some(retention::DELETE)
    }
}

impl TrustyAIServiceSpec {
    /// Migration mode: DATABASE storage with `storage.folder` and `data.filename` set (the Go
    /// operator's rule). The service moves the data from the PVC into the database.
    pub fn is_migration(&self) -> bool {
        self.storage.is_database()
            && self
                .storage
                .folder
                .as_deref()
                .is_some_and(|f| !f.is_empty())
            && self
                .data
                .as_ref()
                .and_then(|d| d.filename.as_deref())
                .is_some_and(|f| !f.is_empty())
    }

    /// The service uses a PVC: PVC storage or migration mode.
    pub fn uses_pvc(&self) -> bool {
        self.storage.is_pvc() || self.is_migration()
    }
}
