#![allow(clippy::expect_used)] // a test fails loudly on unexpected data
//! Admission rules as tables: defaulting (minimal patches), validation on CREATE and UPDATE,
//! ratcheting of objects stored under older rules, warnings, and denial messages.

use std::path::PathBuf;

use json_patch::{Patch, PatchOperation};
use proptest::prelude::*;
use serde_json::{Value, json};
use trustyai_crds::defaults::{Operation, apply_defaults, defaulted, defaults_patch};
use trustyai_crds::manifests::parse_documents;
use trustyai_crds::validation::{Rule, ValidationContext, Verdict, denial_message, validate};

// --- helpers ------------------------------------------------------------------------------

fn object(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": { "name": name, "namespace": "ns" },
        "spec": spec
    })
}

fn pvc_spec() -> Value {
    json!({ "storage": { "format": "PVC" }, "metrics": { "schedule": "5s" } })
}

fn db_spec() -> Value {
    json!({ "storage": { "format": "DATABASE" }, "metrics": { "schedule": "5s" } })
}

fn migration_spec() -> Value {
    json!({
        "storage": { "format": "DATABASE", "folder": "/inputs", "databaseConfigurations": "creds" },
        "data": { "filename": "data.hdf5" },
        "metrics": { "schedule": "5s" }
    })
}

/// A valid, defaulted object of each mode.
fn pvc() -> Value {
    defaulted(&object("tas", pvc_spec()), Operation::Create)
}
fn db() -> Value {
    defaulted(&object("tas", db_spec()), Operation::Create)
}
fn migration() -> Value {
    defaulted(&object("tas", migration_spec()), Operation::Create)
}

/// `value` with the JSON pointer `ptr` set (parents created as objects).
fn with(mut value: Value, ptr: &str, new: Value) -> Value {
    let tokens: Vec<&str> = ptr.split('/').skip(1).collect();
    let Some((last, parents)) = tokens.split_last() else {
        return new;
    };
    let mut node = &mut value;
    for key in parents {
        if !node.get(*key).is_some_and(Value::is_object) {
            node[*key] = json!({});
        }
        node = &mut node[*key];
    }
    node[*last] = new;
    value
}

/// `value` without the member at `ptr`.
fn without(mut value: Value, ptr: &str) -> Value {
    let (parent, key) = ptr.rsplit_once('/').unwrap_or(("", ptr));
    if let Some(map) = value.pointer_mut(parent).and_then(Value::as_object_mut) {
        map.remove(key);
    }
    value
}

fn ctx() -> ValidationContext<'static> {
    ValidationContext {
        allowed_image_prefixes: vec!["quay.io/trustyai/".into(), "registry.redhat.io".into()],
        secret_exists: None,
    }
}

fn check(new: &Value, old: Option<&Value>) -> Verdict {
    validate(new, old, &ctx())
}

fn messages(verdict: &Verdict) -> Vec<String> {
    verdict.errors.iter().map(ToString::to_string).collect()
}

fn rules(verdict: &Verdict) -> Vec<Rule> {
    verdict.errors.iter().map(|e| e.rule).collect()
}

fn patch_json(patch: &Patch) -> Value {
    serde_json::to_value(patch).unwrap_or_else(|e| panic!("patch serializes: {e}"))
}

// --- defaulting ---------------------------------------------------------------------------

