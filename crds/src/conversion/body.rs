//! Conversion of `spec` and `status`, in either direction, on JSON values.
//!
//! Both versions share every field except the ones listed in [`V1_ONLY`] and the spelling of
//! condition statuses. Anything else, known or not, valid or not, is carried unchanged: the API
//! server prunes what a version's schema does not know, and validation is not conversion's job.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::Version;
use super::preserved::{Entry, Preserved};

/// Paths of fields that only one version has, below `spec`, below `status`, and in one
/// condition. A unit test compares them with the two versions' schemas.
pub(crate) struct OnlyIn {
    pub spec: &'static [&'static [&'static str]],
    pub status: &'static [&'static [&'static str]],
    pub condition: &'static [&'static str],
}

/// What v1 has and v1alpha1 lacks.
pub(crate) const V1_ONLY: OnlyIn = OnlyIn {
    spec: &[&["image"], &["storage", "retention"]],
    status: &[&["observedGeneration"], &["image"]],
    condition: &["observedGeneration"],
};

/// v1alpha1 has nothing v1 lacks (only looser condition statuses).
const V1ALPHA1_ONLY: OnlyIn = OnlyIn {
    spec: &[],
    status: &[],
    condition: &[],
};

fn only_in(version: Version) -> &'static OnlyIn {
    match version {
        Version::V1 => &V1_ONLY,
        Version::V1alpha1 => &V1ALPHA1_ONLY,
    }
}

/// The condition fields an [`Entry`] remembers: they identify the condition and change whenever
/// its status is rewritten.
pub(crate) const SEEN: [&str; 3] = ["type", "status", "lastTransitionTime"];

/// v1's spelling of a v1alpha1 condition status: `True`/`False` by case-insensitive match,
/// anything else `Unknown` (the Go operator's rule, made case-insensitive).
pub(crate) fn canonical_status(status: &str) -> &'static str {
    if status.eq_ignore_ascii_case("true") {
        "True"
    } else if status.eq_ignore_ascii_case("false") {
        "False"
    } else {
        "Unknown"
    }
}

/// A condition status as version `to` spells it. v1alpha1 takes any string, so v1 → v1alpha1
/// copies; a status that is not a string is carried as it is.
fn map_status(status: &Value, to: Version) -> Value {
    match (to, status) {
        (Version::V1, Value::String(s)) => Value::String(canonical_status(s).to_owned()),
        _ => status.clone(),
    }
}

/// Converts `spec` and `status` of `object` (already a copy) from `from` to `to`, restoring what
/// `incoming` (data for restoring `to`) still applies to, and returns the data for restoring
/// `from` (without `created`, which depends on the metadata).
pub(crate) fn convert(
    object: &mut Map<String, Value>,
    from: Version,
    to: Version,
    incoming: &Preserved,
) -> Preserved {
    let mut own = Preserved::new(from);
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        own.spec = take_fields(spec, only_in(from).spec);
        restore_fields(spec, only_in(to).spec, &incoming.spec);
    }
    if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
        own.status = take_fields(status, only_in(from).status);
        restore_fields(status, only_in(to).status, &incoming.status);
        if let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) {
            own.conditions = convert_conditions(list, from, to, &incoming.conditions);
        }
    }
    own
}

