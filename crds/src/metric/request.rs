//! What the operator asks of the TrustyAI service for a TrustyAIMetric, and how it judges the
//! values the service reports: pure, so the reconcile decisions are unit-tested without a
//! service.

use serde_json::{Map, Value, json};

use super::kinds::{self, Family, MetricType};
use super::types::{Bounds, TrustyAIMetric, TrustyAIMetricSpec};

/// The service's default `thresholdDelta` for SPD.
pub const SPD_DEFAULT_DELTA: f64 = 0.1;
/// The service's default `thresholdDelta` for DIR.
pub const DIR_DEFAULT_DELTA: f64 = 0.2;

/// The `requestName` the operator gives a metric's requests: `<namespace>/<name>`, so a
/// request in the service (and its gauge's `requestName` label) names the object it came from.
pub fn request_name(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The body of `POST <route>/request` for `spec`, named `request_name`; `None` when the type
/// is unknown (validation refuses it before it is stored).
pub fn request_body(spec: &TrustyAIMetricSpec, request_name: &str) -> Option<Value> {
    let metric = kinds::metric_type(&spec.type_)?;
    let mut body = Map::new();
    body.insert("modelId".into(), json!(spec.model));
    body.insert("requestName".into(), json!(request_name));
    if let Some(batch) = spec.batch_size {
        body.insert("batchSize".into(), json!(batch));
    }
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            body.insert(key.into(), value);
        }
    };
    match metric.family {
        Family::Fairness => {
            put(
                "protectedAttribute",
                spec.protected_attribute.clone().map(Value::from),
            );
            put("privilegedAttribute", spec.privileged_value.clone());
            put("unprivilegedAttribute", spec.unprivileged_value.clone());
            put("outcomeName", spec.outcome_name.clone().map(Value::from));
            put("favorableOutcome", spec.favorable_outcome.clone());
            put("thresholdDelta", spec.threshold_delta.map(Value::from));
        }
        Family::Drift => {
            put("referenceTag", spec.reference_tag.clone().map(Value::from));
            put("fitColumns", spec.fit_columns.clone().map(Value::from));
        }
    }
    Some(Value::Object(body))
}

/// The metric type of `metric`, if its `spec.type` is a current name.
pub fn metric_type(metric: &TrustyAIMetric) -> Option<&'static MetricType> {
    kinds::metric_type(&metric.spec.type_)
}

/// The range values of `spec` are judged by: `spec.bounds` when set; else, for fairness
/// metrics, the service's own notion of fair (SPD within `±delta`, DIR within `1 ± delta`);
/// else none (a drift metric without bounds is reported, not judged).
pub fn bounds(spec: &TrustyAIMetricSpec) -> Option<Bounds> {
    if spec.bounds.is_some() {
        return spec.bounds;
    }
    match spec.type_.as_str() {
        "spd" => {
            let delta = spec.threshold_delta.unwrap_or(SPD_DEFAULT_DELTA);
            Some(Bounds {
                lower: Some(-delta),
                upper: Some(delta),
            })
        }
        "dir" => {
            let delta = spec.threshold_delta.unwrap_or(DIR_DEFAULT_DELTA);
            Some(Bounds {
                lower: Some(1.0 - delta),
                upper: Some(1.0 + delta),
            })
        }
        _ => None,
    }
}

/// How far `value` is outside `bounds` (0 inside).
pub fn distance_outside(bounds: &Bounds, value: f64) -> f64 {
    let below = bounds.lower.map_or(0.0, |l| (l - value).max(0.0));
    let above = bounds.upper.map_or(0.0, |u| (value - u).max(0.0));
    below.max(above)
}

/// Whether `value` is within `bounds` (NaN never is).
pub fn within(bounds: &Bounds, value: f64) -> bool {
    !value.is_nan() && distance_outside(bounds, value) == 0.0
}

