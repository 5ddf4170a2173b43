//! The objects the tables start from, and the readers of a verdict and a patch they share.

use json_patch::Patch;
use serde_json::{Value, json};
use trustyai_crds::defaults::{Operation, defaulted};
use trustyai_crds::validation::{Rule, ValidationContext, Verdict, validate};

pub(crate) fn object(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "trustyai.opendatahub.io/v1",
        "kind": "TrustyAIService",
        "metadata": { "name": name, "namespace": "ns" },
        "spec": spec
    })
}

pub(crate) fn pvc_spec() -> Value {
    json!({ "storage": { "format": "PVC" }, "metrics": { "schedule": "5s" } })
}

pub(crate) fn db_spec() -> Value {
    json!({ "storage": { "format": "DATABASE" }, "metrics": { "schedule": "5s" } })
}

pub(crate) fn migration_spec() -> Value {
    json!({
        "storage": { "format": "DATABASE", "folder": "/inputs", "databaseConfigurations": "creds" },
        "data": { "filename": "data.hdf5" },
        "metrics": { "schedule": "5s" }
    })
}

/// A valid, defaulted object of each mode.
pub(crate) fn pvc() -> Value {
    defaulted(&object("tas", pvc_spec()), Operation::Create)
}
pub(crate) fn db() -> Value {
    defaulted(&object("tas", db_spec()), Operation::Create)
}
pub(crate) fn migration() -> Value {
    defaulted(&object("tas", migration_spec()), Operation::Create)
}

/// `value` with the JSON pointer `ptr` set (parents created as objects).
pub(crate) fn with(mut value: Value, ptr: &str, new: Value) -> Value {
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
pub(crate) fn without(mut value: Value, ptr: &str) -> Value {
    let (parent, key) = ptr.rsplit_once('/').unwrap_or(("", ptr));
    if let Some(map) = value.pointer_mut(parent).and_then(Value::as_object_mut) {
        map.remove(key);
    }
    value
}

pub(crate) fn ctx() -> ValidationContext<'static> {
    ValidationContext {
        allowed_image_prefixes: vec!["quay.io/trustyai/".into(), "registry.redhat.io".into()],
        secret_exists: None,
    }
}

pub(crate) fn check(new: &Value, old: Option<&Value>) -> Verdict {
    validate(new, old, &ctx())
}

pub(crate) fn messages(verdict: &Verdict) -> Vec<String> {
    verdict.errors.iter().map(ToString::to_string).collect()
}

pub(crate) fn rules(verdict: &Verdict) -> Vec<Rule> {
    verdict.errors.iter().map(|e| e.rule).collect()
}

pub(crate) fn patch_json(patch: &Patch) -> Value {
    serde_json::to_value(patch).unwrap_or_else(|e| panic!("patch serializes: {e}"))
}
