//! Defaulting of a TrustyAIMetric: a deprecated `spec.type` (one of the service's aliases,
//! [`super::kinds::ALIASES`]) becomes the current name. The mutating webhook sends the result
//! as its JSON patch and the offline `validate` applies it, so both judge the same object and
//! give the same warning.

use json_patch::jsonptr::PointerBuf;
use json_patch::{Patch, PatchOperation, ReplaceOperation, TestOperation};
use serde_json::Value;

use super::kinds;

/// What defaulting changed: the patch that does it to the object as sent, and one warning per
/// change, each naming the field, the old and the new value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Defaulted {
    /// The operations, in the order they apply (empty: nothing to change).
    pub patch: Patch,
    /// Admission warnings, in the API server's `field: message` style.
    pub warnings: Vec<String>,
}

/// Defaults `object` in place and says what changed. Anything that is not an alias (a current
/// name, an unknown name, no `spec.type` at all) is left for validation to judge.
pub fn apply_defaults(object: &mut Value) -> Defaulted {
    let mut defaulted = Defaulted::default();
    let Some(type_) = object.pointer_mut("/spec/type") else {
        return defaulted;
    };
    let Some(current) = type_.as_str().and_then(kinds::alias_of) else {
        return defaulted;
    };
    let old = std::mem::replace(type_, Value::from(current));
    let path = PointerBuf::from_tokens(["spec", "type"]);
    defaulted.warnings.push(format!(
        "spec.type: {old} is a deprecated name of the metric type {current:?}; replaced with {current:?}"
    ));
    // The `test` makes the patch apply only to the object it was computed for: the API server
    // applies it to that object anyway, and a stale patch then fails instead of overwriting.
    defaulted.patch.0.push(PatchOperation::Test(TestOperation {
        path: path.clone(),
        value: old,
    }));
    defaulted
        .patch
        .0
        .push(PatchOperation::Replace(ReplaceOperation {
            path,
            value: Value::from(current),
        }));
    defaulted
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metric(type_: Value) -> Value {
        json!({"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIMetric",
               "metadata": {"name": "m"}, "spec": {"model": "demo-model", "type": type_}})
    }

    #[test]
    fn an_alias_is_replaced_by_its_current_name_with_a_warning() {
        for (alias, current) in kinds::ALIASES {
            let sent = metric(json!(alias));
            let mut object = sent.clone();
            let defaulted = apply_defaults(&mut object);
            assert_eq!(object["spec"]["type"], current);
            assert_eq!(defaulted.warnings.len(), 1, "{alias}");
            let warning = &defaulted.warnings[0];
            assert!(
                warning.starts_with("spec.type: ")
                    && warning.contains(&format!("{alias:?}"))
                    && warning.contains(&format!("{current:?}")),
                "{warning}"
            );
            // The patch does to the object as sent what defaulting did.
            let mut patched = sent;
            assert!(json_patch::patch(&mut patched, &defaulted.patch).is_ok());
            assert_eq!(patched, object, "{alias}");
        }
    }

    #[test]
    fn anything_but_an_alias_is_left_alone() {
        for odd in [
            metric(json!("spd")),
            metric(json!("nonsense")),
            metric(json!(7)),
            json!({"spec": {}}),
            json!({"spec": "text"}),
            json!("not an object"),
        ] {
            let mut object = odd.clone();
            assert_eq!(apply_defaults(&mut object), Defaulted::default(), "{odd}");
            assert_eq!(object, odd);
        }
    }
}