/// The value that stands for the metric among the series the service reports for one request
/// (one per column for drift metrics): the one farthest out of `bounds`, else the first.
pub fn representative(values: &[f64], bounds: Option<&Bounds>) -> Option<f64> {
    let first = *values.first()?;
    let Some(bounds) = bounds else {
        return Some(first);
    };
    Some(values.iter().copied().fold(first, |best, v| {
        if v.is_nan() || distance_outside(bounds, v) > distance_outside(bounds, best) {
            v
        } else {
            best
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> TrustyAIMetricSpec {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("a spec: {e}"))
    }

    #[test]
    fn an_spd_request_speaks_the_services_field_names() {
        let spec = spec(
            json!({"model": "demo-model", "type": "spd", "protectedAttribute": "gender",
            "privilegedValue": 1, "unprivilegedValue": 0, "outcomeName": "income",
            "favorableOutcome": 1, "batchSize": 100}),
        );
        assert_eq!(
            request_body(&spec, "ns/demo-spd"),
            Some(
                json!({"modelId": "demo-model", "requestName": "ns/demo-spd", "batchSize": 100,
                "protectedAttribute": "gender", "privilegedAttribute": 1,
                "unprivilegedAttribute": 0, "outcomeName": "income", "favorableOutcome": 1})
            )
        );
    }

    #[test]
    fn a_drift_request_carries_its_reference() {
        let spec = spec(
            json!({"model": "m", "type": "kstest", "referenceTag": "TRAINING",
            "fitColumns": ["age"]}),
        );
        assert_eq!(
            request_body(&spec, "ns/d"),
            Some(
                json!({"modelId": "m", "requestName": "ns/d", "referenceTag": "TRAINING",
                "fitColumns": ["age"]})
            )
        );
    }

    #[test]
    fn fairness_bounds_follow_the_threshold_delta() {
        let spd = spec(json!({"model": "m", "type": "spd", "thresholdDelta": 0.5}));
        assert_eq!(
            bounds(&spd),
            Some(Bounds {
                lower: Some(-0.5),
                upper: Some(0.5)
            })
        );
        let dir = spec(json!({"model": "m", "type": "dir"}));
        assert_eq!(
            bounds(&dir),
            Some(Bounds {
                lower: Some(0.8),
                upper: Some(1.2)
            })
        );
        let drift = spec(json!({"model": "m", "type": "mmd"}));
        assert_eq!(bounds(&drift), None);
    }

    /// The reference SPD: -0.3 as floating-point arithmetic leaves it.
    const REFERENCE_SPD: f64 = -0.300_000_000_000_000_04;

    /// The bounds of an SPD metric with a threshold delta of 0.4, wider than the default.
    fn wide_spd_bounds() -> Bounds {
        bounds(&spec(
            json!({"model": "m", "type": "spd", "thresholdDelta": 0.4}),
        ))
        .unwrap_or_default()
    }

    #[test]
    fn the_reference_spd_is_out_of_the_default_bounds() {
        let default = bounds(&spec(json!({"model": "m", "type": "spd"}))).unwrap_or_default();
        assert!(!within(&default, REFERENCE_SPD));
    }

    #[test]
    fn the_reference_spd_is_within_a_wider_threshold() {
        assert!(within(&wide_spd_bounds(), REFERENCE_SPD));
    }

    #[test]
    fn nan_is_never_within_bounds() {
        assert!(!within(&wide_spd_bounds(), f64::NAN));
    }

    #[test]
    fn the_representative_value_is_the_farthest_out() {
        let b = Bounds {
            lower: Some(0.0),
            upper: Some(1.0),
        };
        assert_eq!(representative(&[0.5, 1.5, -0.2], Some(&b)), Some(1.5));
        assert_eq!(representative(&[0.5, 0.7], Some(&b)), Some(0.5));
        assert_eq!(representative(&[0.5, 0.7], None), Some(0.5));
        assert_eq!(representative(&[], None), None);
    }
}
