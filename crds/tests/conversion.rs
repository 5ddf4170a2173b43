//! Conversion between v1alpha1 and v1: fixtures (the Go operator's samples and objects, odd
//! stored objects, ConversionReviews good and bad, golden outputs) and properties over thousands
//! of generated objects (round trips are identities, conversion never fails, output is
//! deterministic).
//!
//! Golden files (`*.expected-*.json`) are rewritten by running with `TRUSTYAI_BLESS=1`; review the
//! diff before committing.

// Helpers shared by the tests panic on purpose: a failed expectation is a failed test.
#![allow(clippy::expect_used)]

use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{Map, Value, json};
use trustyai_crds::contract::CONVERSION_PRESERVED_ANNOTATION as KEY;
use trustyai_crds::conversion::{ConversionError, convert_object};

const V1: &str = "trustyai.opendatahub.io/v1";
const V1ALPHA1: &str = "trustyai.opendatahub.io/v1alpha1";
const MAX_ANNOTATION_BYTES: usize = 32 * 1024;

// ---------------------------------------------------------------------------------------------
// Helpers

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn fixture(name: &str) -> Value {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match trustyai_crds::manifests::parse_documents(&text) {
        Ok(mut docs) if docs.len() == 1 => docs.remove(0),
        Ok(docs) => panic!("{}: {} documents, expected one", path.display(), docs.len()),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Compares with `conversion/<name>`, or writes it when `TRUSTYAI_BLESS` is set.
fn golden(name: &str, actual: &Value) {
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

fn down(object: &Value) -> Value {
    convert_object(object, V1ALPHA1).expect("converts to v1alpha1")
}

fn up(object: &Value) -> Value {
    convert_object(object, V1).expect("converts to v1")
}

fn other(api_version: &str) -> &'static str {
    if api_version == V1 { V1ALPHA1 } else { V1 }
}

fn annotation(object: &Value) -> Option<&str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(KEY)?
        .as_str()
}

fn kept(object: &Value) -> Value {
    serde_json::from_str(annotation(object).expect("converter annotation")).expect("JSON")
}

/// `metadata` without the converter's annotation (and without containers left empty by it).
fn metadata_without_annotation(object: &Value) -> Option<Value> {
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
fn check_output(input: &Value, output: &Value, desired: &str) {
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

fn conditions(object: &Value) -> Vec<&Map<String, Value>> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

/// The fixture `name`, after checking that it converts there and back unchanged.
fn round_tripped(name: &str) -> Value {
    let object = fixture(name);
    assert_round_trip(&object);
    object
}

fn assert_round_trip(object: &Value) {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let there = convert_object(object, other(api_version)).expect("converts");
    check_output(object, &there, other(api_version));
    let back = convert_object(&there, api_version).expect("converts back");
    check_output(&there, &back, api_version);
    assert_eq!(&back, object, "round trip through {there}");
}

// ---------------------------------------------------------------------------------------------
// Fixtures: the Go operator's samples and objects

#[test]
fn go_operator_samples_convert_both_ways_and_back() {
    for name in [
        "go-operator/v1-sample.yaml",
        "go-operator/v1alpha1-example.yaml",
    ] {
        let sample = fixture(name);
        assert_round_trip(&sample);
        let there = convert_object(
            &sample,
            other(sample["apiVersion"].as_str().expect("apiVersion")),
        )
        .expect("converts");
        // Neither sample has anything only v1 has: the spec is copied field for field.
        assert_eq!(there["spec"], sample["spec"], "{name}");
        assert_eq!(there["metadata"], sample["metadata"], "{name}");
        assert_eq!(annotation(&there), None, "{name}");
    }
}

#[test]
fn v1_written_by_the_go_operator() {
    let v1 = round_tripped("conversion/v1-go-written.json");
    let alpha = down(&v1);
    golden("v1-go-written.expected-v1alpha1.json", &alpha);
    // Nothing invented: conditions without lastTransitionTime stay without one, empty reasons
    // stay empty, the other annotations stay.
    let degraded = conditions(&alpha)
        .into_iter()
        .find(|c| c["type"] == "Degraded")
        .expect("Degraded");
    assert_eq!(degraded.get("lastTransitionTime"), None);
    assert_eq!(degraded["reason"], "");
    assert!(
        alpha["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let kept = kept(&alpha);
    assert_eq!(kept["restores"], "v1");
    assert_eq!(kept["status"], json!({"observedGeneration": 3}));
    // One entry per condition that had an observedGeneration (Degraded had none).
    assert_eq!(kept["conditions"].as_array().map(Vec::len), Some(7));
}

#[test]
fn v1_with_every_v1_only_field() {
    let v1 = round_tripped("conversion/v1-full.json");
    let alpha = down(&v1);
    golden("v1-full.expected-v1alpha1.json", &alpha);
    let kept = kept(&alpha);
    assert_eq!(
        kept["spec"],
        json!({"image": "quay.io/trustyai/trustyai-service:v0.28.0", "storage": {"retention": "Delete"}})
    );
    assert_eq!(
        kept["status"],
        json!({"observedGeneration": 7, "image": "quay.io/trustyai/trustyai-service:v0.28.0"})
    );
    // The out-of-range v1 status "Partial" is shown as is and kept for the way back.
    assert_eq!(alpha["status"]["conditions"][2]["status"], "Partial");
    // The metadata had no annotations: the converter created the map and says so.
    assert_eq!(kept["created"], "annotations");
    // Integers beyond 2^53 are carried exactly.
    assert_eq!(
        alpha["spec"]["metrics"]["batchSize"],
        json!(9007199254740993u64)
    );
}

#[test]
fn v1alpha1_condition_statuses_in_any_spelling() {
    let alpha = round_tripped("conversion/v1alpha1-odd-statuses.json");
    let v1 = up(&alpha);
    golden("v1alpha1-odd-statuses.expected-v1.json", &v1);
    let statuses: Vec<&Value> = conditions(&v1).iter().map(|c| &c["status"]).collect();
    assert_eq!(
        statuses,
        ["True", "True", "Unknown", "False", "Unknown", "Unknown"]
    );
    // status.ready is not a condition: carried as it is.
    assert_eq!(v1["status"]["ready"], "true");
    // The empty annotations map was there before: it holds the annotation, no "created".
    assert_eq!(kept(&v1).get("created"), None);
}

#[test]
fn objects_without_status_or_metadata() {
    let v1 = round_tripped("conversion/v1-no-metadata.json");
    let alpha = down(&v1);
    assert_eq!(kept(&alpha)["created"], "metadata");
    assert_eq!(
        alpha["metadata"]
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["annotations".to_owned()])
    );
    assert_eq!(
        up(&alpha),
        v1,
        "metadata created for the annotation goes away again"
    );

    let alpha = round_tripped("conversion/v1alpha1-no-status.json");
    let v1 = up(&alpha);
    assert_eq!(v1.get("status"), None, "no status is invented");
    assert_eq!(annotation(&v1), None);

    for bare in [
        json!({"apiVersion": V1}),
        json!({"apiVersion": V1ALPHA1, "kind": "TrustyAIService"}),
        json!({"apiVersion": V1, "metadata": {}}),
        json!({"apiVersion": V1, "metadata": {"annotations": {}}}),
        json!({"apiVersion": V1, "spec": {}, "status": {}}),
        json!({"apiVersion": V1, "spec": null, "status": []}),
    ] {
        assert_round_trip(&bare);
    }
}

#[test]
fn empty_annotation_maps_are_kept_exactly() {
    // An empty map that was there stays; one the converter created goes.
    for metadata in [
        json!({"annotations": {}}),
        json!({"name": "x"}),
        json!({}),
        json!({"annotations": {"other": "1"}}),
    ] {
        for spec in [json!({"image": "quay.io/x:1"}), json!({"replicas": 1})] {
            let v1 = json!({"apiVersion": V1, "metadata": metadata, "spec": spec});
            assert_round_trip(&v1);
        }
    }
    let v1 = json!({"apiVersion": V1, "spec": {"replicas": 1}});
    assert_eq!(down(&v1).get("metadata"), None);
}

// ---------------------------------------------------------------------------------------------
// A change made through v1alpha1 wins over the preserved copy

#[test]
fn a_condition_status_edited_through_v1alpha1_wins() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    // Edit: Ready becomes "true" (a v1alpha1 spelling), Degraded's "Partial" becomes "False".
    alpha["status"]["conditions"][0]["status"] = json!("true");
    alpha["status"]["conditions"][2]["status"] = json!("False");
    let back = up(&alpha);
    let ready = &back["status"]["conditions"][0];
    assert_eq!(ready["status"], "True");
    // The condition was rewritten: its preserved observedGeneration no longer describes it.
    assert_eq!(ready.get("observedGeneration"), None);
    let degraded = &back["status"]["conditions"][2];
    assert_eq!(degraded["status"], "False", "not the preserved \"Partial\"");
    assert_eq!(degraded.get("observedGeneration"), None);
    // Untouched condition: everything restored.
    assert_eq!(
        back["status"]["conditions"][1],
        v1["status"]["conditions"][1]
    );
    // Everything else restored too.
    assert_eq!(back["spec"], v1["spec"]);
    assert_eq!(back["status"]["observedGeneration"], 7);
    // And the v1alpha1 spelling is kept for the next read through v1alpha1.
    assert_eq!(down(&back)["status"]["conditions"][0]["status"], "true");
}

#[test]
fn a_condition_removed_through_v1alpha1_does_not_come_back() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    let list = alpha["status"]["conditions"]
        .as_array_mut()
        .expect("conditions");
    list.remove(1); // DBAvailable
    let back = up(&alpha);
    let types: Vec<&Value> = conditions(&back).iter().map(|c| &c["type"]).collect();
    assert_eq!(types, ["Ready", "Degraded"]);
    // The others, matched by type, keep their preserved data even though they moved.
    assert_eq!(
        back["status"]["conditions"][1],
        v1["status"]["conditions"][2]
    );
}

#[test]
fn reordered_conditions_are_matched_by_type() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    alpha["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .reverse();
    let back = up(&alpha);
    let mut expected: Vec<Value> = v1["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .clone();
    expected.reverse();
    assert_eq!(back["status"]["conditions"], Value::Array(expected));
}

#[test]
fn a_parent_removed_through_v1alpha1_stays_removed() {
    let v1 = fixture("conversion/v1-full.json");
    let mut alpha = down(&v1);
    alpha["spec"]
        .as_object_mut()
        .expect("spec")
        .shift_remove("storage");
    alpha["status"] = json!(null);
    let back = up(&alpha);
    assert_eq!(
        back["spec"].get("storage"),
        None,
        "no storage for the kept retention"
    );
    assert_eq!(back["spec"]["image"], v1["spec"]["image"]);
    assert_eq!(back["status"], json!(null));
}

#[test]
fn the_operator_changing_a_condition_drops_the_v1alpha1_spelling() {
    let alpha = fixture("conversion/v1alpha1-odd-statuses.json");
    let mut v1 = up(&alpha);
    // The operator (through v1) sets Ready to False; the stored "true" must not come back.
    v1["status"]["conditions"][0]["status"] = json!("False");
    let read = down(&v1);
    assert_eq!(read["status"]["conditions"][0]["status"], "False");
    // Untouched conditions keep their spelling.
    assert_eq!(read["status"]["conditions"][2]["status"], "garbage");
    assert_round_trip(&v1);
}

#[test]
fn convert_object_refuses_only_what_it_must() {
    assert_eq!(
        convert_object(&json!("x"), V1),
        Err(ConversionError::NotAnObject { found: "string" })
    );
    assert_eq!(
        convert_object(&json!({}), V1),
        Err(ConversionError::MissingApiVersion)
    );
    assert!(matches!(
        convert_object(
            &json!({"apiVersion": "trustyai.opendatahub.io/v1beta1"}),
            V1
        ),
        Err(ConversionError::UnknownApiVersion { .. })
    ));
    assert!(matches!(
        convert_object(&json!({"apiVersion": V1}), "v1"),
        Err(ConversionError::UnknownDesiredVersion { .. })
    ));
}

#[test]
fn oversized_data_is_bounded_and_flagged() {
    // An image far beyond the schema's limit (only an invalid stored object has one).
    let v1 = json!({
        "apiVersion": V1,
        "spec": {"image": "i".repeat(40 * 1024), "storage": {"format": "PVC", "retention": "Delete"}},
        "status": {"observedGeneration": 1}
    });
    let alpha = down(&v1);
    check_output(&v1, &alpha, V1ALPHA1);
    let kept = kept(&alpha);
    assert_eq!(kept["truncated"], true);
    assert_eq!(kept["spec"], json!({"storage": {"retention": "Delete"}}));
    assert_eq!(kept["status"], json!({"observedGeneration": 1}));
    let back = up(&alpha);
    assert_eq!(back["spec"].get("image"), None, "dropped, as documented");
    assert_eq!(back["spec"]["storage"]["retention"], "Delete");
}

// ---------------------------------------------------------------------------------------------
// Properties over generated objects

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-zA-Z0-9._/ -]{1,12}",
        "\\PC{0,6}",
        Just("Not Ready".to_owned()),
    ]
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        (0i64..10).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(i64::MIN)),
        // Decimals of at most 15 significant digits: serde_json (without float_roundtrip) reads
        // longer ones back to within one unit in the last place only.
        (-100_000_000_000_000i64..100_000_000_000_000).prop_map(|n| Value::from(n as f64 / 100.0)),
    ]
    .boxed()
}