/// The part of `object` that [`convert`]'s returned data depends on: `spec` and `status` with
/// only the fields either version lacks, and each condition with only the fields [`SEEN`] and
/// the version-only condition fields (a condition that is not an object stays in the list as
/// `null`, so ranks among the others are kept). Converting the projection gives the same data as
/// converting the whole object, for a fraction of the copy (messages, reasons and every shared
/// field stay behind).
pub(crate) fn projection(object: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, paths) in [
        ("spec", [V1_ONLY.spec, V1ALPHA1_ONLY.spec]),
        ("status", [V1_ONLY.status, V1ALPHA1_ONLY.status]),
    ] {
        let Some(node) = object.get(key).and_then(Value::as_object) else {
            continue;
        };
        let mut kept = Map::new();
        for path in paths.into_iter().flatten() {
            if let Some((leaf, parents)) = path.split_last()
                && let Some(value) = descend(node, parents).and_then(|p| p.get(*leaf))
            {
                put_nested(&mut kept, parents, leaf, value.clone());
            }
        }
        if key == "status"
            && let Some(list) = node.get("conditions").and_then(Value::as_array)
        {
            let fields = SEEN
                .iter()
                .chain(V1_ONLY.condition)
                .chain(V1ALPHA1_ONLY.condition);
            let conditions = list
                .iter()
                .map(|item| match item.as_object() {
                    Some(condition) => Value::Object(
                        fields
                            .clone()
                            .filter_map(|f| condition.get(*f).map(|v| ((*f).to_owned(), v.clone())))
                            .collect(),
                    ),
                    None => Value::Null,
                })
                .collect();
            kept.insert("conditions".into(), Value::Array(conditions));
        }
        out.insert(key.to_owned(), Value::Object(kept));
    }
    out
}

/// Removes the fields at `paths` from `node`, returning them nested as they were.
fn take_fields(node: &mut Map<String, Value>, paths: &[&[&str]]) -> Map<String, Value> {
    let mut taken = Map::new();
    for path in paths {
        let Some((leaf, parents)) = path.split_last() else {
            continue;
        };
        let Some(parent) = descend_mut(node, parents) else {
            continue;
        };
        // shift_remove keeps the order of the remaining keys.
        if let Some(value) = parent.shift_remove(*leaf) {
            put_nested(&mut taken, parents, leaf, value);
        }
    }
    taken
}

fn put_nested(node: &mut Map<String, Value>, parents: &[&str], leaf: &str, value: Value) {
    match parents.split_first() {
        None => {
            node.insert(leaf.to_owned(), value);
        }
        Some((first, rest)) => {
            let child = node
                .entry(*first)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(child) = child.as_object_mut() {
                put_nested(child, rest, leaf, value);
            }
        }
    }
}

/// Puts back the fields at `paths` found in `kept`. A field goes back only into a parent that
/// still exists (a parent removed through the other version stays removed) and only if the
/// object does not have it already (a value written through the other version wins).
fn restore_fields(node: &mut Map<String, Value>, paths: &[&[&str]], kept: &Map<String, Value>) {
    for path in paths {
        let Some((leaf, parents)) = path.split_last() else {
            continue;
        };
        let Some(value) = descend(kept, parents).and_then(|p| p.get(*leaf)) else {
            continue;
        };
        if let Some(parent) = descend_mut(node, parents)
            && !parent.contains_key(*leaf)
        {
            parent.insert((*leaf).to_owned(), value.clone());
        }
    }
}

fn descend<'a>(mut node: &'a Map<String, Value>, path: &[&str]) -> Option<&'a Map<String, Value>> {
    for p in path {
        node = node.get(*p)?.as_object()?;
    }
    Some(node)
}

fn descend_mut<'a>(
    mut node: &'a mut Map<String, Value>,
    path: &[&str],
) -> Option<&'a mut Map<String, Value>> {
    for p in path {
        node = node.get_mut(*p)?.as_object_mut()?;
    }
    Some(node)
}

/// Identity of a condition in the list: its `type` and its rank among the conditions of that
/// type.
type ConditionKey = (TypeKey, u64);

/// A condition's `type` as a key: a string by its text, any other value by its JSON text, so
/// `"1"` and `1` stay apart. Strings, the only type the API server lets through, are copied:
/// writing each as JSON is a measurable share of converting a small object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TypeKey {
    Missing,
    Text(String),
    Json(String),
}

