//! The Go operator's migration trigger, the annotation `trustyai.opendatahub.io/db-migration`.
//!
//! There it makes the operator replace a Deployment it otherwise never updates, and is removed
//! once that is done. This operator applies spec changes at once, so the annotation triggers
//! nothing more; it is still removed once the children of the current spec are applied, so
//! that whoever waits for it to go (the Go operator's contract) sees it go.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use trustyai_crds::contract::DB_MIGRATION_ANNOTATION;

use super::wiring::json_patch::{JsonPatch, pointer, remove, test};

/// The patch removing the annotation, guarded by the value seen (a value set again in between
/// makes it fail rather than vanish unseen); `None` without the annotation.
pub fn removal_patch(meta: &ObjectMeta) -> Option<JsonPatch> {
    let value = meta.annotations.as_ref()?.get(DB_MIGRATION_ANNOTATION)?;
    let path = pointer(&["metadata", "annotations", DB_MIGRATION_ANNOTATION]);
    Some(JsonPatch(vec![
        test(path.clone(), Value::String(value.clone())),
        remove(path),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_only_the_annotation_seen() {
        let meta = ObjectMeta {
            annotations: Some(
                [
                    (DB_MIGRATION_ANNOTATION.to_owned(), "now".to_owned()),
                    ("other".to_owned(), "kept".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        };
        let patch = removal_patch(&meta).map(|p| p.to_value());
        assert_eq!(
            patch,
            Some(json!([
                {"op": "test", "path": "/metadata/annotations/trustyai.opendatahub.io~1db-migration", "value": "now"},
                {"op": "remove", "path": "/metadata/annotations/trustyai.opendatahub.io~1db-migration"}
            ]))
        );
    }

    #[test]
    fn nothing_to_do_without_it() {
        assert!(removal_patch(&ObjectMeta::default()).is_none());
        let other = ObjectMeta {
            annotations: Some([("other".to_owned(), "kept".to_owned())].into()),
            ..ObjectMeta::default()
        };
        assert!(removal_patch(&other).is_none());
    }
}
