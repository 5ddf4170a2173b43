use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::body::V1_ONLY;
use super::*;
use crate::contract::CONVERSION_PRESERVED_ANNOTATION as KEY;

const V1: &str = "trustyai.opendatahub.io/v1";
const V1ALPHA1: &str = "trustyai.opendatahub.io/v1alpha1";

/// `value`, an object literal, as a map.
pub(super) fn map(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn down(object: &Value) -> Value {
    convert_object(object, V1ALPHA1).expect("converts to v1alpha1")
}

fn up(object: &Value) -> Value {
    convert_object(object, V1).expect("converts to v1")
}

/// Property paths below `spec` and `status` in one version's schema (`[]` for list items).
fn schema_paths(crd: &Value, version: &str) -> BTreeSet<Vec<String>> {
    fn walk(schema: &Value, prefix: &mut Vec<String>, out: &mut BTreeSet<Vec<String>>) {
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, sub) in properties {
                prefix.push(name.clone());
                out.insert(prefix.clone());
                walk(sub, prefix, out);
                prefix.pop();
            }
        }
        if let Some(items) = schema.get("items") {
            prefix.push("[]".into());
            out.insert(prefix.clone());
            walk(items, prefix, out);
            prefix.pop();
        }
    }
    let schema = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == version))
        .map(|v| &v["schema"]["openAPIV3Schema"]["properties"])
        .expect("version in the CRD");
    let mut out = BTreeSet::new();
    for root in ["spec", "status"] {
        out.insert(vec![root.to_owned()]);
        walk(&schema[root], &mut vec![root.to_owned()], &mut out);
    }
    out
}