/// Usually `usual`; sometimes null, a number or a string instead.
fn odd(usual: impl Strategy<Value = Value> + 'static) -> BoxedStrategy<Value> {
    prop_oneof![
        12 => usual,
        1 => Just(Value::Null),
        1 => number(),
        1 => text().prop_map(Value::from),
    ]
    .boxed()
}

/// One of the usual values, or any string.
fn one_of(options: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop_oneof![
        4 => prop::sample::select(options).prop_map(Value::from),
        1 => text().prop_map(Value::from),
    ]
    .boxed()
}

fn string() -> BoxedStrategy<Value> {
    text().prop_map(Value::from).boxed()
}

/// An object with the fields that are `Some`.
fn object(fields: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect(),
    )
}

fn maybe(s: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    proptest::option::weighted(0.7, s)
}

/// A field only v1 has: absent from generated v1alpha1 objects (the API server prunes it).
fn v1_only(v1: bool, s: impl Strategy<Value = Value> + 'static) -> BoxedStrategy<Option<Value>> {
    if v1 {
        maybe(s).boxed()
    } else {
        Just(None).boxed()
    }
}

const CONDITION_TYPES: &[&str] = &[
    "Ready",
    "Available",
    "PVCAvailable",
    "DBAvailable",
    "RouteAvailable",
    "InferenceServicesPresent",
    "ProvisioningSucceeded",
    "Degraded",
];
const STATUSES: &[&str] = &[
    "True", "False", "Unknown", "true", "TRUE", "false", "unknown", "garbage", "", "Partial",
];
const TIMES: &[&str] = &[
    "2025-01-01T00:00:00Z",
    "2025-01-01T00:00:01Z",
    "2024-12-31T23:59:59Z",
];
const REASONS: &[&str] = &["", "AllComponentsReady", "PVCNotFound", "DBConnectionError"];

