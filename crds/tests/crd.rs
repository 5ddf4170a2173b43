#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! The generated CRD: structure, versions, printer columns, the committed copy, and the Go
//! operator's manifests against both versions' schemas.

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::schema_check;
use trustyai_crds::crd::{crd, crd_yaml};

fn crd_value() -> Value {
    serde_json::to_value(crd().expect("the CRD builds")).expect("the CRD serializes")
}

fn version<'a>(crd: &'a Value, name: &str) -> &'a Value {
    crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == name))
        .unwrap_or_else(|| panic!("version {name} is missing"))
}

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match trustyai_crds::manifests::parse_documents(&text) {
        Ok(mut docs) if docs.len() == 1 => docs.remove(0),
        Ok(docs) => panic!("{}: {} documents, expected one", path.display(), docs.len()),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

#[test]
fn committed_crd_equals_generated() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("trustyaiservices.yaml");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = crd_yaml().expect("the CRD renders");
    assert!(
        committed == generated,
        "{} is out of date; regenerate it with: cargo run -- crd > crds/trustyaiservices.yaml",
        path.display()
    );
}

#[test]
fn the_crd_names_namespaced_trustyaiservices() {
    let crd = crd_value();
    let names = &crd["spec"]["names"];
    assert_eq!(
        crd["metadata"]["name"],
        "trustyaiservices.trustyai.opendatahub.io"
    );
    assert_eq!(crd["spec"]["group"], "trustyai.opendatahub.io");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(names["kind"], "TrustyAIService");
    assert_eq!(names["plural"], "trustyaiservices");
    assert_eq!(names["singular"], "trustyaiservice");
    assert_eq!(names["shortNames"], serde_json::json!(["tas"]));
    assert_eq!(names["categories"], serde_json::json!(["trustyai"]));
}

/// Whether version `name` of the CRD is served, and whether it is the storage version.
fn served_and_stored(crd: &Value, name: &str) -> (Option<bool>, Option<bool>) {
    let version = version(crd, name);
    (version["served"].as_bool(), version["storage"].as_bool())
}

#[test]
fn v1_is_the_current_storage_version() {
    let crd = crd_value();
    assert_eq!(served_and_stored(&crd, "v1"), (Some(true), Some(true)));
    let v1 = version(&crd, "v1");
    assert!(v1.get("deprecated").is_none_or(|d| d == false));
}

#[test]
fn v1alpha1_is_served_but_deprecated_in_favour_of_v1() {
    let crd = crd_value();
    assert_eq!(
        served_and_stored(&crd, "v1alpha1"),
        (Some(true), Some(false))
    );
    let v1alpha1 = version(&crd, "v1alpha1");
    assert_eq!(v1alpha1["deprecated"], true);
    let warning = v1alpha1["deprecationWarning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("trustyai.opendatahub.io/v1 "),
        "warning must name v1: {warning}"
    );
}

/// The served versions, storage version first.
const VERSIONS: [&str; 2] = ["v1", "v1alpha1"];

#[test]
fn every_version_has_the_status_subresource() {
    let crd = crd_value();
    for name in VERSIONS {
        let v = version(&crd, name);
        assert!(
            v["subresources"]["status"].is_object(),
            "{} has the status subresource",
            v["name"]
        );
    }
}

/// The names of `v`'s printer columns that `keep` keeps, in order.
fn printer_columns(v: &Value, keep: impl Fn(&Value) -> bool) -> Vec<&str> {
    v["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| keep(c))
        .filter_map(|c| c["name"].as_str())
        .collect()
}

/// The printer columns each version should have, `v1` with two of its own.
fn expected_columns(v: &Value) -> Vec<&'static str> {
    let mut expected = vec![
        "Ready", "Reason", "Storage", "Replicas", "Age", "Phase", "Database",
    ];
    if v["name"] == "v1" {
        expected.extend(["Image", "Observed"]);
    }
    expected
}

