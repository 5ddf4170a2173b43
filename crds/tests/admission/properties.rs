//! Properties over generated specs: defaulting is minimal, idempotent and consistent, validation
//! never panics, and an unchanged spec is always allowed.

use json_patch::{Patch, PatchOperation};
use proptest::prelude::*;
use serde_json::{Value, json};
use trustyai_crds::defaults::{Operation, defaulted, defaults_patch};
use trustyai_crds::validation::Verdict;

use crate::support::{check, object, with};

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![
            "PVC",
            "DATABASE",
            "FOO",
            "",
            "/inputs",
            "rel",
            "1Gi",
            "1Gx",
            "0",
            "5s",
            "500ms",
            "x.csv",
            "a/b",
            "CSV",
            "JSON",
            "Retain",
            "Delete",
            "pv-1",
            "Bad_Name",
            "quay.io/trustyai/s:v1",
        ])
        .prop_map(Value::from),
    ]
}

/// Fields a spec may hold, and the objects above them (which a scalar may replace).
const SPEC_PATHS: [&str; 15] = [
    "/replicas",
    "/storage/format",
    "/storage/folder",
    "/storage/size",
    "/storage/databaseConfigurations",
    "/storage/pv",
    "/storage/retention",
    "/data/filename",
    "/data/format",
    "/metrics/schedule",
    "/metrics/batchSize",
    "/image",
    "/storage",
    "/data",
    "/metrics",
];

/// Specs of every shape: random fields set to random (often wrong) values. A flat list of
/// (field, value) pairs keeps the generated value trees small.
fn spec_like() -> impl Strategy<Value = Value> {
    prop::collection::vec((0..SPEC_PATHS.len(), scalar()), 0..16).prop_map(|fields| {
        fields.into_iter().fold(json!({}), |spec, (i, value)| {
            with(spec, SPEC_PATHS[i], value)
        })
    })
}

/// An object of `spec` and its defaults patch on create.
fn created(spec: Value) -> (Value, Patch) {
    let input = object("tas", spec);
    let patch = defaults_patch(&input, Operation::Create);
    (input, patch)
}

/// `input` with `patch` applied; a patch that does not apply fails the case.
fn patched(input: &Value, patch: &Patch) -> Result<Value, TestCaseError> {
    let mut patched = input.clone();
    prop_assert!(json_patch::patch(&mut patched, patch).is_ok());
    Ok(patched)
}

proptest! {
    #[test]
    fn defaulting_only_adds_what_is_missing(spec in spec_like()) {
        let (input, patch) = created(spec);
        for op in &patch.0 {
            let PatchOperation::Add(add) = op else {
                panic!("only add operations, got {op:?}");
            };
            // Never overwrites: each target was absent or null.
            let target = input.pointer(add.path.as_str());
            prop_assert!(target.is_none_or(Value::is_null), "overwrites {}", add.path);
        }
    }

    #[test]
    fn the_defaults_patch_gives_the_defaulted_object(spec in spec_like()) {
        let (input, patch) = created(spec);
        let patched = patched(&input, &patch)?;
        prop_assert_eq!(&patched, &defaulted(&input, Operation::Create));
    }

    #[test]
    fn defaulting_is_idempotent(spec in spec_like()) {
        let (input, patch) = created(spec);
        let patched = patched(&input, &patch)?;
        prop_assert!(defaults_patch(&patched, Operation::Update).0.is_empty());
    }

    #[test]
    fn validation_never_panics(new in spec_like(), old in spec_like()) {
        let new = object("tas", new);
        let old = object("tas", old);
        let _ = check(&new, None);
        let _ = check(&new, Some(&old));
        let _ = check(&defaulted(&new, Operation::Update), Some(&old));
    }

    #[test]
    fn unchanged_spec_is_always_allowed(spec in spec_like()) {
        let old = object("Not.Valid", spec);
        let new = with(old.clone(), "/metadata/labels", json!({"x": "y"}));
        prop_assert_eq!(check(&new, Some(&old)), Verdict::default());
        let defaulted_new = with(defaulted(&old, Operation::Update), "/metadata/labels", json!({"x": "y"}));
        prop_assert_eq!(check(&defaulted_new, Some(&old)), Verdict::default());
    }
}
