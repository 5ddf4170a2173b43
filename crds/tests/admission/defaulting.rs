//! Defaulting: the minimal patch for each omission, the image never defaulted, and every
//! defaulted object (samples and the Go operator's manifests included) valid.

use std::path::PathBuf;

use serde_json::{Value, json};
use trustyai_crds::defaults::{Operation, apply_defaults, defaulted, defaults_patch};
use trustyai_crds::manifests::parse_documents;

use crate::support::{
    check, db, db_spec, messages, migration, migration_spec, object, patch_json, pvc, pvc_spec,
    with, without,
};

/// The JSON patch of one `add` per `(path, value)`, in order.
fn adds(ops: &[(&str, Value)]) -> Value {
    ops.iter()
        .map(|(path, value)| json!({ "op": "add", "path": path, "value": value }))
        .collect()
}

/// [`adds`] between the two defaults of every object with a spec: `spec.replicas` first,
/// `spec.metrics.batchSize` last.
fn adds_around(ops: &[(&str, Value)]) -> Value {
    let mut all = vec![("/spec/replicas", json!(1))];
    all.extend(ops.iter().cloned());
    all.push(("/spec/metrics/batchSize", json!(5000)));
    adds(&all)
}

#[test]
fn defaults_table() {
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "PVC, nothing set: every default, data as one object",
            object("tas", pvc_spec()),
            adds_around(&[
                ("/spec/storage/folder", json!("/inputs")),
                ("/spec/storage/size", json!("1Gi")),
                ("/spec/storage/retention", json!("Retain")),
                (
                    "/spec/data",
                    json!({ "filename": "data.csv", "format": "CSV" }),
                ),
            ]),
        ),
        (
            "PVC with an empty data object: its two fields",
            object("tas", with(pvc_spec(), "/data", json!({}))),
            adds_around(&[
                ("/spec/storage/folder", json!("/inputs")),
                ("/spec/storage/size", json!("1Gi")),
                ("/spec/storage/retention", json!("Retain")),
                ("/spec/data/filename", json!("data.csv")),
                ("/spec/data/format", json!("CSV")),
            ]),
        ),
        (
            "PVC, everything set (even invalid values): nothing is overwritten",
            object(
                "tas",
                json!({
                    "replicas": 0,
                    "storage": { "format": "PVC", "folder": "relative", "size": "1Gx", "retention": "Delete" },
                    "data": { "filename": "x.csv", "format": "JSON" },
                    "metrics": { "schedule": "5s", "batchSize": -1 }
                }),
            ),
            json!([]),
        ),
        (
            "PVC with empty strings: set, so kept for validation to reject",
            object(
                "tas",
                json!({
                    "replicas": 1,
                    "storage": { "format": "PVC", "folder": "", "size": "", "retention": "Retain" },
                    "data": { "filename": "", "format": "" },
                    "metrics": { "schedule": "5s", "batchSize": 1 }
                }),
            ),
            json!([]),
        ),
        (
            "DATABASE: credentials Secret named after the object, no PVC fields",
            object("tas", db_spec()),
            adds_around(&[(
                "/spec/storage/databaseConfigurations",
                json!("tas-db-credentials"),
            )]),
        ),
        (
            "DATABASE with a Secret named",
            object(
                "tas",
                with(db_spec(), "/storage/databaseConfigurations", json!("mine")),
            ),
            adds_around(&[]),
        ),
        (
            "DATABASE with generateName only: the Secret name is not known yet",
            json!({ "metadata": { "generateName": "tas-" }, "spec": db_spec() }),
            adds_around(&[]),
        ),
        (
            "migration: size, retention, data format and the Secret",
            object(
                "tas",
                without(migration_spec(), "/storage/databaseConfigurations"),
            ),
            adds_around(&[
                ("/spec/storage/size", json!("1Gi")),
                ("/spec/storage/retention", json!("Retain")),
                ("/spec/data/format", json!("CSV")),
                (
                    "/spec/storage/databaseConfigurations",
                    json!("tas-db-credentials"),
                ),
            ]),
        ),
        (
            "DATABASE with an empty folder is not migration: no PVC defaults",
            object("tas", with(migration_spec(), "/storage/folder", json!(""))),
            adds_around(&[]),
        ),
        (
            "unknown format: no storage defaults",
            object("tas", with(pvc_spec(), "/storage/format", json!("FOO"))),
            adds_around(&[]),
        ),
        (
            "nulls are absent",
            object(
                "tas",
                json!({ "replicas": null, "storage": { "format": "DATABASE", "databaseConfigurations": null },
                        "metrics": { "schedule": "5s", "batchSize": null } }),
            ),
            adds_around(&[(
                "/spec/storage/databaseConfigurations",
                json!("tas-db-credentials"),
            )]),
        ),
        (
            "metrics absent: not invented (its schedule is required)",
            object(
                "tas",
                json!({ "storage": { "format": "DATABASE", "databaseConfigurations": "c" } }),
            ),
            json!([{ "op": "add", "path": "/spec/replicas", "value": 1 }]),
        ),
        (
            "wrong shapes below spec: only what is understood",
            object(
                "tas",
                json!({ "storage": "PVC", "data": "x", "metrics": 5, "replicas": 2 }),
            ),
            json!([]),
        ),
        (
            "PVC with data of the wrong type: data left alone",
            object("tas", with(pvc_spec(), "/data", json!("x"))),
            adds_around(&[
                ("/spec/storage/folder", json!("/inputs")),
                ("/spec/storage/size", json!("1Gi")),
                ("/spec/storage/retention", json!("Retain")),
            ]),
        ),
        (
            "spec absent",
            json!({ "metadata": { "name": "tas" } }),
            json!([]),
        ),
        ("spec a string", object("tas", json!("spec")), json!([])),
        ("not an object at all", json!(["x"]), json!([])),
        ("null", Value::Null, json!([])),
    ];
    for (name, input, expected) in cases {
        for operation in [Operation::Create, Operation::Update] {
            let patch = defaults_patch(&input, operation);
            assert_eq!(patch_json(&patch), expected, "{name} ({operation:?})");

            let mut applied = input.clone();
            let returned = apply_defaults(&mut applied, operation);
            assert_eq!(returned, patch, "{name}: apply_defaults returns its patch");
            let mut patched = input.clone();
            json_patch::patch(&mut patched, &patch)
                .unwrap_or_else(|e| panic!("{name}: the patch applies: {e}"));
            assert_eq!(applied, patched, "{name}: apply_defaults == the patch");
            assert!(
                defaults_patch(&applied, operation).0.is_empty(),
                "{name}: defaulting twice adds nothing"
            );
        }
    }
}

#[test]
fn image_is_never_defaulted() {
    assert!(pvc()["spec"].get("image").is_none());
}

#[test]
fn defaulted_objects_validate() {
    for object in [pvc(), db(), migration()] {
        let verdict = check(&object, None);
        assert_eq!(messages(&verdict), Vec::<String>::new(), "{object}");
    }
}

#[test]
fn every_sample_manifest_validates_after_defaulting() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for file in [
        "samples/v1-pvc.yaml",
        "samples/v1-database.yaml",
        "tests/fixtures/go-operator/v1-sample.yaml",
    ] {
        let text =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        for doc in parse_documents(&text).unwrap_or_else(|e| panic!("{file}: {e}")) {
            let verdict = check(&defaulted(&doc, Operation::Create), None);
            assert_eq!(messages(&verdict), Vec::<String>::new(), "{file}");
        }
    }
}
