//! Defaulting of TrustyAIService v1 objects, as a pure function: the mutating admission webhook
//! sends [`defaults_patch`] back to the API server, and the offline CLI uses [`apply_defaults`].
//!
//! Only absent fields are added; a value that is set (even an invalid one) is never
//! overwritten, because validation must see what the user wrote in order to reject it. Each
//! default equals what the controller assumes when the field is absent, so defaulting an old
//! object on UPDATE changes nothing it does, and defaulting twice adds nothing the second time.
//!
//! Parts of an object that have the wrong shape (a `spec` that is not an object, an unknown
//! storage format) get no defaults: validation reports them.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Map, Value, json};

use crate::contract::{retention, storage_format, suffix};

/// `spec.replicas` when absent.
pub const DEFAULT_REPLICAS: i32 = 1;
/// `spec.storage.folder` when a PVC is used.
pub const DEFAULT_FOLDER: &str = "/inputs";
/// `spec.storage.size` when a PVC is used.
pub const DEFAULT_SIZE: &str = "1Gi";
/// `spec.storage.retention` when a PVC is used.
pub const DEFAULT_RETENTION: &str = retention::RETAIN;
/// `spec.data.filename` with PVC storage.
pub const DEFAULT_DATA_FILENAME: &str = "data.csv";
/// `spec.data.format` when a PVC is used.
pub const DEFAULT_DATA_FORMAT: &str = "CSV";
/// `spec.metrics.batchSize` when absent.
pub const DEFAULT_BATCH_SIZE: i64 = 5000;

/// The admission operations that default and validate an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// The object is being created.
    Create,
    /// The object is being replaced or patched.
    Update,
}

/// How a spec stores its data, read leniently from JSON (no deserialization, so it works on
/// objects that break other rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageMode {
    /// `format: PVC`: files on a PersistentVolumeClaim.
    Pvc,
    /// `format: DATABASE` without migration.
    Database,
    /// `format: DATABASE` with `storage.folder` and `data.filename` set: the service moves the
    /// data from the PVC into the database, so both are used.
    Migration,
}

impl StorageMode {
    /// The object has (or keeps) a PersistentVolumeClaim.
    pub fn uses_pvc(self) -> bool {
        matches!(self, Self::Pvc | Self::Migration)
    }

    /// The service talks to a database.
    pub fn uses_database(self) -> bool {
        matches!(self, Self::Database | Self::Migration)
    }
}

/// The storage mode selected by `spec`, or `None` when `spec.storage.format` is missing or not
/// one of `PVC` and `DATABASE`. Migration follows the Go operator's rule: empty strings count
/// as unset.
pub fn storage_mode(spec: &Value) -> Option<StorageMode> {
    let storage = spec.get("storage")?;
    match storage.get("format")?.as_str()? {
        storage_format::PVC => Some(StorageMode::Pvc),
        storage_format::DATABASE
            if non_empty_str(storage.get("folder"))
                && non_empty_str(spec.pointer("/data/filename")) =>
        {
            Some(StorageMode::Migration)
        }
        storage_format::DATABASE => Some(StorageMode::Database),
        _ => None,
    }
}

/// A minimal RFC 6902 patch that adds the defaults `object` lacks: one `add` per absent field,
/// or one for a whole absent parent object (`/spec/data`), and nothing at all when the object
/// is already defaulted.
///
/// Both operations follow the same rule (add what is absent, never overwrite); the parameter
/// keeps that decision visible at the call site.
pub fn defaults_patch(object: &Value, operation: Operation) -> Patch {
    let _same_rule_for_both = operation;
    to_patch(&additions(object))
}

/// Adds the defaults to `object` in place, exactly as applying [`defaults_patch`] would, and
/// returns that patch.
pub fn apply_defaults(object: &mut Value, operation: Operation) -> Patch {
    let _same_rule_for_both = operation;
    let additions = additions(object);
    let patch = to_patch(&additions);
    for addition in additions {
        insert(object, addition.path, addition.value);
    }
    patch
}

