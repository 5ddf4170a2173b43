//! RFC 6902 JSON patches, the form of every change to objects this operator does not own.
//!
//! Such objects (InferenceServices, ModelMesh Deployments) are shared with their owners and with
//! other TrustyAIServices, so a patch changes only what it must, and starts with a `test` of the
//! `metadata.resourceVersion` it was computed from: if anything changed in between, the API
//! server rejects the whole patch (HTTP 422) and the next reconcile recomputes it. Indexed paths
//! are additionally guarded by a `test` of the element's name.

use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation,
};
use serde_json::Value;

/// One operation: the `json-patch` crate's, which kube's `Patch::Json` carries.
pub type Operation = PatchOperation;

/// A JSON patch. Empty means there is nothing to change.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonPatch(pub Vec<Operation>);

impl JsonPatch {
    /// No operation: the object is already as wanted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The operations.
    #[cfg(test)]
    pub fn operations(&self) -> &[Operation] {
        &self.0
    }

    /// The patch as a JSON array.
    #[cfg(test)]
    pub fn to_value(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .filter_map(|op| serde_json::to_value(op).ok())
                .collect(),
        )
    }

    /// The patch as a `kube` JSON patch, for `Api::patch`.
    pub fn to_kube_patch<P: serde::Serialize>(&self) -> kube::api::Patch<P> {
        kube::api::Patch::Json(Patch(self.0.clone()))
    }
}

/// A `test` that `path` holds `value`.
pub fn test(path: PointerBuf, value: Value) -> Operation {
    PatchOperation::Test(TestOperation { path, value })
}

/// A `remove` of `path`.
pub fn remove(path: PointerBuf) -> Operation {
    PatchOperation::Remove(RemoveOperation { path })
}

/// Collects the operations of one patch; the guards are kept only if a change follows.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    guards: Vec<Operation>,
    changes: Vec<Operation>,
}

impl Builder {
    /// A builder whose patch fails unless the object still has `resource_version`.
    pub(crate) fn guarded_by(resource_version: Option<&str>) -> Self {
        Self {
            guards: resource_version
                .map(|rv| {
                    test(
                        pointer(&["metadata", "resourceVersion"]),
                        Value::String(rv.to_owned()),
                    )
                })
                .into_iter()
                .collect(),
            changes: Vec::new(),
        }
    }

    /// A `test` that belongs to the following changes.
    pub(crate) fn test(&mut self, path: PointerBuf, value: Value) {
        self.changes.push(test(path, value));
    }

    pub(crate) fn add(&mut self, path: PointerBuf, value: Value) {
        self.changes
            .push(PatchOperation::Add(AddOperation { path, value }));
    }

    pub(crate) fn replace(&mut self, path: PointerBuf, value: Value) {
        self.changes
            .push(PatchOperation::Replace(ReplaceOperation { path, value }));
    }

    pub(crate) fn remove(&mut self, path: PointerBuf) {
        self.changes.push(remove(path));
    }

    /// Appends the operations of `other` (its guards are dropped).
    pub(crate) fn extend(&mut self, other: Builder) {
        self.changes.extend(other.changes);
    }

    /// The patch; empty when nothing but tests was recorded.
    pub(crate) fn finish(self) -> JsonPatch {
        let changes = self
            .changes
            .iter()
            .any(|op| !matches!(op, PatchOperation::Test(_)));
        if changes {
            JsonPatch(self.guards.into_iter().chain(self.changes).collect())
        } else {
            JsonPatch::default()
        }
    }
}

/// A JSON pointer made of `tokens` (each escaped: `~` → `~0`, `/` → `~1`).
pub fn pointer<T: AsRef<str>>(tokens: &[T]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().map(AsRef::as_ref))
}

/// Applies `patch` to `target` as an API server would (test-only: the real one runs in the
/// API server).
#[cfg(test)]
pub(crate) fn apply(target: &mut Value, patch: &JsonPatch) -> Result<(), json_patch::PatchError> {
    json_patch::patch(target, &patch.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_as_rfc6902() {
        let mut b = Builder::guarded_by(Some("42"));
        b.add(pointer(&["a", "-"]), json!(1));
        b.remove(pointer(&["b"]));
        let patch = b.finish();
        assert_eq!(
            patch.to_value(),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/a/-", "value": 1},
                {"op": "remove", "path": "/b"}
            ])
        );
        assert!(matches!(
            patch.to_kube_patch::<()>(),
            kube::api::Patch::Json(_)
        ));
    }

    #[test]
    fn only_tests_make_an_empty_patch() {
        let mut b = Builder::guarded_by(Some("1"));
        b.test(pointer(&["x"]), json!(1));
        assert!(b.finish().is_empty());
    }

    #[test]
    fn pointer_escapes() {
        assert_eq!(
            pointer(&["metadata", "annotations", "a.io/b~c"]).to_string(),
            "/metadata/annotations/a.io~1b~0c"
        );
    }
}