fn condition(v1: bool) -> BoxedStrategy<Value> {
    (
        proptest::option::weighted(0.95, odd(one_of(CONDITION_TYPES))),
        proptest::option::weighted(0.9, odd(one_of(STATUSES))),
        v1_only(v1, number()),
        maybe(odd(one_of(TIMES))),
        maybe(one_of(REASONS)),
        maybe(string()),
        proptest::option::weighted(0.1, string()),
    )
        .prop_map(|(t, status, generation, time, reason, message, extra)| {
            object(vec![
                ("type", t),
                ("status", status),
                ("observedGeneration", generation),
                ("lastTransitionTime", time),
                ("reason", reason),
                ("message", message),
                ("extra", extra),
            ])
        })
        .boxed()
}

fn conditions_list(v1: bool) -> BoxedStrategy<Value> {
    prop::collection::vec(
        prop_oneof![12 => condition(v1), 1 => string(), 1 => Just(json!(null))],
        0..7,
    )
    .prop_map(Value::Array)
    .boxed()
}

fn spec(v1: bool) -> BoxedStrategy<Value> {
    let storage = (
        maybe(odd(one_of(&["PVC", "DATABASE"]))),
        maybe(odd(one_of(&["/inputs", "/data"]))),
        maybe(odd(one_of(&["1Gi", "500Mi", "0"]))),
        maybe(odd(string())),
        maybe(odd(string())),
        v1_only(v1, odd(one_of(&["Retain", "Delete"]))),
    )
        .prop_map(|(format, folder, size, db, pv, retention)| {
            object(vec![
                ("format", format),
                ("folder", folder),
                ("size", size),
                ("databaseConfigurations", db),
                ("pv", pv),
                ("retention", retention),
            ])
        });
    let data = (maybe(odd(string())), maybe(odd(one_of(&["CSV"]))))
        .prop_map(|(filename, format)| object(vec![("filename", filename), ("format", format)]));
    let metrics = (maybe(odd(one_of(&["5s", "1m30s"]))), maybe(number()))
        .prop_map(|(schedule, batch)| object(vec![("schedule", schedule), ("batchSize", batch)]));
    (
        maybe(odd(number())),
        maybe(odd(storage)),
        maybe(odd(data)),
        maybe(odd(metrics)),
        v1_only(v1, odd(string())),
        proptest::option::weighted(0.1, string()),
    )
        .prop_map(|(replicas, storage, data, metrics, image, extra)| {
            object(vec![
                ("replicas", replicas),
                ("storage", storage),
                ("data", data),
                ("metrics", metrics),
                ("image", image),
                ("unknownField", extra),
            ])
        })
        .boxed()
}