/// `object` with its defaults added.
pub fn defaulted(object: &Value, operation: Operation) -> Value {
    let mut copy = object.clone();
    apply_defaults(&mut copy, operation);
    copy
}

/// One field to add: its path from the root, and its value.
struct Addition {
    path: &'static [&'static str],
    value: Value,
}

fn additions(object: &Value) -> Vec<Addition> {
    let mut out = Vec::new();
    let Some(spec) = object.get("spec").and_then(Value::as_object) else {
        return out;
    };
    if absent(spec.get("replicas")) {
        out.push(add(&["spec", "replicas"], json!(DEFAULT_REPLICAS)));
    }
    if let Some(mode) = object.get("spec").and_then(storage_mode) {
        storage_additions(object, spec, mode, &mut out);
    }
    // An absent `metrics` stays absent: its `schedule` is required and has no default, and
    // validation says so more clearly about `spec.metrics` than about a half-made object.
    if let Some(metrics) = spec.get("metrics").and_then(Value::as_object)
        && absent(metrics.get("batchSize"))
    {
        out.push(add(
            &["spec", "metrics", "batchSize"],
            json!(DEFAULT_BATCH_SIZE),
        ));
    }
    out
}

fn storage_additions(
    object: &Value,
    spec: &Map<String, Value>,
    mode: StorageMode,
    out: &mut Vec<Addition>,
) {
    // storage_mode found a format, so storage is an object.
    let Some(storage) = spec.get("storage").and_then(Value::as_object) else {
        return;
    };
    if mode.uses_pvc() {
        // In migration mode folder and data.filename are set by definition, so the same
        // checks add only size, retention and data.format there.
        for (key, path, value) in [
            ("folder", &["spec", "storage", "folder"], DEFAULT_FOLDER),
            ("size", &["spec", "storage", "size"], DEFAULT_SIZE),
            (
                "retention",
                &["spec", "storage", "retention"],
                DEFAULT_RETENTION,
            ),
        ] {
            if absent(storage.get(key)) {
                out.push(add(path, json!(value)));
            }
        }
        data_additions(spec, out);
    }
    if mode.uses_database()
        && absent(storage.get("databaseConfigurations"))
        && let Some(name) = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
    {
        // With generateName the name is not known yet at mutating admission; the controller
        // then falls back to the same `<name>-db-credentials`.
        out.push(add(
            &["spec", "storage", "databaseConfigurations"],
            json!(format!("{name}{}", suffix::DB_CREDENTIALS)),
        ));
    }
}

fn data_additions(spec: &Map<String, Value>, out: &mut Vec<Addition>) {
    match spec.get("data") {
        None | Some(Value::Null) => out.push(add(
            &["spec", "data"],
            json!({ "filename": DEFAULT_DATA_FILENAME, "format": DEFAULT_DATA_FORMAT }),
        )),
        Some(Value::Object(data)) => {
            if absent(data.get("filename")) {
                out.push(add(
                    &["spec", "data", "filename"],
                    json!(DEFAULT_DATA_FILENAME),
                ));
            }
            if absent(data.get("format")) {
                out.push(add(&["spec", "data", "format"], json!(DEFAULT_DATA_FORMAT)));
            }
        }
        Some(_) => {}
    }
}

fn to_patch(additions: &[Addition]) -> Patch {
    Patch(
        additions
            .iter()
            .map(|addition| {
                PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(addition.path.iter().copied()),
                    value: addition.value.clone(),
                })
            })
            .collect(),
    )
}

fn add(path: &'static [&'static str], value: Value) -> Addition {
    Addition { path, value }
}

/// Absent or `null`: the API server drops nulls of non-nullable fields, so both mean unset
/// (and a JSON Patch `add` replaces a null).
fn absent(value: Option<&Value>) -> bool {
    matches!(value, None | Some(Value::Null))
}

