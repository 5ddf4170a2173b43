//! The converter's annotation in `metadata.annotations`, and the containers around it.
//!
//! Conversion may change nothing in `metadata` but this one annotation. To give back the exact
//! input on the way back, it also tracks whether it created `metadata.annotations` or `metadata`
//! to hold the annotation, so that the way back removes them again.

use serde_json::{Map, Value};

use super::preserved::Created;
use crate::contract::CONVERSION_PRESERVED_ANNOTATION;

/// Where an annotation would go in an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `metadata.annotations` is an object.
    Annotations,
    /// `metadata` is an object without `annotations`.
    NoAnnotations,
    /// The object has no `metadata`.
    NoMetadata,
    /// `metadata` or `metadata.annotations` is there but not an object. The API server never
    /// sends such an object; the converter then writes nothing (and keeps nothing).
    Unwritable,
}

impl Shape {
    pub(crate) fn of(object: &Map<String, Value>) -> Self {
        match object.get("metadata") {
            None => Shape::NoMetadata,
            Some(Value::Object(metadata)) => match metadata.get("annotations") {
                None => Shape::NoAnnotations,
                Some(Value::Object(_)) => Shape::Annotations,
                Some(_) => Shape::Unwritable,
            },
            Some(_) => Shape::Unwritable,
        }
    }

    pub(crate) fn writable(self) -> bool {
        self != Shape::Unwritable
    }

    /// The container writing an annotation creates.
    pub(crate) fn created(self) -> Option<Created> {
        match self {
            Shape::NoAnnotations => Some(Created::Annotations),
            Shape::NoMetadata => Some(Created::Metadata),
            Shape::Annotations | Shape::Unwritable => None,
        }
    }
}

/// Removes the converter's annotation and returns its value.
pub(crate) fn take(object: &mut Map<String, Value>) -> Option<Value> {
    object
        .get_mut("metadata")?
        .as_object_mut()?
        .get_mut("annotations")?
        .as_object_mut()?
        // shift_remove keeps the order of the other annotations.
        .shift_remove(CONVERSION_PRESERVED_ANNOTATION)
}

/// Removes what the annotation's writer created, if it is empty now.
pub(crate) fn remove_created(object: &mut Map<String, Value>, created: Created) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if metadata
        .get("annotations")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        metadata.shift_remove("annotations");
    }
    if created == Created::Metadata && metadata.is_empty() {
        object.shift_remove("metadata");
    }
}

/// Writes the converter's annotation, creating `metadata` and `annotations` when missing.
pub(crate) fn put(object: &mut Map<String, Value>, value: Value) {
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(CONVERSION_PRESERVED_ANNOTATION.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conversion::tests::map;

    #[test]
    fn shapes() {
        assert_eq!(Shape::of(&map(json!({}))), Shape::NoMetadata);
        assert_eq!(
            Shape::of(&map(json!({"metadata": {}}))),
            Shape::NoAnnotations
        );
        assert_eq!(
            Shape::of(&map(json!({"metadata": {"annotations": {}}}))),
            Shape::Annotations
        );
        assert_eq!(
            Shape::of(&map(json!({"metadata": null}))),
            Shape::Unwritable
        );
        assert_eq!(
            Shape::of(&map(json!({"metadata": {"annotations": []}}))),
            Shape::Unwritable
        );
    }

    #[test]
    fn put_then_take_then_remove_created_gives_back_the_object() {
        for original in [
            json!({"kind": "K"}),
            json!({"metadata": {"name": "n"}}),
            json!({"metadata": {}}),
            json!({"metadata": {"annotations": {}}}),
            json!({"metadata": {"annotations": {"a": "b"}}}),
        ] {
            let mut object = map(original.clone());
            let created = Shape::of(&object).created();
            put(&mut object, json!("v"));
            assert_eq!(take(&mut object), Some(json!("v")));
            if let Some(created) = created {
                remove_created(&mut object, created);
            }
            assert_eq!(Value::Object(object), original);
        }
    }

    #[test]
    fn remove_created_keeps_containers_that_hold_something_else() {
        let mut object = map(json!({"metadata": {"name": "n", "annotations": {"a": "b"}}}));
        remove_created(&mut object, Created::Metadata);
        assert_eq!(
            Value::Object(object),
            json!({"metadata": {"name": "n", "annotations": {"a": "b"}}})
        );
    }

    #[test]
    fn put_on_an_unwritable_object_changes_nothing() {
        for original in [
            json!({"metadata": 3}),
            json!({"metadata": {"annotations": "x"}}),
        ] {
            let mut object = map(original.clone());
            put(&mut object, json!("v"));
            assert_eq!(take(&mut object), None);
            assert_eq!(Value::Object(object), original);
        }
    }
}
