//! `TrustyAIMetric`: the resource, its spec and its status.
//!
//! String fields are plain `String`s and the parameter values plain JSON, not Rust enums: a
//! stored object that breaks a newer rule must still deserialize, or one odd object would make
//! every list and watch fail. The schema and the admission webhook enforce the allowed values.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::v1::Condition;

/// A fairness or drift metric of one model, computed by a TrustyAI service on its schedule.
/// The operator registers it with every ready pod of the service, registers it again after
/// every restart or rollout of the service, and reports the last value and whether it is
/// within bounds.
#[derive(
    kube::CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
)]
#[kube(
    group = "trustyai.opendatahub.io",
    version = "v1alpha1",
    kind = "TrustyAIMetric",
    plural = "trustyaimetrics",
    singular = "trustyaimetric",
    shortname = "tam",
    category = "trustyai",
    namespaced,
    status = "TrustyAIMetricStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct TrustyAIMetricSpec {
    /// Name of the TrustyAIService (in this namespace) that computes the metric. When unset,
    /// the only TrustyAIService of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub service: Option<String>,

    /// The model's id, as its inferences reach the service (`modelId` in the service's API).
    #[schemars(length(max = 253))]
    pub model: String,

    /// The metric, by the name the service's routes use: `spd` (statistical parity
    /// difference) and `dir` (disparate impact ratio) for group fairness; `comparemeans`,
    /// `kstest`, `ksteststreaming`, `jensenshannon` and `mmd` for drift. The service's
    /// deprecated names `meanshift`, `approxkstest` and `fouriermmd` are replaced by the
    /// current ones when the object is created.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["spd", "dir", "comparemeans", "kstest", "ksteststreaming", "jensenshannon", "mmd"]))]
    pub type_: String,

    /// Number of most recent observations the metric is computed over. When unset, the
    /// service's default for the metric (100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub batch_size: Option<i64>,

    /// Fairness metrics (`spd`, `dir`): the input whose groups are compared, for example
    /// `gender`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub protected_attribute: Option<String>,

    /// Fairness metrics: the value of the protected attribute that marks the privileged group,
    /// for example `1` or `male`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "scalar")]
    pub privileged_value: Option<Value>,

    /// Fairness metrics: the value of the protected attribute that marks the unprivileged
    /// group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "scalar")]
    pub unprivileged_value: Option<Value>,

    /// Fairness metrics: the model output the groups are compared on, for example `income`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub outcome_name: Option<String>,

    /// Fairness metrics: the value of the outcome that is favourable, for example `1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "scalar")]
    pub favorable_outcome: Option<Value>,

    /// Fairness metrics: how far from perfect parity the value may be and still count as
    /// fair (the service's `thresholdDelta`): `spd` is fair within `[-delta, +delta]`
    /// (default 0.1), `dir` within `[1 - delta, 1 + delta]` (default 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub threshold_delta: Option<f64>,

    /// Drift metrics: the data tag of the reference data the model's recent inputs are
    /// compared with, for example `TRAINING`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub reference_tag: Option<String>,

    /// Drift metrics: the input columns compared. When unset, every column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 100))]
    pub fit_columns: Option<Vec<String>>,

    /// The range a value must stay in to be within bounds. For fairness metrics it replaces
    /// the range `thresholdDelta` gives; drift metrics are judged only when it is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Bounds>,

    /// Whether the chart's alert fires while the value is out of bounds. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<bool>,
}

/// A closed range of metric values; either end may be open.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bounds {
    /// The lowest value within bounds. When unset, no lower limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower: Option<f64>,
    /// The highest value within bounds. When unset, no upper limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper: Option<f64>,
}

/// What the operator last saw of the metric.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrustyAIMetricStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The TrustyAIService computing the metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,

    /// The name the operator gives the metric's requests in the service (`requestName`, a
    /// label of the service's gauge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_name: Option<String>,

    /// The last value the service computed. Where the service reports one value per column
    /// (drift), the one farthest out of bounds, else the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,

    /// When the operator first read the current `value` from the service (it changes when the
    /// value does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<Time>,

    /// The range `value` is judged by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Bounds>,

    /// `"True"` when the value is within bounds, `"False"` when not, unset while unknown:
    /// the `WithinBounds` condition's status, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_bounds: Option<String>,

    /// The metric's registrations, one per pod of the service it is scheduled in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<Registration>,

    /// `Registered` (scheduled in every ready pod of the service) and `WithinBounds` (the
    /// last value is within `bounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// The metric scheduled in one process of the service: a pod's service container as it ran
/// when the operator registered it. A restart of the container or a new pod is a new process,
/// whose schedule starts empty.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    /// The pod.
    pub pod: String,
    /// The pod's uid.
    pub pod_uid: String,
    /// When the service container started (`state.running.startedAt`).
    pub started_at: String,
    /// The id the service gave the request.
    pub request_id: String,
    /// The spec generation the request was made from.
    pub generation: i64,
}

/// A JSON scalar: a string, number or boolean, as the service's API takes group and outcome
/// values.
fn scalar(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]
    })
}