fn type_key(condition_type: Option<&Value>) -> TypeKey {
    match condition_type {
        None => TypeKey::Missing,
        Some(Value::String(text)) => TypeKey::Text(text.clone()),
        Some(other) => TypeKey::Json(other.to_string()),
    }
}

fn convert_conditions(
    list: &mut [Value],
    from: Version,
    to: Version,
    incoming: &[Entry],
) -> Vec<Entry> {
    let mut entries: HashMap<ConditionKey, &Entry> = HashMap::new();
    for entry in incoming {
        entries
            .entry((type_key(entry.seen.get("type")), entry.nth))
            .or_insert(entry);
    }
    let mut seen_types: HashMap<TypeKey, u64> = HashMap::new();
    let mut own = Vec::new();
    // Items that are not objects are carried as they are and do not count.
    for condition in list.iter_mut().filter_map(Value::as_object_mut) {
        let key = type_key(condition.get("type"));
        let count = seen_types.entry(key.clone()).or_insert(0);
        let nth = *count;
        *count += 1;
        let applies = entries
            .get(&(key, nth))
            .copied()
            .filter(|entry| SEEN.iter().all(|f| entry.seen.get(*f) == condition.get(*f)));
        if let Some(entry) = convert_condition(condition, nth, from, to, applies) {
            own.push(entry);
        }
    }
    own
}