fn status(v1: bool) -> BoxedStrategy<Value> {
    (
        v1_only(v1, odd(number())),
        maybe(odd(one_of(&["Ready", "Not Ready"]))),
        maybe(odd(number())),
        maybe(odd(one_of(&["True", "False", "true"]))),
        maybe(odd(conditions_list(v1))),
        v1_only(v1, odd(string())),
    )
        .prop_map(|(generation, phase, replicas, ready, conditions, image)| {
            object(vec![
                ("observedGeneration", generation),
                ("phase", phase),
                ("replicas", replicas),
                ("ready", ready),
                ("conditions", conditions),
                ("image", image),
            ])
        })
        .boxed()
}

fn other_annotations() -> BoxedStrategy<std::collections::BTreeMap<String, String>> {
    prop::collection::btree_map("[a-z./]{1,10}", text(), 0..3).boxed()
}

fn annotations() -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        3 => Just(None),
        2 => other_annotations().prop_map(|m| Some(json!(m))),
        1 => Just(Some(json!({}))),
        // A converter annotation that is not (or no longer) readable.
        1 => (other_annotations(), prop_oneof![
                string(),
                Just(json!("{\"restores\":\"v1\",\"spec\":{\"image\":\"stale\"}}")),
                Just(json!("{\"restores\":\"v1alpha1\",\"conditions\":[{\"seen\":{\"type\":\"Ready\",\"status\":\"True\"},\"restore\":{\"status\":\"true\"}}]}")),
                Just(json!("{\"restores\":\"v1alpha1\",\"created\":\"metadata\"}")),
            ])
            .prop_map(|(m, v)| {
                let mut map: Map<String, Value> =
                    m.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
                map.insert(KEY.to_owned(), v);
                Some(Value::Object(map))
            }),
    ]
    .boxed()
}