/// The field lists the converter moves are exactly what the two schemas differ by, so a field
/// added to v1 later cannot be lost silently on the way down.
#[test]
fn v1_only_fields_match_the_schemas() {
    let crd = serde_json::to_value(crate::crd::crd().expect("CRD builds")).expect("serializes");
    let v1 = schema_paths(&crd, "v1");
    let v1alpha1 = schema_paths(&crd, "v1alpha1");
    assert!(
        v1alpha1.is_subset(&v1),
        "v1alpha1 has fields v1 lacks: {:?}",
        v1alpha1.difference(&v1).collect::<Vec<_>>()
    );
    // Only the topmost path of each v1-only subtree.
    let only: BTreeSet<Vec<String>> = v1
        .difference(&v1alpha1)
        .filter(|p| v1alpha1.contains(&p[..p.len() - 1]))
        .cloned()
        .collect();
    let mut listed = BTreeSet::new();
    let prefixed = |root: &str, path: &[&str]| {
        std::iter::once(root)
            .chain(path.iter().copied())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for path in V1_ONLY.spec {
        listed.insert(prefixed("spec", path));
    }
    for path in V1_ONLY.status {
        listed.insert(prefixed("status", path));
    }
    for field in V1_ONLY.condition {
        listed.insert(prefixed("status", &["conditions", "[]", field]));
    }
    assert_eq!(only, listed);
}

#[test]
fn versions_parse_only_our_group() {
    assert_eq!(Version::from_api_version(V1), Some(Version::V1));
    assert_eq!(Version::from_api_version(V1ALPHA1), Some(Version::V1alpha1));
    for other in [
        "",
        "v1",
        "trustyai.opendatahub.io",
        "trustyai.opendatahub.io/",
        "trustyai.opendatahub.io/v2",
        "trustyai.opendatahub.io/v1/x",
        "apps/v1",
        "TRUSTYAI.OPENDATAHUB.IO/v1",
    ] {
        assert_eq!(Version::from_api_version(other), None, "{other:?}");
    }
    assert_eq!(Version::V1.api_version(), V1);
    assert_eq!(Version::V1alpha1.api_version(), V1ALPHA1);
}

#[test]
fn errors_name_what_is_wrong() {
    let object = json!({"apiVersion": V1, "kind": "TrustyAIService"});
    assert_eq!(
        convert_object(&object, "trustyai.opendatahub.io/v2"),
        Err(ConversionError::UnknownDesiredVersion {
            desired: "trustyai.opendatahub.io/v2".into()
        })
    );
    assert_eq!(
        convert_object(&json!([1]), V1),
        Err(ConversionError::NotAnObject { found: "array" })
    );
    assert_eq!(
        convert_object(&json!({"kind": "TrustyAIService"}), V1),
        Err(ConversionError::MissingApiVersion)
    );
    assert_eq!(
        convert_object(&json!({"apiVersion": 1}), V1),
        Err(ConversionError::UnknownApiVersion { found: "1".into() })
    );
    let error = convert_object(&json!({"apiVersion": "apps/v1"}), V1).expect_err("foreign");
    assert_eq!(
        error.to_string(),
        "the object's apiVersion \"apps/v1\" is neither trustyai.opendatahub.io/v1 nor trustyai.opendatahub.io/v1alpha1"
    );
}

#[test]
fn describe_names_an_object_as_fully_as_it_can() {
    assert_eq!(
        describe(&json!({"metadata": {"name": "a", "namespace": "ns"}})),
        "ns/a"
    );
    assert_eq!(describe(&json!({"metadata": {"name": "a"}})), "a");
    assert_eq!(describe(&json!("x")), "without a name");
}

#[test]
fn json_type_names_the_kind_of_json_value() {
    assert_eq!(json_type(&json!(null)), "null");
    assert_eq!(json_type(&json!(true)), "boolean");
    assert_eq!(json_type(&json!(1.5)), "number");
    assert_eq!(json_type(&json!({})), "object");
}

#[test]
fn an_object_with_nothing_to_keep_gets_no_annotation() {
    let v1 = json!({
        "apiVersion": V1, "kind": "TrustyAIService",
        "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    });
    let alpha = down(&v1);
    let mut expected = v1.clone();
    expected["apiVersion"] = json!(V1ALPHA1);
    assert_eq!(alpha, expected);
    assert_eq!(up(&alpha), v1);
}

/// An object whose Ready condition a v1alpha1 client wrote as "true", which the operator has
/// since set to False in v1: the v1 object, and it in v1alpha1 (carrying the stale spelling).
fn ready_set_false_after_a_v1alpha1_true() -> (Value, Value) {
    let stale = json!({"apiVersion": V1ALPHA1, "kind": "TrustyAIService",
        "status": {"conditions": [{"type": "Ready", "status": "true"}]}});
    let mut v1 = up(&stale);
    assert_eq!(v1["status"]["conditions"][0]["status"], "True");
    v1["status"]["conditions"][0]["status"] = json!("False");
    let alpha = down(&v1);
    (v1, alpha)
}

#[test]
fn a_stale_v1_side_annotation_is_carried_down() {
    let (_, alpha) = ready_set_false_after_a_v1alpha1_true();
    assert_eq!(alpha["status"]["conditions"][0]["status"], "False");
    let kept = alpha["metadata"]["annotations"][KEY]
        .as_str()
        .expect("annotation");
    assert!(
        kept.contains(r#""carried":{"json":{"restores":"v1alpha1""#),
        "{kept}"
    );
}

#[test]
fn a_carried_stale_v1_side_annotation_is_given_back() {
    let (v1, alpha) = ready_set_false_after_a_v1alpha1_true();
    assert_eq!(up(&alpha), v1);
}

#[test]
fn a_carried_annotation_is_not_restored_once_the_object_changed() {
    let (_, mut alpha) = ready_set_false_after_a_v1alpha1_true();
    // A v1alpha1 client writes its own spelling now.
    alpha["status"]["conditions"][0]["status"] = json!("FALSE");
    let v1_again = up(&alpha);
    assert_eq!(v1_again["status"]["conditions"][0]["status"], "False");
    let back = down(&v1_again);
    assert_eq!(back["status"]["conditions"][0]["status"], "FALSE");
}

#[test]
fn an_unreadable_annotation_is_carried_not_applied() {
    let v1 = json!({"apiVersion": V1, "kind": "TrustyAIService",
        "metadata": {"annotations": {KEY: "{not json"}},
        "spec": {"image": "quay.io/x:1"}});
    let alpha = down(&v1);
    assert_eq!(alpha["spec"], json!({}));
    assert_eq!(up(&alpha), v1);
}

#[test]
fn deeply_nested_carried_annotations_convert_in_bounded_time() {
    // Carried annotations inside carried annotations, deeper than any real object gets.
    let mut nested = json!({"restores": "v1", "spec": {"image": "innermost"}});
    for level in 0..38 {
        let restores = if level % 2 == 0 { "v1alpha1" } else { "v1" };
        nested = json!({"restores": restores, "carried": {"json": nested}});
    }
    for (api_version, desired) in [(V1, V1ALPHA1), (V1ALPHA1, V1)] {
        let object = json!({
            "apiVersion": api_version,
            "metadata": {"annotations": {KEY: nested.to_string()}},
            "spec": {"replicas": 1}
        });
        let first = convert_object(&object, desired).expect("converts");
        let second = convert_object(&object, desired).expect("converts");
        assert_eq!(first, second);
        let back = convert_object(&first, api_version).expect("converts back");
        assert_eq!(back["spec"], object["spec"]);
    }
}

#[test]
fn v1_only_spec_pointers_are_the_fields_v1alpha1_lacks() {
    assert!(is_v1_only_spec_pointer("/spec/image"));
    assert!(is_v1_only_spec_pointer("/spec/storage/retention"));
    assert!(!is_v1_only_spec_pointer("/spec/storage"));
    assert!(!is_v1_only_spec_pointer("/spec/storage/size"));
    assert!(!is_v1_only_spec_pointer("/spec/imagePullPolicy"));
}

/// A minimal object in the storage version.
fn minimal_v1() -> Value {
    json!({"apiVersion": V1, "kind": "TrustyAIService", "spec": {"storage": {"format": "PVC"}}})
}

#[test]
fn a_v1_object_is_borrowed_as_the_storage_version() {
    assert!(matches!(
        in_storage_version(&minimal_v1()),
        Ok(Cow::Borrowed(_))
    ));
}

#[test]
fn a_v1alpha1_object_is_converted_to_the_storage_version() {
    let old = down(&minimal_v1());
    assert_eq!(in_storage_version(&old).map(Cow::into_owned), Ok(up(&old)));
}

#[test]
fn an_object_without_an_api_version_has_no_storage_version() {
    assert_eq!(
        in_storage_version(&json!({"kind": "TrustyAIService"})),
        Err(ConversionError::MissingApiVersion)
    );
}
