//! Strategies for the properties: v1 and v1alpha1 objects as stored or edited, with odd values,
//! and any JSON at all.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use trustyai_crds::contract::CONVERSION_PRESERVED_ANNOTATION as KEY;
use trustyai_crds::conversion::convert_object;

use crate::support::{V1, V1ALPHA1, other};

pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-zA-Z0-9._/ -]{1,12}",
        "\\PC{0,6}",
        Just("Not Ready".to_owned()),
    ]
}

pub(crate) fn number() -> BoxedStrategy<Value> {
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
pub(crate) fn odd(usual: impl Strategy<Value = Value> + 'static) -> BoxedStrategy<Value> {
    prop_oneof![
        12 => usual,
        1 => Just(Value::Null),
        1 => number(),
        1 => text().prop_map(Value::from),
    ]
    .boxed()
}

/// One of the usual values, or any string.
pub(crate) fn one_of(options: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop_oneof![
        4 => prop::sample::select(options).prop_map(Value::from),
        1 => text().prop_map(Value::from),
    ]
    .boxed()
}

pub(crate) fn string() -> BoxedStrategy<Value> {
    text().prop_map(Value::from).boxed()
}

/// An object with the fields that are `Some`.
pub(crate) fn object(fields: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect(),
    )
}

pub(crate) fn maybe(s: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    proptest::option::weighted(0.7, s)
}

/// A field only v1 has: absent from generated v1alpha1 objects (the API server prunes it).
pub(crate) fn v1_only(
    v1: bool,
    s: impl Strategy<Value = Value> + 'static,
) -> BoxedStrategy<Option<Value>> {
    if v1 {
        maybe(s).boxed()
    } else {
        Just(None).boxed()
    }
}

pub(crate) const CONDITION_TYPES: &[&str] = &[
    "Ready",
    "Available",
    "PVCAvailable",
    "DBAvailable",
    "RouteAvailable",
    "InferenceServicesPresent",
    "ProvisioningSucceeded",
    "Degraded",
];
pub(crate) const STATUSES: &[&str] = &[
    "True", "False", "Unknown", "true", "TRUE", "false", "unknown", "garbage", "", "Partial",
];
pub(crate) const TIMES: &[&str] = &[
    "2025-01-01T00:00:00Z",
    "2025-01-01T00:00:01Z",
    "2024-12-31T23:59:59Z",
];
pub(crate) const REASONS: &[&str] = &["", "AllComponentsReady", "PVCNotFound", "DBConnectionError"];

pub(crate) fn condition(v1: bool) -> BoxedStrategy<Value> {
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

pub(crate) fn conditions_list(v1: bool) -> BoxedStrategy<Value> {
    prop::collection::vec(
        prop_oneof![12 => condition(v1), 1 => string(), 1 => Just(json!(null))],
        0..7,
    )
    .prop_map(Value::Array)
    .boxed()
}

pub(crate) fn spec(v1: bool) -> BoxedStrategy<Value> {
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

pub(crate) fn status(v1: bool) -> BoxedStrategy<Value> {
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

pub(crate) fn other_annotations() -> BoxedStrategy<std::collections::BTreeMap<String, String>> {
    prop::collection::btree_map("[a-z./]{1,10}", text(), 0..3).boxed()
}

pub(crate) fn annotations() -> BoxedStrategy<Option<Value>> {
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

pub(crate) fn metadata() -> BoxedStrategy<Value> {
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
pub(crate) fn service(v1: bool) -> BoxedStrategy<Value> {
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
pub(crate) fn edits(
    statuses: &'static [&'static str],
) -> impl Strategy<Value = (Vec<(usize, Value)>, bool)> {
    (
        prop::collection::vec((0usize..7, one_of(statuses)), 0..3),
        proptest::bool::weighted(0.2),
    )
}

pub(crate) fn edit(mut object: Value, (changes, drop_last): (Vec<(usize, Value)>, bool)) -> Value {
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
pub(crate) fn with_history(end_in_v1: bool) -> BoxedStrategy<Value> {
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
pub(crate) fn stored_v1() -> BoxedStrategy<Value> {
    prop_oneof![service(true), with_history(true)].boxed()
}

/// v1alpha1 objects as read or written by clients: generated, or with a history.
pub(crate) fn read_v1alpha1() -> BoxedStrategy<Value> {
    prop_oneof![service(false), with_history(false)].boxed()
}

/// Any JSON at all, a few levels deep.
pub(crate) fn any_json() -> BoxedStrategy<Value> {
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

/// An object of either version whose `metadata`, `metadata.annotations`, `spec`, `status` and
/// one more member are any JSON or absent.
pub(crate) fn any_shape() -> BoxedStrategy<Value> {
    (
        any::<bool>(),
        proptest::option::of(any_json()),
        proptest::option::of(any_json()),
        proptest::option::of(any_json()),
        proptest::option::of(any_json()),
        proptest::option::of(any_json()),
    )
        .prop_map(|(v1, metadata, annotations, spec, status, extra)| {
            let mut object = object(vec![
                ("apiVersion", Some(json!(if v1 { V1 } else { V1ALPHA1 }))),
                ("metadata", metadata),
                ("spec", spec),
                ("status", status),
                ("extra", extra),
            ]);
            if let (Some(annotations), Some(metadata)) = (
                annotations,
                object.get_mut("metadata").and_then(Value::as_object_mut),
            ) {
                metadata.insert("annotations".into(), annotations);
            }
            object
        })
        .boxed()
}