#[test]
fn defaults_table() {
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "PVC, nothing set: every default, data as one object",
            object("tas", pvc_spec()),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/storage/folder", "value": "/inputs" },
                { "op": "add", "path": "/spec/storage/size", "value": "1Gi" },
                { "op": "add", "path": "/spec/storage/retention", "value": "Retain" },
                { "op": "add", "path": "/spec/data", "value": { "filename": "data.csv", "format": "CSV" } },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
        ),
        (
            "PVC with an empty data object: its two fields",
            object("tas", with(pvc_spec(), "/data", json!({}))),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/storage/folder", "value": "/inputs" },
                { "op": "add", "path": "/spec/storage/size", "value": "1Gi" },
                { "op": "add", "path": "/spec/storage/retention", "value": "Retain" },
                { "op": "add", "path": "/spec/data/filename", "value": "data.csv" },
                { "op": "add", "path": "/spec/data/format", "value": "CSV" },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
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
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/storage/databaseConfigurations", "value": "tas-db-credentials" },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
        ),
        (
            "DATABASE with a Secret named",
            object(
                "tas",
                with(db_spec(), "/storage/databaseConfigurations", json!("mine")),
            ),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
        ),
        (
            "DATABASE with generateName only: the Secret name is not known yet",
            json!({ "metadata": { "generateName": "tas-" }, "spec": db_spec() }),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
        ),
        (
            "migration: size, retention, data format and the Secret",
            object(
                "tas",
                without(migration_spec(), "/storage/databaseConfigurations"),
            ),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/storage/size", "value": "1Gi" },
                { "op": "add", "path": "/spec/storage/retention", "value": "Retain" },
                { "op": "add", "path": "/spec/data/format", "value": "CSV" },
                { "op": "add", "path": "/spec/storage/databaseConfigurations", "value": "tas-db-credentials" },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
        ),
        (
            "DATABASE with an empty folder is not migration: no PVC defaults",
            object("tas", with(migration_spec(), "/storage/folder", json!(""))),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
        ),
        (
            "unknown format: no storage defaults",
            object("tas", with(pvc_spec(), "/storage/format", json!("FOO"))),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
        ),
        (
            "nulls are absent",
            object(
                "tas",
                json!({ "replicas": null, "storage": { "format": "DATABASE", "databaseConfigurations": null },
                        "metrics": { "schedule": "5s", "batchSize": null } }),
            ),
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/storage/databaseConfigurations", "value": "tas-db-credentials" },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
            ]),
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
            json!([
                { "op": "add", "path": "/spec/replicas", "value": 1 },
                { "op": "add", "path": "/spec/storage/folder", "value": "/inputs" },
                { "op": "add", "path": "/spec/storage/size", "value": "1Gi" },
                { "op": "add", "path": "/spec/storage/retention", "value": "Retain" },
                { "op": "add", "path": "/spec/metrics/batchSize", "value": 5000 }
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
fn samples_and_go_operator_manifests_validate_after_defaulting() {
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

// --- validation on CREATE -----------------------------------------------------------------

#[test]
fn create_rules_table() {
    let long_name = format!("a{}", "b".repeat(59));
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        // metadata.name
        ("name of 59 characters", with(pvc(), "/metadata/name", json!(format!("a{}", "b".repeat(58)))), vec![]),
        (
            "name of 60 characters",
            with(pvc(), "/metadata/name", json!(long_name)),
            vec![format!(
                "metadata.name: Invalid value: \"{long_name}\": must be no more than 59 characters, because the Services <name> and <name>-tls must be valid Service names"
            )],
        ),
        (
            "name with a dot (a valid object name, not a Service name)",
            with(pvc(), "/metadata/name", json!("trusty.ai")),
            vec![dns1035("trusty.ai")],
        ),
        ("name with uppercase", with(pvc(), "/metadata/name", json!("Tas")), vec![dns1035("Tas")]),
        ("name starting with a digit", with(pvc(), "/metadata/name", json!("1tas")), vec![dns1035("1tas")]),
        ("name ending with '-'", with(pvc(), "/metadata/name", json!("tas-")), vec![dns1035("tas-")]),
        (
            "name missing",
            without(pvc(), "/metadata/name"),
            vec!["metadata.name: Required value: name or generateName is required".into()],
        ),
        (
            "generateName instead of name",
            with(without(pvc(), "/metadata/name"), "/metadata/generateName", json!("tas-")),
            vec![],
        ),
        (
            "generateName too long or malformed",
            with(without(pvc(), "/metadata/name"), "/metadata/generateName", json!(format!("T{}", "a".repeat(54)))),
            vec![
                format!("metadata.generateName: Invalid value: \"T{}\": must be no more than 54 characters, so that the generated name stays within 59 characters", "a".repeat(54)),
                format!("metadata.generateName: Invalid value: \"T{}\": must start with a lowercase letter and contain only lowercase letters, digits and '-'", "a".repeat(54)),
            ],
        ),
        // storage.format
        (
            "format missing",
            without(pvc(), "/spec/storage/format"),
            vec!["spec.storage.format: Required value".into()],
        ),
        (
            "format unknown",
            with(pvc(), "/spec/storage/format", json!("FOO")),
            vec![r#"spec.storage.format: Unsupported value: "FOO": supported values: "PVC", "DATABASE""#.into()],
        ),
        (
            "format in lowercase",
            with(pvc(), "/spec/storage/format", json!("pvc")),
            vec![r#"spec.storage.format: Unsupported value: "pvc": supported values: "PVC", "DATABASE""#.into()],
        ),
        // storage.folder
        ("folder relative", with(pvc(), "/spec/storage/folder", json!("inputs")), vec![folder("inputs")]),
        ("folder empty", with(pvc(), "/spec/storage/folder", json!("")), vec![folder("")]),
        ("folder with ..", with(pvc(), "/spec/storage/folder", json!("/a/../b")), vec![folder("/a/../b")]),
        ("folder ending in ..", with(pvc(), "/spec/storage/folder", json!("/a/..")), vec![folder("/a/..")]),
        ("folder with ..b (a name, not a segment)", with(pvc(), "/spec/storage/folder", json!("/a/..b/c")), vec![]),
        ("folder nested", with(pvc(), "/spec/storage/folder", json!("/var/data/trustyai")), vec![]),
        (
            "folder too long",
            with(pvc(), "/spec/storage/folder", json!(format!("/{}", "a".repeat(4096)))),
            vec!["spec.storage.folder: Too long: may not be more than 4096 bytes".into()],
        ),
        // storage.size
        (
            "size not a quantity",
            with(pvc(), "/spec/storage/size", json!("1Gx")),
            vec![r#"spec.storage.size: Invalid value: "1Gx": must be a quantity such as 1Gi or 500Mi"#.into()],
        ),
        (
            "size with a space",
            with(pvc(), "/spec/storage/size", json!("1 Gi")),
            vec![r#"spec.storage.size: Invalid value: "1 Gi": must be a quantity such as 1Gi or 500Mi"#.into()],
        ),
        (
            "size empty",
            with(pvc(), "/spec/storage/size", json!("")),
            vec![r#"spec.storage.size: Invalid value: "": must be a quantity such as 1Gi or 500Mi"#.into()],
        ),
        (
            "size zero",
            with(pvc(), "/spec/storage/size", json!("0Gi")),
            vec![r#"spec.storage.size: Invalid value: "0Gi": must be greater than zero"#.into()],
        ),
        (
            "size negative",
            with(pvc(), "/spec/storage/size", json!("-1Gi")),
            vec![r#"spec.storage.size: Invalid value: "-1Gi": must be greater than zero"#.into()],
        ),
        ("size 500Mi", with(pvc(), "/spec/storage/size", json!("500Mi")), vec![]),
        ("size with an exponent", with(pvc(), "/spec/storage/size", json!("5e9")), vec![]),
        ("size decimal SI", with(pvc(), "/spec/storage/size", json!("2G")), vec![]),
        (
            "size too long",
            with(pvc(), "/spec/storage/size", json!("1".repeat(65))),
            vec!["spec.storage.size: Too long: may not be more than 64 bytes".into()],
        ),
        // storage.pv
        ("pv with PVC", with(pvc(), "/spec/storage/pv", json!("pv-1")), vec![]),
        ("pv in migration mode", with(migration(), "/spec/storage/pv", json!("pv-1")), vec![]),
        (
            "pv malformed",
            with(pvc(), "/spec/storage/pv", json!("My_PV")),
            vec![subdomain("spec.storage.pv", "My_PV")],
        ),
        (
            "pv with DATABASE outside migration",
            with(db(), "/spec/storage/pv", json!("pv-1")),
            vec!["spec.storage.pv: Forbidden: may be set only with PVC storage or in migration mode (DATABASE with spec.storage.folder and spec.data.filename set)".into()],
        ),
        // storage.databaseConfigurations
        (
            "credentials Secret malformed",
            with(db(), "/spec/storage/databaseConfigurations", json!("Bad_Name")),
            vec![subdomain("spec.storage.databaseConfigurations", "Bad_Name")],
        ),
        (
            "credentials Secret name too long",
            with(db(), "/spec/storage/databaseConfigurations", json!("a".repeat(254))),
            vec![format!(
                "spec.storage.databaseConfigurations: Invalid value: \"{}\": must be no more than 253 characters",
                "a".repeat(254)
            )],
        ),
        // storage.retention
        ("retention Delete", with(pvc(), "/spec/storage/retention", json!("Delete")), vec![]),
        (
            "retention unknown",
            with(pvc(), "/spec/storage/retention", json!("Keep")),
            vec![r#"spec.storage.retention: Unsupported value: "Keep": supported values: "Retain", "Delete""#.into()],
        ),
        // data
        (
            "data format JSON with PVC",
            with(pvc(), "/spec/data/format", json!("JSON")),
            vec![r#"spec.data.format: Unsupported value: "JSON": supported values: "CSV""#.into()],
        ),
        (
            "data format JSON in migration mode",
            with(migration(), "/spec/data/format", json!("JSON")),
            vec![r#"spec.data.format: Unsupported value: "JSON": supported values: "CSV""#.into()],
        ),
        ("data format JSON with DATABASE (ignored: a warning)", with(db(), "/spec/data/format", json!("JSON")), vec![]),
        ("filename a/b", with(pvc(), "/spec/data/filename", json!("a/b")), vec![filename("a/b")]),
        ("filename .", with(pvc(), "/spec/data/filename", json!(".")), vec![filename(".")]),
        ("filename ..", with(pvc(), "/spec/data/filename", json!("..")), vec![filename("..")]),
        ("filename empty", with(pvc(), "/spec/data/filename", json!("")), vec![filename("")]),
        ("filename with dots", with(pvc(), "/spec/data/filename", json!("..data.csv")), vec![]),
        (
            "filename too long",
            with(pvc(), "/spec/data/filename", json!("a".repeat(256))),
            vec!["spec.data.filename: Too long: may not be more than 255 bytes".into()],
        ),
        // metrics
        (
            "schedule missing",
            without(pvc(), "/spec/metrics/schedule"),
            vec!["spec.metrics.schedule: Required value".into()],
        ),
        ("schedule without unit", with(pvc(), "/spec/metrics/schedule", json!("5")), vec![schedule("5")]),
        ("schedule with a space", with(pvc(), "/spec/metrics/schedule", json!("5 s")), vec![schedule("5 s")]),
        ("schedule empty", with(pvc(), "/spec/metrics/schedule", json!("")), vec![schedule("")]),
        ("schedule in days", with(pvc(), "/spec/metrics/schedule", json!("1d")), vec![schedule("1d")]),
        ("schedule Go duration with fraction", with(pvc(), "/spec/metrics/schedule", json!("1.5s")), vec![schedule("1.5s")]),
        (
            "schedule below a second",
            with(pvc(), "/spec/metrics/schedule", json!("500ms")),
            vec![r#"spec.metrics.schedule: Invalid value: "500ms": must be at least one second in total"#.into()],
        ),
        (
            "schedule zero",
            with(pvc(), "/spec/metrics/schedule", json!("0s")),
            vec![r#"spec.metrics.schedule: Invalid value: "0s": must be at least one second in total"#.into()],
        ),
        ("schedule 1000ms", with(pvc(), "/spec/metrics/schedule", json!("1000ms")), vec![]),
        ("schedule 1m30s", with(pvc(), "/spec/metrics/schedule", json!("1m30s")), vec![]),
        ("schedule 2h", with(pvc(), "/spec/metrics/schedule", json!("2h")), vec![]),
        (
            "schedule too long",
            with(pvc(), "/spec/metrics/schedule", json!(format!("{}s", "1".repeat(64)))),
            vec!["spec.metrics.schedule: Too long: may not be more than 64 bytes".into()],
        ),
        (
            "batch size zero",
            with(pvc(), "/spec/metrics/batchSize", json!(0)),
            vec!["spec.metrics.batchSize: Invalid value: 0: must be at least 1".into()],
        ),
        (
            "batch size negative",
            with(pvc(), "/spec/metrics/batchSize", json!(-5)),
            vec!["spec.metrics.batchSize: Invalid value: -5: must be at least 1".into()],
        ),
        ("batch size one", with(pvc(), "/spec/metrics/batchSize", json!(1)), vec![]),
        (
            "batch size beyond int64",
            with(pvc(), "/spec/metrics/batchSize", json!(u64::MAX)),
            vec![format!(
                "spec.metrics.batchSize: Invalid value: {}: must be at most 9223372036854775807",
                u64::MAX
            )],
        ),
        // replicas
        ("replicas zero", with(pvc(), "/spec/replicas", json!(0)), vec![]),
        (
            "replicas negative",
            with(pvc(), "/spec/replicas", json!(-1)),
            vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0".into()],
        ),
        (
            "replicas beyond int32",
            with(db(), "/spec/replicas", json!(2_147_483_648_i64)),
            vec!["spec.replicas: Invalid value: 2147483648: must be at most 2147483647".into()],
        ),
        // image
        ("image under an allowed prefix", with(pvc(), "/spec/image", json!("quay.io/trustyai/trustyai-service:v0.28.0")), vec![]),
        (
            "image under a prefix without a trailing slash",
            with(pvc(), "/spec/image", json!("registry.redhat.io/rhoai/trustyai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")),
            vec![],
        ),
        (
            "image from another registry",
            with(pvc(), "/spec/image", json!("docker.io/evil/svc:latest")),
            vec![r#"spec.image: Invalid value: "docker.io/evil/svc:latest": must start with one of the allowed image prefixes: "quay.io/trustyai/", "registry.redhat.io""#.into()],
        ),
        (
            "image on a look-alike registry",
            with(pvc(), "/spec/image", json!("registry.redhat.io.evil.com/svc")),
            vec![r#"spec.image: Invalid value: "registry.redhat.io.evil.com/svc": must start with one of the allowed image prefixes: "quay.io/trustyai/", "registry.redhat.io""#.into()],
        ),
        (
            "image malformed (short digest) under an allowed prefix",
            with(pvc(), "/spec/image", json!("quay.io/trustyai/svc@sha256:abc")),
            vec![image_malformed("quay.io/trustyai/svc@sha256:abc")],
        ),
        (
            "image with uppercase path",
            with(pvc(), "/spec/image", json!("quay.io/trustyai/Svc:v1")),
            vec![image_malformed("quay.io/trustyai/Svc:v1")],
        ),
        (
            "image too long",
            with(pvc(), "/spec/image", json!(format!("quay.io/trustyai/{}", "a".repeat(1024)))),
            vec!["spec.image: Too long: may not be more than 1024 bytes".into()],
        ),
        // malformed objects
        ("spec missing", without(pvc(), "/spec"), vec!["spec: Required value".into()]),
        (
            "spec a string",
            with(pvc(), "/spec", json!("x")),
            vec![r#"spec: Invalid value: "x": must be an object"#.into()],
        ),
        (
            "spec an array",
            with(pvc(), "/spec", json!([1])),
            vec!["spec: Invalid value: [1]: must be an object".into()],
        ),
        (
            "storage and metrics missing",
            object("tas", json!({})),
            vec!["spec.storage: Required value".into(), "spec.metrics: Required value".into()],
        ),
        (
            "storage and data of the wrong type",
            with(with(pvc(), "/spec/storage", json!("PVC")), "/spec/data", json!(true)),
            vec![
                r#"spec.storage: Invalid value: "PVC": must be an object"#.into(),
                "spec.data: Invalid value: true: must be an object".into(),
            ],
        ),
        (
            "size a number",
            with(pvc(), "/spec/storage/size", json!(5)),
            vec!["spec.storage.size: Invalid value: 5: must be a string".into()],
        ),
        (
            "format a number: one type error, no Required or Unsupported",
            with(pvc(), "/spec/storage/format", json!(5)),
            vec!["spec.storage.format: Invalid value: 5: must be a string".into()],
        ),
        (
            "replicas a string",
            with(pvc(), "/spec/replicas", json!("1")),
            vec![r#"spec.replicas: Invalid value: "1": must be an integer"#.into()],
        ),
        (
            "batch size a fraction",
            with(pvc(), "/spec/metrics/batchSize", json!(1.5)),
            vec!["spec.metrics.batchSize: Invalid value: 1.5: must be an integer".into()],
        ),
        (
            "schedule an object",
            with(pvc(), "/spec/metrics/schedule", json!({"every": "5s"})),
            vec![r#"spec.metrics.schedule: Invalid value: {"every":"5s"}: must be a string"#.into()],
        ),
        (
            "metadata name a number",
            with(pvc(), "/metadata/name", json!(5)),
            vec!["metadata.name: Invalid value: 5: must be a string".into()],
        ),
    ];
    for (name, input, expected) in cases {
        let verdict = check(&input, None);
        assert_eq!(messages(&verdict), expected, "{name}");
    }
}

fn dns1035(name: &str) -> String {
    format!(
        "metadata.name: Invalid value: \"{name}\": must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
    )
}
fn folder(value: &str) -> String {
    format!(
        "spec.storage.folder: Invalid value: \"{value}\": must be an absolute path with no '..' segment"
    )
}
fn subdomain(field: &str, value: &str) -> String {
    format!(
        "{field}: Invalid value: \"{value}\": must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
    )
}
fn filename(value: &str) -> String {
    format!(
        "spec.data.filename: Invalid value: \"{value}\": must be a plain file name (no '/', not '.' or '..', not empty)"
    )
}
fn schedule(value: &str) -> String {
    format!(
        "spec.metrics.schedule: Invalid value: \"{value}\": must be one or more <integer><unit> groups with unit ms, s, m or h, for example 5s or 1m30s"
    )
}
fn image_malformed(value: &str) -> String {
    format!(
        "spec.image: Invalid value: \"{value}\": must be an image reference [registry/]path[:tag][@sha256:<64 hex digits>], for example quay.io/trustyai/trustyai-service:v0.28.0"
    )
}

#[test]
fn every_violation_is_reported_at_once() {
    let bad = object(
        "Bad.Name",
        json!({
            "replicas": -1,
            "storage": { "format": "PVC", "folder": "rel", "size": "0", "pv": "X", "retention": "Keep" },
            "data": { "filename": "a/b", "format": "JSON" },
            "metrics": { "schedule": "100ms", "batchSize": 0 },
            "image": "docker.io/x:1"
        }),
    );
    let verdict = check(&bad, None);
    assert_eq!(
        rules(&verdict),
        [
            Rule::Name,
            Rule::StorageFolder,
            Rule::StorageSize,
            Rule::StoragePv,
            Rule::StorageRetention,
            Rule::DataFilename,
            Rule::DataFormat,
            Rule::MetricsSchedule,
            Rule::MetricsBatchSize,
            Rule::Replicas,
            Rule::Image,
        ]
    );
    let message = denial_message("Bad.Name", &verdict.errors);
    assert!(message.starts_with(
        r#"TrustyAIService.trustyai.opendatahub.io "Bad.Name" is invalid: [metadata.name: Invalid value: "Bad.Name": must be a DNS-1035 label"#
    ));
    assert!(message.ends_with(r#"must start with one of the allowed image prefixes: "quay.io/trustyai/", "registry.redhat.io"]"#));
}

#[test]
fn no_allowed_prefixes_means_no_custom_image() {
    let verdict = validate(
        &with(pvc(), "/spec/image", json!("quay.io/trustyai/svc:v1")),
        None,
        &ValidationContext::default(),
    );
    assert_eq!(
        messages(&verdict),
        [
            "spec.image: Forbidden: custom images are not allowed: the operator's configuration allows no image prefixes (allowedImagePrefixes)"
        ]
    );
    // Blank entries (from "a,,b" or trailing commas) allow nothing.
    let blank = ValidationContext {
        allowed_image_prefixes: vec![String::new(), "  ".into()],
        secret_exists: None,
    };
    let verdict = validate(
        &with(pvc(), "/spec/image", json!("quay.io/trustyai/svc:v1")),
        None,
        &blank,
    );
    assert_eq!(rules(&verdict), [Rule::Image]);
}

// --- validation on UPDATE -----------------------------------------------------------------

#[test]
fn update_rules_table() {
    let with_pv = |o: Value, pv: &str| with(o, "/spec/storage/pv", json!(pv));
    let cases: Vec<(&str, Value, Value, Vec<String>)> = vec![
        (
            "DATABASE back to PVC",
            db(),
            defaulted(&with(db(), "/spec/storage/format", json!("PVC")), Operation::Update),
            vec![r#"spec.storage.format: Invalid value: "PVC": may not change from DATABASE back to PVC: the data is in the database, and the service would start again from the volume"#.into()],
        ),
        (
            "migration back to PVC",
            migration(),
            with(migration(), "/spec/storage/format", json!("PVC")),
            vec![r#"spec.storage.format: Invalid value: "PVC": may not change from DATABASE back to PVC: the data is in the database, and the service would start again from the volume"#.into()],
        ),
        (
            "PVC to DATABASE without the folder: not a migration",
            pvc(),
            with(
                without(pvc(), "/spec/storage/folder"),
                "/spec/storage/format",
                json!("DATABASE"),
            ),
            vec![r#"spec.storage.format: Invalid value: "DATABASE": may change from PVC to DATABASE only as a migration: keep spec.storage.folder and spec.data.filename set, so that the service moves the data from the volume into the database"#.into()],
        ),
        (
            "PVC to DATABASE as a migration",
            pvc(),
            defaulted(&with(pvc(), "/spec/storage/format", json!("DATABASE")), Operation::Update),
            vec![],
        ),
        (
            "migration finished: folder and filename removed",
            migration(),
            without(
                without(without(migration(), "/spec/storage/folder"), "/spec/data/filename"),
                "/spec/storage/size",
            ),
            vec![],
        ),
        ("size grows", pvc(), with(pvc(), "/spec/storage/size", json!("2Gi")), vec![]),
        ("size same value, other notation", pvc(), with(pvc(), "/spec/storage/size", json!("1024Mi")), vec![]),
        (
            "size shrinks",
            with(pvc(), "/spec/storage/size", json!("2Gi")),
            with(pvc(), "/spec/storage/size", json!("1Gi")),
            vec![r#"spec.storage.size: Invalid value: "1Gi": may not be smaller than the current "2Gi": a PersistentVolumeClaim can grow but not shrink"#.into()],
        ),
        (
            "size shrinks by one byte",
            pvc(),
            with(pvc(), "/spec/storage/size", json!("1073741823")),
            vec![r#"spec.storage.size: Invalid value: "1073741823": may not be smaller than the current "1Gi": a PersistentVolumeClaim can grow but not shrink"#.into()],
        ),
        (
            "size below the default the stored object implied",
            object("tas", pvc_spec()),
            with(pvc(), "/spec/storage/size", json!("500Mi")),
            vec![r#"spec.storage.size: Invalid value: "500Mi": may not be smaller than the current "1Gi": a PersistentVolumeClaim can grow but not shrink"#.into()],
        ),
        ("pv set for the first time", pvc(), with_pv(pvc(), "pv-1"), vec![]),
        ("pv unchanged", with_pv(pvc(), "pv-1"), with_pv(with(pvc(), "/spec/replicas", json!(0)), "pv-1"), vec![]),
        (
            "pv changed",
            with_pv(pvc(), "pv-1"),
            with_pv(pvc(), "pv-2"),
            vec![r#"spec.storage.pv: Invalid value: "pv-2": may not change once set (it is "pv-1")"#.into()],
        ),
        (
            "pv removed",
            with_pv(pvc(), "pv-1"),
            pvc(),
            vec![r#"spec.storage.pv: Forbidden: may not be removed while the PersistentVolumeClaim is in use (it is "pv-1"); it goes only with the end of a migration (DATABASE storage without storage.folder or data.filename)"#.into()],
        ),
        (
            "pv removed in migration mode",
            with_pv(migration(), "pv-1"),
            migration(),
            vec![r#"spec.storage.pv: Forbidden: may not be removed while the PersistentVolumeClaim is in use (it is "pv-1"); it goes only with the end of a migration (DATABASE storage without storage.folder or data.filename)"#.into()],
        ),
        (
            "pv removed with the end of a migration",
            with_pv(migration(), "pv-1"),
            without(migration(), "/spec/data/filename"),
            vec![],
        ),
        (
            "pv changed with the end of a migration",
            with_pv(migration(), "pv-1"),
            with_pv(without(migration(), "/spec/data/filename"), "pv-2"),
            vec![
                r#"spec.storage.pv: Forbidden: may be set only with PVC storage or in migration mode (DATABASE with spec.storage.folder and spec.data.filename set)"#.into(),
                r#"spec.storage.pv: Invalid value: "pv-2": may not change once set (it is "pv-1")"#.into(),
            ],
        ),
        (
            "folder changed while the PVC is in use",
            pvc(),
            with(pvc(), "/spec/storage/folder", json!("/data")),
            vec![r#"spec.storage.folder: Invalid value: "/data": may not change while the PersistentVolumeClaim is in use (it is mounted at "/inputs", where the service keeps its data)"#.into()],
        ),
        (
            "folder changed in migration mode",
            migration(),
            with(migration(), "/spec/storage/folder", json!("/data")),
            vec![r#"spec.storage.folder: Invalid value: "/data": may not change while the PersistentVolumeClaim is in use (it is mounted at "/inputs", where the service keeps its data)"#.into()],
        ),
        (
            "migration finished with another folder: the volume is no longer used",
            migration(),
            without(
                with(migration(), "/spec/storage/folder", json!("/elsewhere")),
                "/spec/data/filename",
            ),
            vec![],
        ),
        (
            "folder changed on DATABASE storage (no PVC)",
            with(db(), "/spec/storage/folder", json!("/a")),
            with(db(), "/spec/storage/folder", json!("/b")),
            vec![],
        ),
        (
            "name is not re-checked on UPDATE",
            with(pvc(), "/metadata/name", json!("Not.A.Service.Name")),
            with(with(pvc(), "/metadata/name", json!("Not.A.Service.Name")), "/spec/replicas", json!(0)),
            vec![],
        ),
        (
            "several transition errors at once",
            with_pv(with(pvc(), "/spec/storage/size", json!("2Gi")), "pv-1"),
            with_pv(
                with(with(pvc(), "/spec/storage/size", json!("1Gi")), "/spec/storage/folder", json!("/x")),
                "pv-2",
            ),
            vec![
                r#"spec.storage.size: Invalid value: "1Gi": may not be smaller than the current "2Gi": a PersistentVolumeClaim can grow but not shrink"#.into(),
                r#"spec.storage.pv: Invalid value: "pv-2": may not change once set (it is "pv-1")"#.into(),
                r#"spec.storage.folder: Invalid value: "/x": may not change while the PersistentVolumeClaim is in use (it is mounted at "/inputs", where the service keeps its data)"#.into(),
            ],
        ),
    ];
    for (name, old, new, expected) in cases {
        let verdict = check(&new, Some(&old));
        assert_eq!(messages(&verdict), expected, "{name}");
    }
}

// --- ratcheting ---------------------------------------------------------------------------

/// A TrustyAIService stored by the Go operator, which validated nothing: a name too long for
/// the `-tls` Service, a size its MustParse would panic on, an unparseable schedule, and no
/// defaults.
fn go_era() -> Value {
    json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": {
            "name": "trustyai-service-with-a-very-long-name-created-under-go-operator",
            "namespace": "ns",
            "finalizers": ["trustyai.opendatahub.io/finalizer"],
            "labels": { "team": "a" }
        },
        "spec": {
            "storage": { "format": "PVC", "folder": "/inputs", "size": "1Gx" },
            "data": { "filename": "data.csv", "format": "CSV" },
            "metrics": { "schedule": "5 seconds" }
        }
    })
}

#[test]
fn go_era_object_is_invalid_on_create() {
    let verdict = check(&go_era(), None);
    assert_eq!(
        rules(&verdict),
        [Rule::Name, Rule::StorageSize, Rule::MetricsSchedule]
    );
}

#[test]
fn ratcheting_table() {
    let old = go_era();
    let cases: Vec<(&str, Value, Vec<Rule>)> = vec![
        (
            "label change",
            with(old.clone(), "/metadata/labels/team", json!("b")),
            vec![],
        ),
        (
            "annotation added",
            with(old.clone(), "/metadata/annotations", json!({"a": "b"})),
            vec![],
        ),
        (
            "finalizer removed",
            with(old.clone(), "/metadata/finalizers", json!([])),
            vec![],
        ),
        (
            "finalizer removed during deletion",
            with(
                with(old.clone(), "/metadata/finalizers", json!([])),
                "/metadata/deletionTimestamp",
                json!("2025-01-01T00:00:00Z"),
            ),
            vec![],
        ),
        (
            "spec changed during deletion",
            with(
                with(
                    old.clone(),
                    "/metadata/deletionTimestamp",
                    json!("2025-01-01T00:00:00Z"),
                ),
                "/spec/storage/size",
                json!("bad"),
            ),
            vec![],
        ),
        (
            "label change after the mutating webhook added defaults",
            with(
                defaulted(&old, Operation::Update),
                "/metadata/labels/team",
                json!("b"),
            ),
            vec![],
        ),
        (
            "an unrelated valid field changes",
            with(
                defaulted(&old, Operation::Update),
                "/spec/replicas",
                json!(0),
            ),
            vec![],
        ),
        (
            "an unrelated invalid field changes",
            with(
                defaulted(&old, Operation::Update),
                "/spec/replicas",
                json!(-1),
            ),
            vec![Rule::Replicas],
        ),
        (
            "the invalid size changes to another invalid size",
            with(old.clone(), "/spec/storage/size", json!("2Gx")),
            vec![Rule::StorageSize],
        ),
        (
            "the invalid size is fixed",
            with(old.clone(), "/spec/storage/size", json!("2Gi")),
            vec![],
        ),
        (
            "the invalid schedule changes to another invalid one",
            with(old.clone(), "/spec/metrics/schedule", json!("10 seconds")),
            vec![Rule::MetricsSchedule],
        ),
        (
            "the invalid schedule is fixed",
            with(old.clone(), "/spec/metrics/schedule", json!("10s")),
            vec![],
        ),
    ];
    for (name, new, expected) in cases {
        let verdict = check(&new, Some(&old));
        assert_eq!(
            rules(&verdict),
            expected,
            "{name}: {:?}",
            messages(&verdict)
        );
    }
}

#[test]
fn metadata_only_update_has_no_warnings_either() {
    let old = with(pvc(), "/spec/replicas", json!(3));
    let verdict = check(
        &with(old.clone(), "/metadata/labels", json!({"a": "b"})),
        Some(&old),
    );
    assert_eq!(verdict, Verdict::default());
}

#[test]
fn ratcheting_covers_cross_field_rules() {
    // A stored DATABASE object with data.format JSON (ignored there). Going into migration
    // mode makes data.format matter, so it is checked although it did not change.
    let old = with(db(), "/spec/data", json!({ "format": "JSON" }));
    let into_migration = with(
        with(old.clone(), "/spec/storage/folder", json!("/inputs")),
        "/spec/data/filename",
        json!("data.csv"),
    );
    assert_eq!(
        rules(&check(&into_migration, Some(&old))),
        [Rule::DataFormat]
    );
    // An unrelated change keeps it unchecked.
    let unrelated = with(old.clone(), "/spec/replicas", json!(0));
    assert!(check(&unrelated, Some(&old)).is_allowed());
}

// --- warnings -----------------------------------------------------------------------------

#[test]
fn growing_warns_that_the_storage_class_decides() {
    let grown = with(pvc(), "/spec/storage/size", json!("2Gi"));
    assert_eq!(
        check(&grown, Some(&pvc())).warnings,
        [
            r#"spec.storage.size: the PersistentVolumeClaim grows from "1Gi" to "2Gi" only if its StorageClass allows volume expansion; otherwise it keeps its size and the PVCAvailable condition says why"#
        ]
    );
    // The same size spelled differently, or no claim (DATABASE storage): nothing to say.
    let same = with(pvc(), "/spec/storage/size", json!("1024Mi"));
    assert!(check(&same, Some(&pvc())).warnings.is_empty());
    assert!(check(&pvc(), Some(&pvc())).warnings.is_empty());
}

#[test]
fn warnings_table() {
    let rwo = "spec.replicas: 3 replicas run as one pod while the data is on a claim (one writer per claim: two service processes must never have its files open at once)";
    let outside_migration = |field: &str| {
        format!(
            "{field}: ignored with DATABASE storage outside migration mode (migration needs both spec.storage.folder and spec.data.filename)"
        )
    };
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        ("valid PVC", pvc(), vec![]),
        (
            "replicas above 1 with PVC",
            with(pvc(), "/spec/replicas", json!(3)),
            vec![rwo.into()],
        ),
        (
            "replicas above 1 in migration",
            with(migration(), "/spec/replicas", json!(3)),
            vec![rwo.into()],
        ),
        (
            "replicas above 1 with DATABASE",
            with(db(), "/spec/replicas", json!(3)),
            vec![],
        ),
        (
            "credentials Secret with PVC",
            with(
                pvc(),
                "/spec/storage/databaseConfigurations",
                json!("creds"),
            ),
            vec!["spec.storage.databaseConfigurations: ignored with PVC storage".into()],
        ),
        (
            "size with DATABASE",
            with(db(), "/spec/storage/size", json!("1Gi")),
            vec![outside_migration("spec.storage.size")],
        ),
        (
            "folder without filename with DATABASE",
            with(db(), "/spec/storage/folder", json!("/inputs")),
            vec![outside_migration("spec.storage.folder")],
        ),
        (
            "data with DATABASE",
            with(db(), "/spec/data", json!({ "format": "CSV" })),
            vec![outside_migration("spec.data.format")],
        ),
        ("everything used in migration", migration(), vec![]),
        (
            "migration of files the service does not migrate",
            with(migration(), "/spec/data/filename", json!("data.csv")),
            vec!["spec.data.filename: the TrustyAI service (Python) moves into the database only the files of its folder whose names end in .hdf5; with \"data.csv\" nothing is moved and the service never becomes ready".into()],
        ),
        (
            "retention with DATABASE: a leftover volume may still follow it",
            with(db(), "/spec/storage/retention", json!("Delete")),
            vec![],
        ),
    ];
    for (name, input, expected) in cases {
        let verdict = check(&input, None);
        assert!(verdict.is_allowed(), "{name}: {:?}", messages(&verdict));
        assert_eq!(verdict.warnings, expected, "{name}");
    }
}

#[test]
fn missing_credentials_secret_warns_only_with_a_lookup() {
    let missing = "spec.storage.databaseConfigurations: Secret \"tas-db-credentials\" does not exist yet; the service cannot start until it exists with the keys databaseKind, databaseUsername, databasePassword, databaseService, databasePort, databaseName";
    let exists_only = |name: &'static str| move |secret: &str| secret == name;

    let none = exists_only("other");
    let with_lookup = |lookup: &dyn Fn(&str) -> bool, object: &Value| {
        let ctx = ValidationContext {
            allowed_image_prefixes: vec![],
            secret_exists: Some(lookup),
        };
        validate(object, None, &ctx)
    };
    assert_eq!(with_lookup(&none, &db()).warnings, [missing]);
    // The fallback name is looked up when the field is absent (generateName objects).
    assert_eq!(
        with_lookup(
            &none,
            &without(db(), "/spec/storage/databaseConfigurations")
        )
        .warnings,
        [missing]
    );
    let present = exists_only("tas-db-credentials");
    assert!(with_lookup(&present, &db()).warnings.is_empty());
    // Migration uses the database too; the named Secret is looked up.
    let creds = exists_only("creds");
    assert!(with_lookup(&creds, &migration()).warnings.is_empty());
    assert_eq!(with_lookup(&none, &migration()).warnings.len(), 1);
    // PVC storage needs no Secret; no lookup means no warning; malformed names are errors only.
    assert!(with_lookup(&none, &pvc()).warnings.is_empty());
    assert!(check(&db(), None).warnings.is_empty());
    let malformed = with(db(), "/spec/storage/databaseConfigurations", json!("Bad"));
    assert!(with_lookup(&none, &malformed).warnings.is_empty());
}

// --- never panic --------------------------------------------------------------------------

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

proptest! {
    #[test]
    fn defaulting_is_minimal_idempotent_and_consistent(spec in spec_like()) {
        let input = object("tas", spec);
        let patch = defaults_patch(&input, Operation::Create);
        for op in &patch.0 {
            let PatchOperation::Add(add) = op else {
                panic!("only add operations, got {op:?}");
            };
            // Never overwrites: each target was absent or null.
            let target = input.pointer(add.path.as_str());
            prop_assert!(target.is_none_or(Value::is_null), "overwrites {}", add.path);
        }
        let mut patched = input.clone();
        prop_assert!(json_patch::patch(&mut patched, &patch).is_ok());
        prop_assert_eq!(&patched, &defaulted(&input, Operation::Create));
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