/// Converts one condition in place. `applies` is the incoming entry for it, when the condition
/// is still exactly as that entry's conversion rendered it. Returns the entry for going back.
fn convert_condition(
    condition: &mut Map<String, Value>,
    nth: u64,
    from: Version,
    to: Version,
    applies: Option<&Entry>,
) -> Option<Entry> {
    let mut restore = Map::new();
    if let Some(original) = condition.get("status").cloned() {
        let rendered = applies
            .and_then(|entry| entry.restore.get("status"))
            .cloned()
            .unwrap_or_else(|| map_status(&original, to));
        // Keep the original spelling when mapping back would not give it again.
        if map_status(&rendered, from) != original {
            restore.insert("status".into(), original);
        }
        condition.insert("status".into(), rendered);
    }
    for field in only_in(from).condition {
        if let Some(value) = condition.shift_remove(*field) {
            restore.insert((*field).to_owned(), value);
        }
    }
    if let Some(entry) = applies {
        for field in only_in(to).condition {
            if let Some(value) = entry.restore.get(*field)
                && !condition.contains_key(*field)
            {
                condition.insert((*field).to_owned(), value.clone());
            }
        }
    }
    if restore.is_empty() {
        return None;
    }
    let seen = SEEN
        .iter()
        .filter_map(|f| condition.get(*f).map(|v| ((*f).to_owned(), v.clone())))
        .collect();
    Some(Entry { seen, nth, restore })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conversion::tests::map;

    #[test]
    fn a_string_type_and_the_same_text_as_json_are_different_keys() {
        let keys = [
            type_key(Some(&json!("1"))),
            type_key(Some(&json!(1))),
            type_key(Some(&Value::Null)),
            type_key(None),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(
            type_key(Some(&json!("Ready"))),
            type_key(Some(&json!("Ready")))
        );
    }

    fn assert_canonical(cases: &[(&str, &str)]) {
        for (input, expected) in cases {
            assert_eq!(canonical_status(input), *expected, "{input:?}");
        }
    }

    #[test]
    fn canonical_status_ignores_case() {
        assert_canonical(&[
            ("True", "True"),
            ("true", "True"),
            ("TRUE", "True"),
            ("tRuE", "True"),
            ("False", "False"),
            ("false", "False"),
            ("Unknown", "Unknown"),
            ("unknown", "Unknown"),
        ]);
    }

    #[test]
    fn canonical_status_is_unknown_for_any_other_string() {
        assert_canonical(&[
            ("", "Unknown"),
            (" True", "Unknown"),
            ("yes", "Unknown"),
            ("garbage", "Unknown"),
        ]);
    }

    #[test]
    fn map_status_canonicalizes_strings_for_v1() {
        assert_eq!(map_status(&json!("true"), Version::V1), json!("True"));
    }

    #[test]
    fn map_status_copies_strings_down_to_v1alpha1() {
        assert_eq!(map_status(&json!("true"), Version::V1alpha1), json!("true"));
    }

    #[test]
    fn map_status_carries_non_strings_as_they_are() {
        assert_eq!(map_status(&json!(1), Version::V1), json!(1));
        assert_eq!(map_status(&json!(null), Version::V1), json!(null));
    }

    /// A spec with both of v1's own spec fields, one of them nested, and the fields taken out
    /// of it.
    fn spec_with_v1_only_fields_taken() -> (Map<String, Value>, Map<String, Value>) {
        let mut spec = map(json!({
            "storage": {"format": "PVC", "retention": "Delete"},
            "image": "quay.io/x:1",
            "replicas": 2
        }));
        let taken = take_fields(&mut spec, V1_ONLY.spec);
        (spec, taken)
    }

    #[test]
    fn take_moves_nested_fields_out_keeping_their_nesting() {
        let (spec, taken) = spec_with_v1_only_fields_taken();
        assert_eq!(
            Value::Object(taken),
            json!({"image": "quay.io/x:1", "storage": {"retention": "Delete"}})
        );
        assert_eq!(
            Value::Object(spec),
            json!({"storage": {"format": "PVC"}, "replicas": 2})
        );
    }

    #[test]
    fn restore_puts_taken_nested_fields_back() {
        let (mut spec, taken) = spec_with_v1_only_fields_taken();
        restore_fields(&mut spec, V1_ONLY.spec, &taken);
        assert_eq!(
            Value::Object(spec),
            json!({
                "storage": {"format": "PVC", "retention": "Delete"},
                "image": "quay.io/x:1",
                "replicas": 2
            })
        );
    }

    #[test]
    fn take_skips_parents_that_are_not_objects() {
        let mut spec = map(json!({"storage": "PVC", "image": null}));
        let taken = take_fields(&mut spec, V1_ONLY.spec);
        assert_eq!(Value::Object(taken), json!({"image": null}));
        assert_eq!(Value::Object(spec), json!({"storage": "PVC"}));
    }

    /// A value written through the other version wins; a parent removed through it stays
    /// removed.
    #[test]
    fn restore_never_undoes_an_edit_made_through_the_other_version() {
        let kept = map(json!({"image": "a", "storage": {"retention": "Delete"}}));
        let mut spec = map(json!({"image": "b"}));
        restore_fields(&mut spec, V1_ONLY.spec, &kept);
        assert_eq!(Value::Object(spec), json!({"image": "b"}));
    }

    #[test]
    fn conditions_are_matched_by_rank_within_their_type() {
        let entry = |t: &str, nth: u64, generation: i64| Entry {
            seen: map(json!({"type": t, "status": "True"})),
            nth,
            restore: map(json!({"observedGeneration": generation})),
        };
        let incoming = vec![
            entry("Ready", 0, 1),
            entry("Ready", 1, 2),
            entry("PVCAvailable", 0, 3),
        ];
        let mut list = vec![
            json!({"type": "PVCAvailable", "status": "True"}),
            json!("not a condition"),
            json!({"type": "Ready", "status": "True"}),
            json!({"type": "Ready", "status": "True"}),
        ];
        let own = convert_conditions(&mut list, Version::V1alpha1, Version::V1, &incoming);
        assert!(own.is_empty());
        assert_eq!(
            list,
            vec![
                json!({"type": "PVCAvailable", "status": "True", "observedGeneration": 3}),
                json!("not a condition"),
                json!({"type": "Ready", "status": "True", "observedGeneration": 1}),
                json!({"type": "Ready", "status": "True", "observedGeneration": 2}),
            ]
        );
    }

    #[test]
    fn a_rewritten_condition_drops_its_entry() {
        let incoming = vec![Entry {
            seen: map(json!({"type": "Ready", "status": "garbage", "lastTransitionTime": "t1"})),
            nth: 0,
            restore: map(json!({"status": "garbage", "observedGeneration": 4})),
        }];
        // Status changed through v1alpha1.
        let mut list =
            vec![json!({"type": "Ready", "status": "false", "lastTransitionTime": "t1"})];
        let own = convert_conditions(&mut list, Version::V1alpha1, Version::V1, &incoming);
        assert_eq!(
            list,
            vec![json!({"type": "Ready", "status": "False", "lastTransitionTime": "t1"})]
        );
        assert_eq!(own.len(), 1);
        assert_eq!(
            Value::Object(own[0].restore.clone()),
            json!({"status": "false"})
        );
        // Same status, new transition time: rewritten too.
        let mut list =
            vec![json!({"type": "Ready", "status": "garbage", "lastTransitionTime": "t2"})];
        convert_conditions(&mut list, Version::V1alpha1, Version::V1, &incoming);
        assert_eq!(
            list,
            vec![json!({"type": "Ready", "status": "Unknown", "lastTransitionTime": "t2"})]
        );
    }

    #[test]
    fn down_keeps_what_v1alpha1_cannot_give_back() {
        let mut list = vec![
            json!({"type": "Ready", "status": "True", "observedGeneration": 2, "reason": ""}),
            json!({"type": "Degraded", "status": "maybe"}),
            json!({"type": "Available", "status": "False"}),
            json!({"type": "NoStatus"}),
        ];
        let own = convert_conditions(&mut list, Version::V1, Version::V1alpha1, &[]);
        assert_eq!(
            list,
            vec![
                json!({"type": "Ready", "status": "True", "reason": ""}),
                json!({"type": "Degraded", "status": "maybe"}),
                json!({"type": "Available", "status": "False"}),
                json!({"type": "NoStatus"}),
            ]
        );
        let restores: Vec<Value> = own
            .iter()
            .map(|e| Value::Object(e.restore.clone()))
            .collect();
        assert_eq!(
            restores,
            vec![json!({"observedGeneration": 2}), json!({"status": "maybe"})]
        );
    }

    #[test]
    fn the_projection_gives_the_data_the_whole_object_gives() {
        let objects = [
            json!({}),
            json!({"spec": "odd", "status": 3}),
            json!({"spec": {"image": "i", "storage": "odd", "replicas": 2}}),
            json!({
                "spec": {"image": "i", "storage": {"format": "PVC", "retention": "Delete"}},
                "status": {
                    "observedGeneration": 4, "image": "i", "phase": "Ready",
                    "conditions": [
                        {"type": "Ready", "status": "true", "message": "m", "observedGeneration": 4},
                        7,
                        {"type": "Ready", "status": "garbage", "lastTransitionTime": "t"},
                        {"status": "False", "reason": "r"}
                    ]
                }
            }),
            json!({"status": {"conditions": "odd"}}),
        ];
        let incoming = {
            let mut data = Preserved::new(Version::V1);
            data.spec = map(json!({"storage": {"retention": "Retain"}}));
            data.conditions = vec![Entry {
                seen: map(json!({"type": "Ready", "status": "True"})),
                nth: 0,
                restore: map(json!({"status": "true", "observedGeneration": 1})),
            }];
            data
        };
        for object in objects {
            for (from, to) in [
                (Version::V1, Version::V1alpha1),
                (Version::V1alpha1, Version::V1),
            ] {
                let incoming = Preserved {
                    restores: to,
                    ..incoming.clone()
                };
                let whole = convert(&mut map(object.clone()), from, to, &incoming);
                let projected = convert(&mut projection(&map(object.clone())), from, to, &incoming);
                assert_eq!(whole, projected, "{object} {from:?} -> {to:?}");
            }
        }
    }
}
