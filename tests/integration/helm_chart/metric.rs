//! What `helm template` renders for TrustyAIMetric: its CRD (the generated one, kept on
//! uninstall), the webhook rules that route it to the operator, and the RBAC of the operator
//! (least privilege) and of users (aggregated into admin, edit and view).

use std::path::Path;

use serde_json::{Value, json};

use super::{METRIC_CRD_NAME, chart_dir, documents, of_kind, template};

/// The chart's copy of the TrustyAIMetric CRD is the generated one (`make crd` keeps them
/// equal).
#[test]
fn chart_metric_crd_is_the_generated_crd() {
    let generated = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/trustyaimetrics.yaml"),
    )
    .expect("crd");
    let copy = std::fs::read_to_string(chart_dir().join("files/trustyaimetrics.yaml"))
        .expect("chart copy");
    assert!(
        generated == copy,
        "charts/trustyai-operator/files/trustyaimetrics.yaml differs from crds/trustyaimetrics.yaml: run `make crd`"
    );
}

/// The rendered TrustyAIMetric CRD is the generated one, with the chart's labels and
/// `helm.sh/resource-policy: keep`, and nothing rendered with `crds.install=false`.
#[test]
fn the_metric_crd_is_installed_like_the_service_crd() {
    let objects = documents(&template(&[]));
    let crds = of_kind(&objects, "CustomResourceDefinition");
    assert_eq!(crds.len(), 2, "both CRDs: {crds:#?}");
    let metric = crds
        .iter()
        .find(|c| c["metadata"]["name"] == METRIC_CRD_NAME)
        .expect("the TrustyAIMetric CRD");
    assert_eq!(
        metric["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert_eq!(
        metric["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    // The file the chart reads (the generated CRD, `chart_metric_crd_is_the_generated_crd`),
    // parsed as the rendered one is: the spec goes through unchanged.
    let copy = std::fs::read_to_string(chart_dir().join("files/trustyaimetrics.yaml"))
        .expect("chart copy");
    let file = trustyai_crds::manifests::parse_documents(&copy).expect("YAML");
    assert_eq!(
        numbers_as_floats(&metric["spec"]),
        numbers_as_floats(&file[0]["spec"])
    );

    let without = documents(&template(&["--set", "crds.install=false"]));
    assert!(of_kind(&without, "CustomResourceDefinition").is_empty());
}

/// `value` with every number as a float: helm's `toYaml` writes `1.0` as `1`, which the API
/// server reads as the same schema value.
fn numbers_as_floats(value: &Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map_or(Value::Null, Value::from),
        Value::Array(items) => items.iter().map(numbers_as_floats).collect(),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Both registrations route TrustyAIMetric CREATE and UPDATE in `v1alpha1` to the operator.
#[test]
fn both_webhooks_admit_trustyaimetrics() {
    let objects = documents(&template(&[]));
    let rule = json!({
        "apiGroups": ["trustyai.opendatahub.io"], "apiVersions": ["v1alpha1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["trustyaimetrics"],
        "scope": "Namespaced"
    });
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let registrations = of_kind(&objects, kind);
        let rules = &registrations[0]["webhooks"][0]["rules"];
        assert!(
            rules.as_array().is_some_and(|r| r.contains(&rule)),
            "{kind}: {rules}"
        );
    }
}

/// The `rules` of the ClusterRole named `name`.
fn cluster_role_rules(objects: &[Value], name: &str) -> Vec<Value> {
    of_kind(objects, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == name)
        .and_then(|r| r["rules"].as_array().cloned())
        .unwrap_or_else(|| panic!("ClusterRole {name}"))
}

/// The verbs `rules` grant on `resource` of `group`, sorted.
fn verbs(rules: &[Value], group: &str, resource: &str) -> Vec<String> {
    let mut verbs: Vec<String> = rules
        .iter()
        .filter(|r| {
            r["apiGroups"]
                .as_array()
                .is_some_and(|g| g.contains(&json!(group)))
                && r["resources"]
                    .as_array()
                    .is_some_and(|g| g.contains(&json!(resource)))
                && r.get("resourceNames").is_none()
        })
        .flat_map(|r| r["verbs"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    verbs.sort();
    verbs.dedup();
    verbs
}

/// The operator may read metrics and patch them (its finalizer) and their status, and read
/// EndpointSlices, pods and Secrets; no more on metrics (it never creates, updates or deletes one).
#[test]
fn the_operator_gets_what_the_metric_controller_needs() {
    let objects = documents(&template(&[]));
    let rules = cluster_role_rules(&objects, "trustyai-trustyai-operator");
    let group = "trustyai.opendatahub.io";
    assert_eq!(
        verbs(&rules, group, "trustyaimetrics"),
        ["get", "list", "patch", "watch"]
    );
    assert_eq!(
        verbs(&rules, group, "trustyaimetrics/status"),
        ["get", "patch"]
    );
    assert!(verbs(&rules, group, "trustyaimetrics/finalizers").is_empty());
    assert_eq!(
        verbs(&rules, "discovery.k8s.io", "endpointslices"),
        ["get", "list", "watch"]
    );
    for (resource, needed) in [
        ("pods", ["get", "list", "watch"].as_slice()),
        ("secrets", &["get"]),
    ] {
        let granted = verbs(&rules, "", resource);
        for verb in needed {
            assert!(
                granted.iter().any(|g| g == verb),
                "{resource} {verb}: {granted:?}"
            );
        }
    }
}

/// Users' roles aggregated into admin and edit may write metrics, those into view only read.
#[test]
fn users_roles_cover_trustyaimetrics() {
    let objects = documents(&template(&[]));
    let group = "trustyai.opendatahub.io";
    let editor = cluster_role_rules(&objects, "trustyai-trustyai-operator-editor");
    assert_eq!(
        verbs(&editor, group, "trustyaimetrics"),
        [
            "create", "delete", "get", "list", "patch", "update", "watch"
        ]
    );
    assert_eq!(verbs(&editor, group, "trustyaimetrics/status"), ["get"]);
    let viewer = cluster_role_rules(&objects, "trustyai-trustyai-operator-viewer");
    assert_eq!(
        verbs(&viewer, group, "trustyaimetrics"),
        ["get", "list", "watch"]
    );
    assert_eq!(verbs(&viewer, group, "trustyaimetrics/status"), ["get"]);
}
