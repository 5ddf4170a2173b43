//! RFC 6902 JSON patches, the form of every change to objects this operator does not own.
//!
//! Such objects (InferenceServices, ModelMesh Deployments) are shared with their owners and with
//! other TrustyAIServices, so a patch changes only what it must, and starts with a `test` of the
//! `metadata.resourceVersion` it was computed from: if anything changed in between, the API
//! server rejects the whole patch (HTTP 422) and the next reconcile recomputes it. Indexed paths
//! are additionally guarded by a `test` of the element's name.

use serde::Serialize;
use serde_json::Value;

/// One operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Operation {
    /// Fails the patch unless `path` holds `value`.
    Test {
        /// JSON pointer.
        path: String,
        /// Expected value.
        value: Value,
    },
    /// Adds `value` at `path` (appends with a final `-`).
    Add {
        /// JSON pointer.
        path: String,
        /// New value.
        value: Value,
    },
    /// Replaces the value at `path`.
    Replace {
        /// JSON pointer.
        path: String,
        /// New value.
        value: Value,
    },
    /// Removes the value at `path`.
    Remove {
        /// JSON pointer.
        path: String,
    },
}

/// A JSON patch. Empty means there is nothing to change.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(transparent)]
pub struct JsonPatch(pub Vec<Operation>);

impl JsonPatch {
    /// No operation: the object is already as wanted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The operations.
    pub fn operations(&self) -> &[Operation] {
        &self.0
    }

    /// The patch as a JSON array.
    pub fn to_value(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .filter_map(|op| serde_json::to_value(op).ok())
                .collect(),
        )
    }

    /// The patch as a `kube` JSON patch, for `Api::patch`.
    pub fn to_kube_patch<P: Serialize>(&self) -> Result<kube::api::Patch<P>, serde_json::Error> {
        Ok(kube::api::Patch::Json(serde_json::from_value(
            self.to_value(),
        )?))
    }
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
                .map(|rv| Operation::Test {
                    path: "/metadata/resourceVersion".to_owned(),
                    value: Value::String(rv.to_owned()),
                })
                .into_iter()
                .collect(),
            changes: Vec::new(),
        }
    }

    /// A `test` that belongs to the following changes.
    pub(crate) fn test(&mut self, path: String, value: Value) {
        self.changes.push(Operation::Test { path, value });
    }

    pub(crate) fn add(&mut self, path: String, value: Value) {
        self.changes.push(Operation::Add { path, value });
    }

    pub(crate) fn replace(&mut self, path: String, value: Value) {
        self.changes.push(Operation::Replace { path, value });
    }

    pub(crate) fn remove(&mut self, path: String) {
        self.changes.push(Operation::Remove { path });
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
            .any(|op| !matches!(op, Operation::Test { .. }));
        if changes {
            JsonPatch(self.guards.into_iter().chain(self.changes).collect())
        } else {
            JsonPatch::default()
        }
    }
}

/// A JSON pointer made of `tokens`, escaped (`~` → `~0`, `/` → `~1`).
pub fn pointer<T: AsRef<str>>(tokens: &[T]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.as_ref().replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// Applies `patch` to `target` as an API server would (test-only: the real one runs in the
/// API server).
#[cfg(test)]
pub(crate) fn apply(target: &mut Value, patch: &JsonPatch) -> Result<(), String> {
    fn split(path: &str) -> Result<(String, String), String> {
        let (parent, last) = path.rsplit_once('/').ok_or(format!("bad path {path}"))?;
        Ok((
            parent.to_owned(),
            last.replace("~1", "/").replace("~0", "~"),
        ))
    }
    for op in &patch.0 {
        match op {
            Operation::Test { path, value } => {
                if target.pointer(path) != Some(value) {
                    return Err(format!("test failed at {path}"));
                }
            }
            Operation::Add { path, value } => {
                let (parent, last) = split(path)?;
                match target.pointer_mut(&parent).ok_or(format!("no {parent}"))? {
                    Value::Array(items) if last == "-" => items.push(value.clone()),
                    Value::Array(items) => {
                        let i: usize = last.parse().map_err(|_| format!("bad index {last}"))?;
                        if i > items.len() {
                            return Err(format!("index {i} out of range"));
                        }
                        items.insert(i, value.clone());
                    }
                    Value::Object(map) => {
                        map.insert(last, value.clone());
                    }
                    _ => return Err(format!("{parent} is not a container")),
                }
            }
            Operation::Replace { path, value } => {
                *target.pointer_mut(path).ok_or(format!("no {path}"))? = value.clone();
            }
            Operation::Remove { path } => {
                let (parent, last) = split(path)?;
                match target.pointer_mut(&parent).ok_or(format!("no {parent}"))? {
                    Value::Array(items) => {
                        let i: usize = last.parse().map_err(|_| format!("bad index {last}"))?;
                        if i >= items.len() {
                            return Err(format!("index {i} out of range"));
                        }
                        items.remove(i);
                    }
                    Value::Object(map) => {
                        map.remove(&last).ok_or(format!("no {path}"))?;
                    }
                    _ => return Err(format!("{parent} is not a container")),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_as_rfc6902() {
        let mut b = Builder::guarded_by(Some("42"));
        b.add("/a/-".into(), json!(1));
        b.remove("/b".into());
        let patch = b.finish();
        assert_eq!(
            patch.to_value(),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/a/-", "value": 1},
                {"op": "remove", "path": "/b"}
            ])
        );
        let kube_patch = patch.to_kube_patch::<()>().expect("kube patch");
        assert!(matches!(kube_patch, kube::api::Patch::Json(_)));
    }

    #[test]
    fn only_tests_make_an_empty_patch() {
        let mut b = Builder::guarded_by(Some("1"));
        b.test("/x".into(), json!(1));
        assert!(b.finish().is_empty());
    }

    #[test]
    fn pointer_escapes() {
        assert_eq!(
            pointer(&["metadata", "annotations", "a.io/b~c"]),
            "/metadata/annotations/a.io~1b~0c"
        );
    }

    #[test]
    fn applier_follows_rfc6902() {
        let mut doc = json!({"a": [1, 2], "o": {"k/x": 1}});
        let patch = JsonPatch(vec![
            Operation::Test {
                path: "/a/0".into(),
                value: json!(1),
            },
            Operation::Add {
                path: "/a/-".into(),
                value: json!(3),
            },
            Operation::Remove {
                path: "/a/0".into(),
            },
            Operation::Replace {
                path: "/o/k~1x".into(),
                value: json!(2),
            },
        ]);
        apply(&mut doc, &patch).expect("applies");
        assert_eq!(doc, json!({"a": [2, 3], "o": {"k/x": 2}}));
        let failing = JsonPatch(vec![Operation::Test {
            path: "/a/0".into(),
            value: json!(9),
        }]);
        assert!(apply(&mut doc, &failing).is_err());
    }
}
