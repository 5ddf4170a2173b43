//! Fixtures and golden files, conversion both ways, and the checks every converted object must
//! pass (round trips, the preserved annotation, conditions).

use std::path::PathBuf;

use serde_json::{Map, Value, json};
use trustyai_crds::contract::CONVERSION_PRESERVED_ANNOTATION as KEY;
use trustyai_crds::conversion::convert_object;

pub(crate) const V1: &str = "trustyai.opendatahub.io/v1";
pub(crate) const V1ALPHA1: &str = "trustyai.opendatahub.io/v1alpha1";
pub(crate) const MAX_ANNOTATION_BYTES: usize = 32 * 1024;

pub(crate) fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub(crate) fn fixture(name: &str) -> Value {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match trustyai_crds::manifests::parse_documents(&text) {
        Ok(mut docs) if docs.len() == 1 => docs.remove(0),
        Ok(docs) => panic!("{}: {} documents, expected one", path.display(), docs.len()),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Compares with `conversion/<name>`, or writes it when `TRUSTYAI_BLESS` is set.
pub(crate) fn golden(name: &str, actual: &Value) {
    let path = fixture_path(&format!("conversion/{name}"));
    if std::env::var_os("TRUSTYAI_BLESS").is_some() {
        let text = serde_json::to_string_pretty(actual).expect("serializes") + "\n";
        std::fs::write(&path, text).expect("golden file written");
        return;
    }
    assert_eq!(
        actual,
        &fixture(&format!("conversion/{name}")),
        "{}",
        path.display()
    );
}

pub(crate) fn down(object: &Value) -> Value {
    convert_object(object, V1ALPHA1).expect("converts to v1alpha1")
}

pub(crate) fn up(object: &Value) -> Value {
    convert_object(object, V1).expect("converts to v1")
}

pub(crate) fn other(api_version: &str) -> &'static str {
    if api_version == V1 { V1ALPHA1 } else { V1 }
}

pub(crate) fn annotation(object: &Value) -> Option<&str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(KEY)?
        .as_str()
}

pub(crate) fn kept(object: &Value) -> Value {
    serde_json::from_str(annotation(object).expect("converter annotation")).expect("JSON")
}

/// `metadata` without the converter's annotation (and without containers left empty by it).
pub(crate) fn metadata_without_annotation(object: &Value) -> Option<Value> {
    let mut metadata = object.get("metadata")?.clone();
    if let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.shift_remove(KEY);
    }
    Some(metadata)
}

/// What every conversion output must satisfy, besides the round trips.
pub(crate) fn check_output(input: &Value, output: &Value, desired: &str) {
    assert_eq!(output["apiVersion"], desired);
    assert_eq!(output.get("kind"), input.get("kind"));
    if input["apiVersion"] == desired {
        assert_eq!(
            output, input,
            "an object in the desired version passes unchanged"
        );
        return;
    }
    if let Some(text) = annotation(output) {
        assert!(text.len() <= MAX_ANNOTATION_BYTES, "{} bytes", text.len());
    }
    // Nothing else in metadata changes. (An annotation map or metadata the converter created is
    // left empty here; compare only what the input had.)
    if let Some(before) = metadata_without_annotation(input) {
        let after = metadata_without_annotation(output).unwrap_or(json!({}));
        if let (Some(before), Some(after)) = (before.as_object(), after.as_object()) {
            for (key, value) in before {
                if key == "annotations" && value.as_object().is_some_and(Map::is_empty) {
                    continue;
                }
                assert_eq!(after.get(key), Some(value), "metadata.{key}");
            }
        } else {
            assert_eq!(before, after);
        }
    }
    if desired == V1ALPHA1 {
        // No v1-only field is left where v1alpha1 would prune it.
        for path in [
            "/spec/image",
            "/spec/storage/retention",
            "/status/observedGeneration",
            "/status/image",
        ] {
            assert!(output.pointer(path).is_none(), "{path} in {output}");
        }
        for condition in conditions(output) {
            assert!(
                condition.get("observedGeneration").is_none(),
                "{condition:?}"
            );
        }
    } else if annotation(input).is_none() {
        // Without kept v1 spellings, v1 gets only its three values.
        for condition in conditions(output) {
            if let Some(status) = condition.get("status").and_then(Value::as_str) {
                assert!(["True", "False", "Unknown"].contains(&status), "{status:?}");
            }
        }
    }
}

pub(crate) fn conditions(object: &Value) -> Vec<&Map<String, Value>> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

/// The fixture `name`, after checking that it converts there and back unchanged.
pub(crate) fn round_tripped(name: &str) -> Value {
    let object = fixture(name);
    assert_round_trip(&object);
    object
}

pub(crate) fn assert_round_trip(object: &Value) {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let there = convert_object(object, other(api_version)).expect("converts");
    check_output(object, &there, other(api_version));
    let back = convert_object(&there, api_version).expect("converts back");
    check_output(&there, &back, api_version);
    assert_eq!(&back, object, "round trip through {there}");
}
