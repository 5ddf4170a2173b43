//! The text converter (`convert_object_text`) against the tree converter (`convert_object`):
//! whatever object it converts, it writes exactly what the tree converter gives, the converter's
//! annotation byte for byte and the members in the same order; what it declines it leaves alone.

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use trustyai_crds::conversion::{convert_object, convert_object_text};

use crate::generators::{any_json, any_shape, read_v1alpha1, stored_v1};
use crate::support::{V1, V1ALPHA1};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: ProptestConfig::default().cases.max(2000),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Converts `text` both ways; for each way, whether the text converter wrote the object.
/// Fails when what it wrote differs from the tree converter's answer, or when it declined and
/// still wrote something.
fn same_as_the_tree(text: &str) -> Result<[bool; 2], TestCaseError> {
    let raw: Box<RawValue> = serde_json::from_str(text).expect("valid JSON");
    let object: Value = serde_json::from_str(text).expect("valid JSON");
    let mut written = [false; 2];
    for (i, desired) in [V1, V1ALPHA1].into_iter().enumerate() {
        let mut out = b"[".to_vec();
        written[i] = convert_object_text(&raw, desired, &mut out);
        if !written[i] {
            prop_assert_eq!(&out, b"[", "declined, yet wrote");
            continue;
        }
        let ours: Value = serde_json::from_slice(&out[1..]).map_err(|e| {
            TestCaseError::fail(format!("not JSON ({e}): {}", String::from_utf8_lossy(&out)))
        })?;
        let tree = convert_object(&object, desired).map_err(|e| {
            TestCaseError::fail(format!(
                "the tree converter refused what the text one wrote: {e}"
            ))
        })?;
        // As text, so that the order of members and the annotation's bytes count too.
        prop_assert_eq!(
            serde_json::to_string(&ours).expect("serializes"),
            serde_json::to_string(&tree).expect("serializes"),
            "to {}",
            desired
        );
    }
    Ok(written)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn stored_objects_come_out_as_the_tree_converter_writes_them(
        object in prop_oneof![stored_v1(), read_v1alpha1()],
        pretty in any::<bool>(),
    ) {
        let text = if pretty {
            serde_json::to_string_pretty(&object)
        } else {
            serde_json::to_string(&object)
        }
        .expect("serializes");
        same_as_the_tree(&text)?;
    }

    #[test]
    fn numbers_spelled_any_way_come_out_as_the_tree_converter_writes_them(
        object in prop_oneof![stored_v1(), read_v1alpha1()],
        spelling in 0u8..4,
    ) {
        same_as_the_tree(&respelled(&object.to_string(), spelling))?;
    }

    #[test]
    fn odd_objects_come_out_as_the_tree_converter_writes_them_or_are_declined(
        object in any_shape(),
    ) {
        same_as_the_tree(&object.to_string())?;
    }

    #[test]
    fn any_json_is_converted_as_the_tree_converts_it_or_declined(value in any_json()) {
        same_as_the_tree(&value.to_string())?;
    }
}

/// `text` (JSON) with its numbers spelled as `serde_json` never writes them but a client may
/// (`3.0`, `3e0`, `-0`, `1.50`), which `serde_json` reads back to the same value.
fn respelled(text: &str, spelling: u8) -> String {
    let bytes = text.as_bytes();
    let (mut out, mut at, mut in_string) = (Vec::with_capacity(2 * bytes.len()), 0, false);
    while let Some(&byte) = bytes.get(at) {
        let starts_number = !in_string && (byte == b'-' || byte.is_ascii_digit());
        if starts_number {
            let end = bytes[at..]
                .iter()
                .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .map_or(bytes.len(), |length| at + length);
            out.extend_from_slice(respell(&text[at..end], spelling).as_bytes());
            at = end;
            continue;
        }
        out.push(byte);
        if in_string && byte == b'\\' {
            // The escaped character, whatever it is, stays in the string.
            at += 1;
            out.extend(bytes.get(at));
        } else if byte == b'"' {
            in_string = !in_string;
        }
        at += 1;
    }
    String::from_utf8(out).expect("UTF-8 in, UTF-8 out")
}

