//! The chart's PrometheusRule and Grafana dashboard: Prometheus' own rule checker accepts the
//! rules, and the alerts and panels use only metrics the operator exports.

use super::template;
use crate::support::temp::TempDir;

/// The metric names the operator exports (from its own registry), to hold the chart's alerts and
/// dashboard to. The per-TrustyAIMetric families have series only once a metric has a status,
/// so one is recorded first.
fn exported_metric_names() -> std::collections::BTreeSet<String> {
    let metrics = trustyai_operator::metrics::Metrics::new();
    let metric: trustyai_crds::metric::TrustyAIMetric = serde_json::from_value(serde_json::json!({
        "apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIMetric",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"model": "demo-model", "type": "spd"},
    }))
    .expect("a TrustyAIMetric");
    let status = trustyai_crds::metric::TrustyAIMetricStatus {
        value: Some(-0.3),
        within_bounds: Some("False".into()),
        ..Default::default()
    };
    metrics.metric_series().record(&metric, &status);
    let text = metrics.render(trustyai_webhooks::MetricsFormat::PrometheusText);
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Every `trustyai_operator_*` or `process_*` name in `expr`, without the histogram suffixes.
fn metric_names_in(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("trustyai_operator_") || word.starts_with("process_"))
        .map(|word| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| word.strip_suffix(suffix))
                .filter(|base| base.ends_with("_seconds"))
                .unwrap_or(word)
                .to_owned()
        })
        .collect()
}

/// The PrometheusRule's spec and the Grafana dashboard's JSON, as the chart renders them with
/// both enabled.
fn rules_and_dashboard() -> (serde_json::Value, serde_json::Value) {
    let manifest = template(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "grafanaDashboard.enabled=true",
    ]);
    let mut rules_doc = None;
    let mut dashboard = None;
    for document in manifest.split("\n---") {
        let Some(value) = trustyai_crds::manifests::parse_documents(document)
            .ok()
            .and_then(|docs| docs.into_iter().next())
        else {
            continue;
        };
        match value["kind"].as_str() {
            Some("PrometheusRule") => rules_doc = Some(value["spec"].clone()),
            Some("ConfigMap") if value["metadata"]["labels"]["grafana_dashboard"] == "1" => {
                dashboard = value["data"]["trustyai-operator.json"]
                    .as_str()
                    .map(str::to_owned)
            }
            _ => {}
        }
    }
    let rules = rules_doc.expect("a PrometheusRule");
    let dashboard: serde_json::Value =
        serde_json::from_str(&dashboard.expect("the dashboard ConfigMap")).expect("dashboard JSON");
    (rules, dashboard)
}

/// The metric names the chart's TrustyAIMetric alert and dashboard panels use
/// (`trustyai_operator_metric_*`), for the real-node test to find in a real scrape.
pub(crate) fn metric_alert_and_panel_names() -> std::collections::BTreeSet<String> {
    let (rules, dashboard) = rules_and_dashboard();
    let mut expressions: Vec<String> = rules["groups"][0]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rule| rule["alert"] == "TrustyAIMetricOutsideBounds")
        .filter_map(|rule| rule["expr"].as_str().map(str::to_owned))
        .collect();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            expressions.extend(target["expr"].as_str().map(str::to_owned));
        }
    }
    let names: std::collections::BTreeSet<String> = expressions
        .iter()
        .flat_map(|expr| metric_names_in(expr))
        .filter(|name| name.starts_with("trustyai_operator_metric_"))
        .collect();
    assert!(
        !names.is_empty(),
        "the chart's alert uses no TrustyAIMetric series"
    );
    names
}

/// The PrometheusRule the chart renders passes Prometheus' own rule checker (`promcheck rules`:
/// rulefmt, which parses every PromQL expression).
#[test]
fn the_alerts_pass_prometheus_rule_checker() {
    let (rules, _) = rules_and_dashboard();
    let dir = TempDir::new("rules");
    let file = dir.join("rules.yaml");
    std::fs::write(&file, trustyai_crds::manifests::to_yaml(&rules)).expect("write");
    let promcheck = trustyai_local_cluster::binary("promcheck").unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(promcheck)
        .arg("rules")
        .arg(&file)
        .output()
        .expect("promcheck runs");
    assert!(
        out.status.success(),
        "Prometheus' rule checker refused the chart's rules: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        trustyai_crds::manifests::to_yaml(&rules)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("9 rules found"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Asserts every metric `exprs` (PromQL expressions of `what`) use is one the operator exports.
#[track_caller]
fn assert_only_exported_metrics<'a>(
    what: &str,
    exprs: impl IntoIterator<Item = &'a serde_json::Value>,
) {
    let exported = exported_metric_names();
    let mut used = Vec::new();
    for expr in exprs {
        used.extend(metric_names_in(expr.as_str().expect("expr")));
    }
    let unknown: Vec<&String> = used
        .iter()
        .filter(|name| !exported.contains(*name))
        .collect();
    assert!(
        unknown.is_empty(),
        "{what}: not exported: {unknown:?} (exported: {exported:?})"
    );
}

/// The chart's alerts use only metrics the operator exports.
#[test]
fn the_alerts_use_only_exported_metrics() {
    let (rules, _) = rules_and_dashboard();
    let rules = rules["groups"][0]["rules"].as_array().expect("rules");
    assert_only_exported_metrics("the alerts", rules.iter().map(|rule| &rule["expr"]));
}

/// The dashboard's panels use only metrics the operator exports.
#[test]
fn the_dashboard_uses_only_exported_metrics() {
    let (_, dashboard) = rules_and_dashboard();
    let panels = dashboard["panels"].as_array().expect("panels");
    assert_only_exported_metrics(
        "the dashboard",
        panels.iter().flat_map(|panel| {
            panel["targets"]
                .as_array()
                .expect("targets")
                .iter()
                .map(|target| &target["expr"])
        }),
    );
}