fn non_empty_str(value: Option<&Value>) -> bool {
    value.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

/// Sets `path` in `root`. The parents exist: [`additions`] only adds below objects it saw.
fn insert(root: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = root;
    for key in parents {
        match node.get_mut(*key) {
            Some(child) => node = child,
            None => return,
        }
    }
    if let Some(map) = node.as_object_mut() {
        map.insert((*last).to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(patch: &Patch) -> Vec<String> {
        patch
            .0
            .iter()
            .map(|op| match op {
                PatchOperation::Add(add) => add.path.to_string(),
                other => panic!("unexpected operation {other:?}"),
            })
            .collect()
    }

    fn pvc_minimal() -> Value {
        json!({
            "metadata": { "name": "tas" },
            "spec": { "storage": { "format": "PVC" }, "metrics": { "schedule": "5s" } }
        })
    }

    #[test]
    fn pvc_gets_every_default_with_whole_data_object() {
        let patch = defaults_patch(&pvc_minimal(), Operation::Create);
        assert_eq!(
            paths(&patch),
            [
                "/spec/replicas",
                "/spec/storage/folder",
                "/spec/storage/size",
                "/spec/storage/retention",
                "/spec/data",
                "/spec/metrics/batchSize"
            ]
        );
        let mut object = pvc_minimal();
        apply_defaults(&mut object, Operation::Create);
        assert_eq!(
            object["spec"],
            json!({
                "storage": { "format": "PVC", "folder": "/inputs", "size": "1Gi", "retention": "Retain" },
                "metrics": { "schedule": "5s", "batchSize": 5000 },
                "replicas": 1,
                "data": { "filename": "data.csv", "format": "CSV" }
            })
        );
    }

    #[test]
    fn defaulting_twice_adds_nothing() {
        let once = defaulted(&pvc_minimal(), Operation::Create);
        assert!(defaults_patch(&once, Operation::Update).0.is_empty());
    }

    #[test]
    fn apply_matches_the_patch() {
        let mut patched = pvc_minimal();
        let patch = defaults_patch(&patched, Operation::Create);
        json_patch::patch(&mut patched, &patch).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(patched, defaulted(&pvc_minimal(), Operation::Create));
    }

    #[test]
    fn nulls_count_as_absent() {
        let object = json!({
            "metadata": { "name": "tas" },
            "spec": { "replicas": null, "storage": { "format": "PVC", "size": null },
                      "data": null, "metrics": { "schedule": "5s", "batchSize": null } }
        });
        let patch = defaults_patch(&object, Operation::Update);
        assert!(paths(&patch).contains(&"/spec/replicas".to_owned()));
        assert!(paths(&patch).contains(&"/spec/data".to_owned()));
        assert_eq!(
            defaulted(&object, Operation::Update)["spec"]["storage"]["size"],
            "1Gi"
        );
    }

    #[test]
    fn storage_mode_reading() {
        let mode = |spec: Value| storage_mode(&spec);
        assert_eq!(
            mode(json!({"storage": {"format": "PVC"}})),
            Some(StorageMode::Pvc)
        );
        assert_eq!(
            mode(json!({"storage": {"format": "DATABASE", "folder": "/x"}})),
            Some(StorageMode::Database)
        );
        assert_eq!(
            mode(
                json!({"storage": {"format": "DATABASE", "folder": ""}, "data": {"filename": "d"}})
            ),
            Some(StorageMode::Database)
        );
        assert_eq!(
            mode(
                json!({"storage": {"format": "DATABASE", "folder": "/x"}, "data": {"filename": "d"}})
            ),
            Some(StorageMode::Migration)
        );
        assert_eq!(mode(json!({"storage": {"format": "FOO"}})), None);
        assert_eq!(mode(json!({"storage": {"format": 5}})), None);
        assert_eq!(mode(json!({"storage": "PVC"})), None);
        assert_eq!(mode(json!("spec")), None);
    }
}