fn respell(number: &str, spelling: u8) -> String {
    let fraction = number.contains('.');
    let exponent = number.contains(['e', 'E']);
    match spelling {
        0 if !fraction && !exponent => format!("{number}.0"),
        1 if !exponent => format!("{number}e0"),
        2 if number == "0" => "-0".to_owned(),
        3 if fraction && !exponent => format!("{number}0"),
        _ => number.to_owned(),
    }
}

/// The objects the API server sends most take the text converter's way, in both directions.
#[test]
fn objects_as_the_operator_stores_them_are_written_not_declined() {
    let v1 = json!({
        "apiVersion": V1, "kind": "TrustyAIService",
        "metadata": {"name": "t", "namespace": "ns", "generation": 2,
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"a\":1}"},
                     "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"replicas": 1, "storage": {"format": "PVC", "size": "1Gi", "retention": "Retain"},
                 "image": "quay.io/x:1", "metrics": {"schedule": "5s"}},
        "status": {"observedGeneration": 2, "phase": "Ready", "image": "quay.io/x:1",
                   "conditions": [
                       {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 2},
                       {"type": "Ready", "status": "garbage", "reason": "R"},
                       {"type": "Available", "status": "False", "observedGeneration": 1}
                   ]},
    });
    let mut alpha = convert_object(&v1, V1ALPHA1).expect("converts");
    // A v1alpha1 object written by a client: no annotation, a status v1 spells otherwise.
    if let Some(annotations) = alpha["metadata"]["annotations"].as_object_mut() {
        annotations.retain(|key, _| key.starts_with("kubectl"));
    }
    alpha["status"]["conditions"][0]["status"] = json!("true");
    for object in [&v1, &alpha] {
        for text in [
            serde_json::to_string(object).expect("serializes"),
            serde_json::to_string_pretty(object).expect("serializes"),
        ] {
            let written = same_as_the_tree(&text).expect("the same as the tree converter");
            assert_eq!(written, [true, true], "{text}");
        }
    }
}

/// What the text converter is not sure of goes to the tree converter.
#[test]
fn what_the_tree_converter_must_judge_is_declined() {
    let declined = [
        // The converter's annotation: restoring is the tree converter's.
        json!({"apiVersion": V1, "metadata": {"annotations": {"trustyai.opendatahub.io/conversion-preserved": "{}"}}, "spec": {"image": "x"}}),
        // apiVersion not first.
        json!({"kind": "TrustyAIService", "apiVersion": V1, "spec": {"image": "x"}}),
        // Not ours.
        json!({"apiVersion": "example.com/v1", "spec": {}}),
        // A v1-only field in a v1alpha1 object: the way back carries it.
        json!({"apiVersion": V1ALPHA1, "metadata": {"annotations": {}}, "spec": {"image": "x"}}),
        // Something to keep and no annotations to keep it in.
        json!({"apiVersion": V1, "metadata": {}, "spec": {"image": "x"}}),
        // A version-only field that is not a scalar.
        json!({"apiVersion": V1, "metadata": {"annotations": {}}, "spec": {"image": {"a": 1}}}),
    ];
    for object in declined {
        let raw: Box<RawValue> = serde_json::from_str(&object.to_string()).expect("valid JSON");
        for desired in [V1, V1ALPHA1] {
            let mut out = Vec::new();
            let written = convert_object_text(&raw, desired, &mut out);
            // An object in the desired version is written back as it came.
            if object["apiVersion"] == desired && written {
                assert_eq!(out, object.to_string().as_bytes());
                continue;
            }
            assert!(!written, "{object} to {desired}");
            assert!(out.is_empty());
        }
    }
    // A member twice, or an escaped key where the converter looks.
    for text in [
        r#"{"apiVersion":"trustyai.opendatahub.io/v1","spec":{"image":"a","image":"b"},"metadata":{"annotations":{}}}"#,
        r#"{"apiVersion":"trustyai.opendatahub.io/v1","spec":{"x":1,"x":2}}"#,
        r#"{"apiVersion":"trustyai.opendatahub.io/v1","spec":{"im\u0061ge":"a"}}"#,
    ] {
        let raw: Box<RawValue> = serde_json::from_str(text).expect("valid JSON");
        for desired in [V1, V1ALPHA1] {
            assert!(
                !convert_object_text(&raw, desired, &mut Vec::new()),
                "{text}"
            );
        }
    }
}
