//! Prometheus metrics, served on the ops port at `/metrics`. Labels are bounded: endpoints,
//! outcomes, results, error categories, rule names and API versions; never object names or error
//! strings. Names follow Prometheus conventions (base units; the library adds `_total` to
//! counters). Every series an alert or a rate needs exists from the start, at zero.

mod exposition;
mod process;

use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use crate::controller::children::declaration::Kind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use trustyai_webhooks::{
    MetricsFormat, Refusal, ReviewEndpoint, ReviewOutcome, ServerObserver, WebhookObserver,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabel {
    category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabel {
    endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleLabel {
    rule: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    to_version: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApplyLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

fn latency_histogram() -> Histogram {
    // 0.5 ms … about 8 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

/// Every metric the operator exports.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabel, Counter>,
    reconcile_duration: Histogram,
    reconcile_errors: Family<CategoryLabel, Counter>,
    managed: Gauge,
    not_ready: Gauge,
    child_applies: Family<ApplyLabels, Counter>,
    webhook_requests: Family<RequestLabels, Counter>,
    webhook_duration: Family<EndpointLabel, Histogram, fn() -> Histogram>,
    denials: Family<RuleLabel, Counter>,
    converted: Family<VersionLabel, Counter>,
    refusals: Family<RefusalLabel, Counter>,
    certificate_expiry: Gauge<i64, AtomicI64>,
    leader: Gauge,
    metric_series: Arc<crate::metric_controller::series::Series>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric, at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("trustyai_operator");
        let m = Self {
            reconciles: Family::default(),
            reconcile_duration: latency_histogram(),
            reconcile_errors: Family::default(),
            managed: Gauge::default(),
            not_ready: Gauge::default(),
            child_applies: Family::default(),
            webhook_requests: Family::default(),
            webhook_duration: Family::new_with_constructor(latency_histogram),
            denials: Family::default(),
            converted: Family::default(),
            refusals: Family::default(),
            certificate_expiry: Gauge::default(),
            leader: Gauge::default(),
            metric_series: Arc::default(),
            registry: Registry::default(),
        };
        registry.register(
            "reconciles",
            "Reconciles of TrustyAIServices, by result",
            m.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles, by error category",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "trustyaiservices",
            "TrustyAIServices the operator manages",
            m.managed.clone(),
        );
        registry.register(
            "trustyaiservices_not_ready",
            "TrustyAIServices the operator manages whose Ready condition is not True",
            m.not_ready.clone(),
        );
        registry.register(
            "child_applies",
            "Children of TrustyAIServices, by kind and what their apply did (created, changed, unchanged; skipped: known to be a no-op, no request made; deleted: no longer wanted)",
            m.child_applies.clone(),
        );
        registry.register(
            "webhook_requests",
            "Webhook requests, by endpoint and outcome",
            m.webhook_requests.clone(),
        );
        registry.register(
            "webhook_request_duration_seconds",
            "Time a webhook request took, by endpoint",
            m.webhook_duration.clone(),
        );
        registry.register(
            "admission_denials",
            "Violations in denied admission requests, by rule",
            m.denials.clone(),
        );
        registry.register(
            "converted_objects",
            "Objects converted by the conversion webhook, by target version",
            m.converted.clone(),
        );
        registry.register(
            "webhook_refusals",
            "Work the webhook server refused, by reason: throttled (429, memory budget full), body_too_large (413), connection_limit (accepting paused), handshake_failed, idle_closed",
            m.refusals.clone(),
        );
        registry.register(
            "serving_certificate_expiry_timestamp_seconds",
            "When the webhook serving certificate expires (Unix time)",
            m.certificate_expiry.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease and reconciles",
            m.leader.clone(),
        );
        registry.register(
            "build",
            "Build information",
            Info::new(BuildLabels {
                version: crate::VERSION,
            }),
        );
        m.metric_series.register(&mut registry);
        let m = Self { registry, ..m };
        m.create_every_series();
        m
    }

    /// The series of TrustyAIMetrics, which the metric controller keeps.
    pub fn metric_series(&self) -> Arc<crate::metric_controller::series::Series> {
        self.metric_series.clone()
    }

    /// The registry and the process metrics in `format`.
    pub fn render(&self, format: MetricsFormat) -> String {
        let mut openmetrics = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut openmetrics, &self.registry)
        {
            tracing::error!(error = %crate::error_chain::Chain(&e), "cannot encode metrics");
        }
        // The encoder ends with `# EOF`; the process metrics go before it.
        let body_end = openmetrics
            .strip_suffix("# EOF\n")
            .map_or(openmetrics.len(), str::len);
        openmetrics.insert_str(body_end, &process::render());
        match format {
            MetricsFormat::OpenMetrics => openmetrics,
            MetricsFormat::PrometheusText => exposition::to_prometheus_text(&openmetrics),
        }
    }

    /// Creates every series of a bounded label set at zero, so that an alert on an error rate
    /// or a ratio of outcomes works before the first such event.
    fn create_every_series(&self) {
        for result in ["success", "error"] {
            drop(self.reconciles.get_or_create(&ResultLabel { result }));
        }
        for category in crate::controller::error::ReconcileError::CATEGORIES {
            drop(
                self.reconcile_errors
                    .get_or_create(&CategoryLabel { category }),
            );
        }
        for endpoint in ReviewEndpoint::ALL {
            let endpoint = endpoint.as_str();
            drop(
                self.webhook_duration
                    .get_or_create(&EndpointLabel { endpoint }),
            );
            for outcome in ReviewOutcome::ALL {
                drop(self.webhook_requests.get_or_create(&RequestLabels {
                    endpoint,
                    outcome: outcome.as_str(),
                }));
            }
        }
        for rule in trustyai_crds::validation::Rule::ALL {
            drop(self.denials.get_or_create(&RuleLabel {
                rule: rule.as_str(),
            }));
        }
        // TrustyAIMetric denials share one label (their field paths are in the log).
        drop(self.denials.get_or_create(&RuleLabel {
            rule: trustyai_webhooks::admission::METRIC_DENIAL_RULE,
        }));
        for to_version in ["v1", "v1alpha1"] {
            drop(self.converted.get_or_create(&VersionLabel { to_version }));
        }
        for refusal in Refusal::ALL {
            drop(self.refusals.get_or_create(&RefusalLabel {
                reason: refusal.as_str(),
            }));
        }
    }

    /// One reconcile finished; `error_category` is a bounded category, `None` on success.
    pub fn reconciled(&self, duration: Duration, error_category: Option<&'static str>) {
        self.reconcile_duration.observe(duration.as_secs_f64());
        let result = if error_category.is_some() {
            "error"
        } else {
            "success"
        };
        self.reconciles.get_or_create(&ResultLabel { result }).inc();
        if let Some(category) = error_category {
            self.reconcile_errors
                .get_or_create(&CategoryLabel { category })
                .inc();
        }
    }

    /// How many TrustyAIServices the operator manages now, and how many of them are not Ready.
    pub fn set_managed(&self, count: i64, not_ready: i64) {
        self.managed.set(count);
        self.not_ready.set(not_ready);
    }

    /// A child's apply: `outcome` is `created`, `changed`, `unchanged`, `skipped` or `deleted`.
    pub(crate) fn child_applied(&self, kind: Kind, outcome: &'static str) {
        self.child_applies
            .get_or_create(&ApplyLabels {
                kind: kind.name(),
                outcome,
            })
            .inc();
    }

    /// The serving certificate's expiry.
    pub fn set_certificate_expiry(&self, unix_seconds: i64) {
        self.certificate_expiry.set(unix_seconds);
    }

    /// Whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }
}

impl ServerObserver for Metrics {
    fn refused(&self, refusal: Refusal) {
        self.refusals
            .get_or_create(&RefusalLabel {
                reason: refusal.as_str(),
            })
            .inc();
    }
}

impl WebhookObserver for Metrics {
    fn request(&self, endpoint: ReviewEndpoint, outcome: ReviewOutcome, latency: Duration) {
        self.webhook_requests
            .get_or_create(&RequestLabels {
                endpoint: endpoint.as_str(),
                outcome: outcome.as_str(),
            })
            .inc();
        self.webhook_duration
            .get_or_create(&EndpointLabel {
                endpoint: endpoint.as_str(),
            })
            .observe(latency.as_secs_f64());
    }

    fn denial(&self, rule: &'static str) {
        self.denials.get_or_create(&RuleLabel { rule }).inc();
    }

    fn conversion(&self, desired_api_version: &str, objects: usize) {
        // Bounded: only our two versions, anything else is "other".
        let to_version = match desired_api_version.rsplit('/').next() {
            Some("v1") => "v1",
            Some("v1alpha1") => "v1alpha1",
            _ => "other",
        };
        self.converted
            .get_or_create(&VersionLabel { to_version })
            .inc_by(objects as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text_with_bounded_labels() {
        let m = Metrics::new();
        m.request(
            ReviewEndpoint::Validate,
            ReviewOutcome::Denied,
            Duration::from_millis(3),
        );
        m.denial("storage_size");
        m.conversion("trustyai.opendatahub.io/v1alpha1", 100);
        m.reconciled(Duration::from_millis(20), Some("kube_api"));
        m.reconciled(Duration::from_millis(20), None);
        m.set_certificate_expiry(1_900_000_000);
        m.set_leader(true);
        m.child_applied(Kind::Service, "skipped");
        m.child_applied(Kind::Service, "skipped");
        let text = m.render(MetricsFormat::OpenMetrics);
        for line in [
            "trustyai_operator_webhook_requests_total{endpoint=\"validate\",outcome=\"denied\"} 1",
            "trustyai_operator_admission_denials_total{rule=\"storage_size\"} 1",
            "trustyai_operator_converted_objects_total{to_version=\"v1alpha1\"} 100",
            "trustyai_operator_reconciles_total{result=\"error\"} 1",
            "trustyai_operator_reconciles_total{result=\"success\"} 1",
            "trustyai_operator_reconcile_errors_total{category=\"kube_api\"} 1",
            "trustyai_operator_serving_certificate_expiry_timestamp_seconds 1900000000",
            "trustyai_operator_leader 1",
            "trustyai_operator_child_applies_total{kind=\"Service\",outcome=\"skipped\"} 2",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
        assert!(
            text.contains("trustyai_operator_build_info{version="),
            "{text}"
        );
        assert!(
            text.contains("# TYPE trustyai_operator_webhook_request_duration_seconds histogram"),
            "{text}"
        );
    }
}