#[test]
fn every_version_has_its_printer_columns() {
    let crd = crd_value();
    for name in VERSIONS {
        let v = version(&crd, name);
        let columns = printer_columns(v, |_| true);
        assert_eq!(columns, expected_columns(v), "{}", v["name"]);
    }
}

#[test]
fn the_columns_after_age_show_only_with_wide_output() {
    let crd = crd_value();
    for name in VERSIONS {
        let v = version(&crd, name);
        let wide = printer_columns(v, |c| c["priority"] == 1);
        assert_eq!(
            wide,
            expected_columns(v)[5..],
            "-o wide only: {}",
            v["name"]
        );
    }
}

#[test]
fn conversion_goes_through_the_webhook() {
    let crd = crd_value();
    let conversion = &crd["spec"]["conversion"];
    assert_eq!(conversion["strategy"], "Webhook");
    assert_eq!(
        conversion["webhook"]["conversionReviewVersions"],
        serde_json::json!(["v1"])
    );
}

/// Calls `visit` with every schema node of both versions and its path.
fn each_schema_node(mut visit: impl FnMut(&Value, &str)) {
    fn walk(node: &Value, path: &str, visit: &mut dyn FnMut(&Value, &str)) {
        visit(node, path);
        if let Some(props) = node.get("properties").and_then(Value::as_object) {
            for (key, child) in props {
                walk(child, &format!("{path}.{key}"), visit);
            }
        }
        if let Some(items) = node.get("items") {
            walk(items, &format!("{path}[]"), visit);
        }
    }
    let crd = crd_value();
    for name in VERSIONS {
        walk(
            &version(&crd, name)["schema"]["openAPIV3Schema"],
            name,
            &mut visit,
        );
    }
}

fn assert_no_schema_problems(problems: &[String]) {
    assert!(
        problems.is_empty(),
        "schema problems:\n{}",
        problems.join("\n")
    );
}

/// Every schema node is typed and none is nullable (a structural schema).
#[test]
fn schema_is_structural() {
    let mut problems = Vec::new();
    each_schema_node(|node, path| {
        if node.get("type").is_none() && node.get("x-kubernetes-preserve-unknown-fields").is_none()
        {
            problems.push(format!("{path}: no type"));
        }
        if node.get("nullable").is_some() {
            problems.push(format!("{path}: nullable"));
        }
    });
    assert_no_schema_problems(&problems);
}

/// Every property is described (the `kubectl explain` text).
#[test]
fn every_property_is_described() {
    let mut problems = Vec::new();
    each_schema_node(|node, path| {
        for (key, child) in node
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if child
                .get("description")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                problems.push(format!("{path}.{key}: no description"));
            }
        }
    });
    assert_no_schema_problems(&problems);
}

#[test]
fn v1_only_fields_are_only_in_v1() {
    let crd = crd_value();
    let spec =
        |v: &str| version(&crd, v)["schema"]["openAPIV3Schema"]["properties"]["spec"].clone();
    assert!(spec("v1")["properties"]["image"].is_object());
    assert!(spec("v1")["properties"]["storage"]["properties"]["retention"].is_object());
    assert!(spec("v1alpha1")["properties"].get("image").is_none());
    assert!(
        spec("v1alpha1")["properties"]["storage"]["properties"]
            .get("retention")
            .is_none()
    );
    for v in ["v1", "v1alpha1"] {
        assert!(
            spec(v)["properties"]["storage"]["properties"]["pv"].is_object(),
            "{v} has storage.pv"
        );
    }
    let conditions = &version(&crd, "v1")["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        ["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(
        conditions["x-kubernetes-list-map-keys"],
        serde_json::json!(["type"])
    );
}

const GO_V1_SAMPLE: &str = "tests/fixtures/go-operator/v1-sample.yaml";
const GO_V1ALPHA1_EXAMPLE: &str = "tests/fixtures/go-operator/v1alpha1-example.yaml";

/// The fixture at `path`, typed as `version_name`'s struct, after checking that the struct
/// writes it back unchanged.
#[track_caller]
fn round_tripped<T>(path: &str, version_name: &str) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let manifest = fixture(path);
    let typed: T = serde_json::from_value(manifest.clone())
        .unwrap_or_else(|e| panic!("typed {version_name}: {e}"));
    assert_eq!(serde_json::to_value(&typed).expect("serializes"), manifest);
    typed
}

