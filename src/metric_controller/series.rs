//! The operator's own series per TrustyAIMetric, for alerting where the metric's status is:
//! `trustyai_operator_metric_value` (the last value) and `trustyai_operator_metric_within_bounds`
//! (1 within, 0 outside; absent while unknown or when `spec.alert` is false), labelled by the
//! object (`metric_namespace`, `metric_name`) and what it measures (`type`, `model`).
//!
//! At most [`SERIES_CAP`] metric objects get series, so a namespace full of objects cannot
//! grow the operator's scrape without bound; those beyond are counted in
//! `trustyai_operator_metric_series_dropped` and keep their status.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use kube::ResourceExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use trustyai_crds::metric::TrustyAIMetric;
use trustyai_crds::metric::types::TrustyAIMetricStatus;

/// The most metric objects with series.
pub const SERIES_CAP: usize = 1000;

/// The labels of one metric object's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MetricLabels {
    metric_namespace: String,
    metric_name: String,
    r#type: String,
    model: String,
}

/// The series, and which objects have them.
#[derive(Default)]
pub struct Series {
    value: Family<MetricLabels, Gauge<f64, AtomicU64>>,
    within_bounds: Family<MetricLabels, Gauge>,
    dropped: Counter,
    exported: Mutex<BTreeMap<(String, String), MetricLabels>>,
}

impl Series {
    /// Registers the families in `registry` (prefixed `trustyai_operator` there).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "metric_value",
            "The last value of each TrustyAIMetric (at most 1000 objects)",
            self.value.clone(),
        );
        registry.register(
            "metric_within_bounds",
            "1 while a TrustyAIMetric's last value is within its bounds, 0 while outside; absent while unknown or with spec.alert false",
            self.within_bounds.clone(),
        );
        registry.register(
            "metric_series_dropped",
            "TrustyAIMetric objects given no series because 1000 already have them",
            self.dropped.clone(),
        );
    }

    /// Sets the series of `metric` from its `status`.
    pub fn record(&self, metric: &TrustyAIMetric, status: &TrustyAIMetricStatus) {
        let key = (metric.namespace().unwrap_or_default(), metric.name_any());
        let labels = MetricLabels {
            metric_namespace: key.0.clone(),
            metric_name: key.1.clone(),
            r#type: metric.spec.type_.clone(),
            model: metric.spec.model.clone(),
        };
        {
            let mut exported = self.exported.lock().unwrap_or_else(|e| e.into_inner());
            match exported.get(&key) {
                Some(old) if *old != labels => {
                    self.value.remove(old);
                    self.within_bounds.remove(old);
                }
                Some(_) => {}
                None if exported.len() >= SERIES_CAP => {
                    self.dropped.inc();
                    return;
                }
                None => {}
            }
            exported.insert(key, labels.clone());
        }
        match status.value {
            Some(v) => {
                self.value.get_or_create(&labels).set(v);
            }
            None => {
                self.value.remove(&labels);
            }
        }
        let alert = metric.spec.alert.unwrap_or(true);
        match status.within_bounds.as_deref() {
            Some("True") if alert => {
                self.within_bounds.get_or_create(&labels).set(1);
            }
            Some("False") if alert => {
                self.within_bounds.get_or_create(&labels).set(0);
            }
            _ => {
                self.within_bounds.remove(&labels);
            }
        }
    }

    /// Removes the series of the object `namespace/name` (it was deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut exported = self.exported.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(labels) = exported.remove(&(namespace.to_owned(), name.to_owned())) {
            self.value.remove(&labels);
            self.within_bounds.remove(&labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metric(name: &str) -> TrustyAIMetric {
        serde_json::from_value(json!({
            "apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIMetric",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"model": "demo-model", "type": "spd"},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn render(series: &Series) -> String {
        let mut registry = Registry::with_prefix("trustyai_operator");
        series.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap_or_default();
        out
    }

    fn outside() -> TrustyAIMetricStatus {
        TrustyAIMetricStatus {
            value: Some(-0.3),
            within_bounds: Some("False".into()),
            ..TrustyAIMetricStatus::default()
        }
    }

    /// The exposition after `demo-spd` was recorded outside its bounds.
    fn rendered_outside_bounds() -> String {
        let series = Series::default();
        series.record(&metric("demo-spd"), &outside());
        render(&series)
    }

    #[test]
    fn a_metric_outside_bounds_exports_a_zero() {
        let text = rendered_outside_bounds();
        assert!(text.contains("trustyai_operator_metric_within_bounds{metric_namespace=\"ns\",metric_name=\"demo-spd\",type=\"spd\",model=\"demo-model\"} 0"), "{text}");
    }

    #[test]
    fn a_metric_exports_its_last_value() {
        let text = rendered_outside_bounds();
        assert!(text.contains("trustyai_operator_metric_value{metric_namespace=\"ns\",metric_name=\"demo-spd\",type=\"spd\",model=\"demo-model\"} -0.3"), "{text}");
    }

    #[test]
    fn alert_false_exports_no_bounds_series() {
        let series = Series::default();
        let mut quiet = metric("q");
        quiet.spec.alert = Some(false);
        series.record(&quiet, &outside());
        assert!(!render(&series).contains("metric_within_bounds{"));
    }

    #[test]
    fn a_deleted_metric_loses_its_series() {
        let series = Series::default();
        series.record(&metric("demo-spd"), &outside());
        series.forget("ns", "demo-spd");
        let text = render(&series);
        assert!(!text.contains("demo-spd"), "{text}");
    }

    #[test]
    fn objects_beyond_the_cap_are_counted_not_exported() {
        let series = Series::default();
        for i in 0..=SERIES_CAP {
            series.record(&metric(&format!("m{i}")), &outside());
        }
        let text = render(&series);
        assert!(!text.contains(&format!("metric_name=\"m{SERIES_CAP}\"")));
        assert!(
            text.contains("trustyai_operator_metric_series_dropped_total 1"),
            "{text}"
        );
    }
}