fn metadata() -> BoxedStrategy<Value> {
    (
        maybe(string()),
        maybe(one_of(&["ns", "default"])),
        maybe(number()),
        maybe(Just(json!({"app": "trustyai"}))),
        annotations(),
        maybe(Just(json!(["trustyai.opendatahub.io/finalizer"]))),
    )
        .prop_map(
            |(name, namespace, generation, labels, annotations, finalizers)| {
                object(vec![
                    ("name", name),
                    ("namespace", namespace),
                    ("generation", generation),
                    ("labels", labels),
                    ("annotations", annotations),
                    ("finalizers", finalizers),
                ])
            },
        )
        .boxed()
}

/// A TrustyAIService of one version as the API server could hold it.
fn service(v1: bool) -> BoxedStrategy<Value> {
    let api_version = if v1 { V1 } else { V1ALPHA1 };
    (
        proptest::option::weighted(0.95, Just(json!("TrustyAIService"))),
        proptest::option::weighted(0.9, metadata()),
        maybe(prop_oneof![12 => spec(v1), 1 => odd(Just(json!([])))]),
        maybe(prop_oneof![12 => status(v1), 1 => odd(Just(json!([])))]),
    )
        .prop_map(move |(kind, metadata, spec, status)| {
            object(vec![
                ("apiVersion", Some(json!(api_version))),
                ("kind", kind),
                ("metadata", metadata),
                ("spec", spec),
                ("status", status),
            ])
        })
        .boxed()
}

/// Status changes made in the other version meanwhile: (position, new status) pairs, and
/// whether to drop the last condition.
fn edits(statuses: &'static [&'static str]) -> impl Strategy<Value = (Vec<(usize, Value)>, bool)> {
    (
        prop::collection::vec((0usize..7, one_of(statuses)), 0..3),
        proptest::bool::weighted(0.2),
    )
}

fn edit(mut object: Value, (changes, drop_last): (Vec<(usize, Value)>, bool)) -> Value {
    if let Some(list) = object
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for (position, status) in changes {
            let len = list.len();
            if let Some(condition) = list
                .get_mut(position % len.max(1))
                .and_then(Value::as_object_mut)
            {
                condition.insert("status".into(), status);
            }
        }
        if drop_last {
            list.pop();
        }
    }
    object
}