fn assert_schema_accepts(manifest: &Value, version_name: &str) {
    let crd = crd_value();
    let schema = &version(&crd, version_name)["schema"]["openAPIV3Schema"];
    let mut errors = Vec::new();
    schema_check::check(manifest, schema, "", &mut errors);
    assert!(
        errors.is_empty(),
        "{version_name} schema rejects the manifest:\n{}",
        errors.join("\n")
    );
}

#[test]
fn go_v1_sample_fits_the_v1_schema() {
    assert_schema_accepts(&fixture(GO_V1_SAMPLE), "v1");
}

#[test]
fn go_v1_sample_round_trips_through_the_v1_struct() {
    let typed: trustyai_crds::v1::TrustyAIService = round_tripped(GO_V1_SAMPLE, "v1");
    assert_eq!(typed.spec.storage.format, "PVC");
    assert_eq!(typed.spec.metrics.batch_size, Some(5000));
    assert_eq!(typed.spec.replicas, Some(1));
}

#[test]
fn go_v1alpha1_example_fits_the_v1alpha1_schema() {
    assert_schema_accepts(&fixture(GO_V1ALPHA1_EXAMPLE), "v1alpha1");
}

#[test]
fn go_v1alpha1_example_round_trips_through_the_v1alpha1_struct() {
    let typed: trustyai_crds::v1alpha1::TrustyAIService =
        round_tripped(GO_V1ALPHA1_EXAMPLE, "v1alpha1");
    assert_eq!(typed.spec.metrics.schedule, "5s");
}

#[test]
fn samples_fit_v1() {
    for name in ["samples/v1-pvc.yaml", "samples/v1-database.yaml"] {
        assert_schema_accepts(&fixture(name), "v1");
    }
}

#[test]
fn status_written_by_the_go_operator_fits() {
    let status = serde_json::json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": {"name": "x"},
        "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}},
        "status": {
            "phase": "Not Ready", "ready": "False", "observedGeneration": 2,
            "conditions": [{"type": "Ready", "status": "False", "reason": "ComponentsNotReady"}]
        }
    });
    assert_schema_accepts(&status, "v1");
    let v1alpha1 = serde_json::json!({
        "apiVersion": "trustyai.opendatahub.io/v1alpha1",
        "kind": "TrustyAIService",
        "metadata": {"name": "x"},
        "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}},
        "status": {"ready": "True"}
    });
    assert_schema_accepts(&v1alpha1, "v1alpha1");
}

/// `kubectl explain` wraps descriptions itself: a line break inside a sentence (where a doc
/// comment wrapped) would show as a break in the middle of a line.
#[test]
fn descriptions_are_prose() {
    let crd = serde_json::to_value(trustyai_crds::crd::crd().expect("crd")).expect("json");
    fn walk(node: &serde_json::Value, path: &str, broken: &mut Vec<String>) {
        match node {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(text)) = map.get("description") {
                    for (i, _) in text.match_indices('\n') {
                        let before = text[..i].chars().last();
                        let after = text[i + 1..].chars().next();
                        let paragraph = before == Some('\n') || after == Some('\n');
                        let list_item = text[i + 1..].starts_with("- ");
                        if !paragraph && !list_item {
                            broken.push(format!("{path}: {text:?}"));
                            break;
                        }
                    }
                }
                for (key, value) in map {
                    walk(value, &format!("{path}.{key}"), broken);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}[{i}]"), broken);
                }
            }
            _ => {}
        }
    }
    let mut broken = Vec::new();
    walk(&crd, "crd", &mut broken);
    assert!(
        broken.is_empty(),
        "descriptions broken mid-paragraph:\n{}",
        broken.join("\n")
    );
}