/// An object with a history: generated in either version, then converted back and forth a few
/// times, with condition statuses edited or a condition dropped in between (by the operator
/// through v1, or by a client through v1alpha1). This produces stale, carried and nested
/// converter annotations, as real objects collect them. Ends in v1 when `end_in_v1`.
fn with_history(end_in_v1: bool) -> BoxedStrategy<Value> {
    (
        any::<bool>(),
        service(true),
        service(false),
        prop::collection::vec(edits(STATUSES), 1..5),
    )
        .prop_map(move |(start_in_v1, v1, alpha, steps)| {
            let mut object = if start_in_v1 { v1 } else { alpha };
            for step in steps {
                let api_version = object["apiVersion"].as_str().unwrap_or(V1).to_owned();
                let converted = convert_object(&object, other(&api_version)).expect("converts");
                object = edit(converted, step);
            }
            if (object["apiVersion"] == V1) != end_in_v1 {
                let api_version = object["apiVersion"].as_str().unwrap_or(V1).to_owned();
                object = convert_object(&object, other(&api_version)).expect("converts");
            }
            object
        })
        .boxed()
}

/// v1 objects as stored: generated, or with a history.
fn stored_v1() -> BoxedStrategy<Value> {
    prop_oneof![service(true), with_history(true)].boxed()
}

/// v1alpha1 objects as read or written by clients: generated, or with a history.
fn read_v1alpha1() -> BoxedStrategy<Value> {
    prop_oneof![service(false), with_history(false)].boxed()
}

/// Any JSON at all, a few levels deep.
fn any_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        string(),
        one_of(STATUSES),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z]{1,8}",
                    prop::sample::select(
                        &[
                            "type",
                            "status",
                            "conditions",
                            "observedGeneration",
                            "image",
                            "storage",
                            "retention",
                            "annotations",
                            "lastTransitionTime",
                            KEY,
                        ][..]
                    )
                    .prop_map(str::to_owned),
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

fn config() -> ProptestConfig {
    ProptestConfig {
        // PROPTEST_CASES raises the count for a longer soak.
        cases: ProptestConfig::default().cases.max(2000),
        // Keep failures in the test output rather than in files next to the tests.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn v1_to_v1alpha1_and_back_is_the_identity(v1 in stored_v1()) {
        assert_round_trip(&v1);
    }

    #[test]
    fn v1alpha1_to_v1_and_back_is_the_identity(alpha in read_v1alpha1()) {
        assert_round_trip(&alpha);
    }

    #[test]
    fn conversion_is_deterministic(object in prop_oneof![stored_v1(), read_v1alpha1()]) {
        for desired in [V1, V1ALPHA1] {
            let first = convert_object(&object, desired).expect("converts");
            let second = convert_object(&object, desired).expect("converts");
            prop_assert_eq!(
                serde_json::to_string(&first).expect("serializes"),
                serde_json::to_string(&second).expect("serializes")
            );
            check_output(&object, &first, desired);
        }
    }

    #[test]
    fn conversion_never_fails_for_our_objects(
        v1 in any::<bool>(),
        metadata in proptest::option::of(any_json()),
        annotations in proptest::option::of(any_json()),
        spec in proptest::option::of(any_json()),
        status in proptest::option::of(any_json()),
        extra in proptest::option::of(any_json()),
    ) {
        let mut object = object(vec![
            ("apiVersion", Some(json!(if v1 { V1 } else { V1ALPHA1 }))),
            ("metadata", metadata),
            ("spec", spec),
            ("status", status),
            ("extra", extra),
        ]);
        if let (Some(annotations), Some(metadata)) =
            (annotations, object.get_mut("metadata").and_then(Value::as_object_mut))
        {
            metadata.insert("annotations".into(), annotations);
        }
        for desired in [V1, V1ALPHA1] {
            let converted = convert_object(&object, desired);
            prop_assert!(converted.is_ok(), "{:?}", converted);
            let converted = converted.expect("checked");
            prop_assert_eq!(&converted["apiVersion"], desired);
            if let Some(text) = annotation(&converted) {
                prop_assert!(text.len() <= MAX_ANNOTATION_BYTES);
            }
            // And back again, still without failing.
            prop_assert!(convert_object(&converted, other(desired)).is_ok());
        }
    }

    #[test]
    fn any_json_gets_an_answer_not_a_panic(value in any_json(), desired in one_of(&[V1, V1ALPHA1])) {
        let desired = desired.as_str().unwrap_or_default().to_owned();
        let _ = convert_object(&value, &desired);
    }
}
