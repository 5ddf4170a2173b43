//! The value of the converter's annotation ([`CONVERSION_PRESERVED_ANNOTATION`]): what one
//! version of an object cannot express, kept so that the other version can be restored exactly.
//! The format is described in the parent module.
//!
//! Reading is strict about the keys it knows (a wrong type makes the whole value unreadable, and
//! an unreadable value is carried, never half-applied) and ignores keys it does not know, so an
//! older operator can read what a newer one wrote.
//!
//! [`CONVERSION_PRESERVED_ANNOTATION`]: crate::contract::CONVERSION_PRESERVED_ANNOTATION

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::Version;

/// Upper bound of the annotation value, in bytes. The API server allows 256 KiB for all the
/// annotations of an object together; the converter takes at most an eighth of that, so that
/// a conversion can never make an object unwritable.
pub(crate) const MAX_BYTES: usize = 32 * 1024;

/// Which container the converter had to create to write its annotation, so that the conversion
/// back removes it again (when nothing else was put in it meanwhile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Created {
    /// `metadata.annotations` did not exist.
    Annotations,
    /// `metadata` did not exist.
    Metadata,
}

impl Created {
    fn name(self) -> &'static str {
        match self {
            Created::Annotations => "annotations",
            Created::Metadata => "metadata",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "annotations" => Some(Created::Annotations),
            "metadata" => Some(Created::Metadata),
            _ => None,
        }
    }
}

/// What to restore in one condition, and the condition as this conversion rendered it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Entry {
    /// `type`, `status` and `lastTransitionTime` of the rendered condition (only those present).
    /// The entry applies only while the condition still has exactly these: a condition that was
    /// rewritten through the other version keeps what was written there.
    pub seen: Map<String, Value>,
    /// Among the conditions with the same `type`, which one (0 for the first): a list written
    /// through v1alpha1 may hold a type twice.
    pub nth: u64,
    /// Fields to put back: `status` as the restored version spelled it, and the fields only that
    /// version has.
    pub restore: Map<String, Value>,
}

/// The converter annotation the input object had, kept verbatim when the conversion back would
/// not write the same value again (it was stale, hand-edited, or belongs to an older format).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Carried {
    /// The annotation's value; `None` when the object had no annotation.
    pub annotation: Option<Value>,
    /// What the conversion back writes by itself when nothing changed in between; the carried
    /// value replaces exactly that and nothing else.
    pub regenerated: Option<String>,
}

/// The decoded annotation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Preserved {
    /// The version this data restores (the version the object was converted from).
    pub restores: Version,
    /// Fields of `spec` only that version has, nested as in `spec`.
    pub spec: Map<String, Value>,
    /// Fields of `status` only that version has, nested as in `status`.
    pub status: Map<String, Value>,
    /// Per-condition data, in the order of `status.conditions`.
    pub conditions: Vec<Entry>,
    pub carried: Option<Carried>,
    pub created: Option<Created>,
    /// Parts were dropped to stay within [`MAX_BYTES`].
    pub truncated: bool,
}

impl Preserved {
    /// No data, for restoring `restores`.
    pub(crate) fn new(restores: Version) -> Self {
        Preserved {
            restores,
            spec: Map::new(),
            status: Map::new(),
            conditions: Vec::new(),
            carried: None,
            created: None,
            truncated: false,
        }
    }

    /// Nothing to restore and nothing carried: no annotation is needed.
    pub(crate) fn is_empty(&self) -> bool {
        self.spec.is_empty()
            && self.status.is_empty()
            && self.conditions.is_empty()
            && self.carried.is_none()
    }

    /// Reads an annotation value meant to restore `restores`. `None` when it is not a string of
    /// JSON in this format, or restores the other version.
    pub(crate) fn parse(annotation: &Value, restores: Version) -> Option<Self> {
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(annotation.as_str()?) else {
            return None;
        };
        if map.get("restores")?.as_str()? != restores.name() {
            return None;
        }
        let conditions = match map.get("conditions") {
            None => Vec::new(),
            Some(list) => list
                .as_array()?
                .iter()
                .map(parse_entry)
                .collect::<Option<Vec<_>>>()?,
        };
        let carried = match map.get("carried") {
            None => None,
            Some(carried) => Some(parse_carried(carried.as_object()?)?),
        };
        let created = match map.get("created") {
            None => None,
            Some(created) => Some(Created::parse(created.as_str()?)?),
        };
        let truncated = match map.get("truncated") {
            None => false,
            Some(truncated) => truncated.as_bool()?,
        };
        Some(Preserved {
            restores,
            spec: object_or_empty(&map, "spec")?,
            status: object_or_empty(&map, "status")?,
            conditions,
            carried,
            created,
            truncated,
        })
    }

    /// The annotation value: compact JSON, keys in a fixed order, at most [`MAX_BYTES`].
    ///
    /// Over the bound, whole parts are dropped until it fits: first any part larger than the
    /// bound on its own, then, least useful first, the carried annotation, condition entries,
    /// `status` fields and `spec` fields; within each, the largest first (the later one among
    /// equals). `truncated: true` says so. What was dropped
    /// is lost on the way back: the restored object lacks those fields (a v1 object then falls
    /// back to the defaults, which it would have without them).
    /// [`Self::render`] with `created`, when the value fits the bound as it is (the usual
    /// case): no copy of the data is needed then.
    pub(crate) fn render_fitting(&self, created: Option<Created>) -> Option<String> {
        let text = self.text_with(created);
        (text.len() <= MAX_BYTES).then_some(text)
    }

    pub(crate) fn render(mut self) -> String {
        let mut text = self.text_with(self.created);
        let shrinks: [fn(&mut Self, usize); 5] = [
            |p, _| p.drop_parts_over_the_bound(),
            |p, _| p.carried = None,
            |p, excess| {
                let entries = std::mem::take(&mut p.conditions);
                p.conditions = drop_largest(entries, entry_len, excess);
            },
            |p, excess| p.status = drop_largest_fields(std::mem::take(&mut p.status), excess),
            |p, excess| p.spec = drop_largest_fields(std::mem::take(&mut p.spec), excess),
        ];
        for shrink in shrinks {
            if text.len() <= MAX_BYTES {
                break;
            }
            if !self.truncated {
                self.truncated = true;
                text = self.text_with(self.created);
            }
            shrink(&mut self, text.len().saturating_sub(MAX_BYTES));
            text = self.text_with(self.created);
        }
        text
    }

    /// A part larger than the bound on its own can never be kept: dropping it first spares the
    /// smaller, more useful parts that would otherwise go before it.
    fn drop_parts_over_the_bound(&mut self) {
        let fits = |size: usize| size <= MAX_BYTES;
        if self
            .carried
            .as_ref()
            .is_some_and(|c| !fits(carried_value(c).to_string().len()))
        {
            self.carried = None;
        }
        self.conditions.retain(|e| fits(entry_len(e)));
        for fields in [&mut self.spec, &mut self.status] {
            fields.retain(|key, value| fits(key.len() + value.to_string().len()));
        }
    }

    /// The text with `created` in place of the data's own, written from the data as it is
    /// (no tree is built for it).
    fn text_with(&self, created: Option<Created>) -> String {
        let rendered = Rendered {
            data: self,
            created,
        };
        // Writing JSON into a String fails only for keys that are not strings, and every key
        // here is one.
        serde_json::to_string(&rendered).unwrap_or_default()
    }
}

/// The annotation's JSON: the data in the documented key order, empty parts left out.
struct Rendered<'p> {
    data: &'p Preserved,
    created: Option<Created>,
}

impl Serialize for Rendered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let data = self.data;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("restores", data.restores.name())?;
        if !data.spec.is_empty() {
            map.serialize_entry("spec", &data.spec)?;
        }
        if !data.status.is_empty() {
            map.serialize_entry("status", &data.status)?;
        }
        if !data.conditions.is_empty() {
            map.serialize_entry("conditions", &Entries(&data.conditions))?;
        }
        if let Some(carried) = &data.carried {
            map.serialize_entry("carried", &carried_value(carried))?;
        }
        if let Some(created) = self.created {
            map.serialize_entry("created", created.name())?;
        }
        if data.truncated {
            map.serialize_entry("truncated", &true)?;
        }
        map.end()
    }
}

struct Entries<'p>(&'p [Entry]);

impl Serialize for Entries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(EntryView))
    }
}

/// One condition entry: `seen`, `nth` when not 0, `restore`.
struct EntryView<'p>(&'p Entry);

impl Serialize for EntryView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entry = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("seen", &entry.seen)?;
        if entry.nth > 0 {
            map.serialize_entry("nth", &entry.nth)?;
        }
        map.serialize_entry("restore", &entry.restore)?;
        map.end()
    }
}

fn object_or_empty(map: &Map<String, Value>, key: &str) -> Option<Map<String, Value>> {
    match map.get(key) {
        None => Some(Map::new()),
        Some(value) => value.as_object().cloned(),
    }
}

/// The length of an entry's JSON.
fn entry_len(entry: &Entry) -> usize {
    serde_json::to_string(&EntryView(entry)).map_or(0, |text| text.len())
}

fn parse_entry(value: &Value) -> Option<Entry> {
    let map = value.as_object()?;
    let nth = match map.get("nth") {
        None => 0,
        Some(nth) => nth.as_u64()?,
    };
    Some(Entry {
        seen: map.get("seen")?.as_object()?.clone(),
        nth,
        restore: object_or_empty(map, "restore")?,
    })
}

/// A carried annotation that is itself JSON as this converter prints it (the usual case) is
/// kept as JSON (`json`), not as a string (`value`): carried annotations can nest, and quoting
/// would double the backslashes at each level.
fn carried_value(carried: &Carried) -> Value {
    let mut map = Map::new();
    match &carried.annotation {
        None => {}
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(json @ Value::Object(_)) if prints_as(&json, text) => {
                map.insert("json".into(), json);
            }
            _ => {
                map.insert("value".into(), Value::String(text.clone()));
            }
        },
        Some(other) => {
            map.insert("value".into(), other.clone());
        }
    }
    if let Some(regenerated) = &carried.regenerated {
        map.insert("regenerated".into(), Value::String(regenerated.clone()));
    }
    Value::Object(map)
}

/// `json` printed compactly is exactly `text`, so storing the JSON loses nothing.
fn prints_as(json: &Value, text: &str) -> bool {
    let printed = json.to_string();
    printed == text
}

fn parse_carried(map: &Map<String, Value>) -> Option<Carried> {
    let annotation = match (map.get("json"), map.get("value")) {
        (Some(json), _) if json.is_object() => Some(Value::String(json.to_string())),
        (Some(_), _) => return None,
        (None, value) => value.cloned(),
    };
    let regenerated = match map.get("regenerated") {
        None => None,
        Some(text) => Some(text.as_str()?.to_owned()),
    };
    Some(Carried {
        annotation,
        regenerated,
    })
}

/// Removes the largest items (the later one first among equal sizes) until the removed sizes add
/// up to at least `excess`; the rest keep their order. Sizes are those of the items' own JSON, a
/// part of the whole text, so removing them shrinks the text by at least as much.
fn drop_largest<T>(items: Vec<T>, size: impl Fn(&T) -> usize, excess: usize) -> Vec<T> {
    let mut by_size: Vec<(usize, usize)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (size(item), i))
        .collect();
    by_size.sort_unstable_by(|a, b| b.cmp(a));
    let mut dropped = vec![false; items.len()];
    let mut freed = 0;
    for (item_size, i) in by_size {
        if freed >= excess {
            break;
        }
        if let Some(flag) = dropped.get_mut(i) {
            *flag = true;
        }
        freed += item_size;
    }
    items
        .into_iter()
        .zip(dropped)
        .filter_map(|(item, dropped)| (!dropped).then_some(item))
        .collect()
}

fn drop_largest_fields(fields: Map<String, Value>, excess: usize) -> Map<String, Value> {
    drop_largest(
        fields.into_iter().collect(),
        |(key, value)| key.len() + value.to_string().len(),
        excess,
    )
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sample() -> Preserved {
        let mut seen = Map::new();
        seen.insert("type".into(), json!("Ready"));
        seen.insert("status".into(), json!("True"));
        let mut restore = Map::new();
        restore.insert("observedGeneration".into(), json!(3));
        let mut p = Preserved::new(Version::V1);
        p.spec
            .insert("image".into(), json!("quay.io/trustyai/service:1"));
        p.status.insert("observedGeneration".into(), json!(3));
        p.conditions.push(Entry {
            seen,
            nth: 1,
            restore,
        });
        p.created = Some(Created::Annotations);
        p
    }

    #[test]
    fn renders_compact_json_in_a_fixed_order() {
        assert_eq!(
            sample().render(),
            r#"{"restores":"v1","spec":{"image":"quay.io/trustyai/service:1"},"status":{"observedGeneration":3},"conditions":[{"seen":{"type":"Ready","status":"True"},"nth":1,"restore":{"observedGeneration":3}}],"created":"annotations"}"#
        );
    }

    #[test]
    fn parses_what_it_renders() {
        let p = sample();
        let text = Value::String(p.clone().render());
        assert_eq!(Preserved::parse(&text, Version::V1), Some(p));
    }

    #[test]
    fn parse_refuses_data_for_the_other_version() {
        let text = Value::String(sample().render());
        assert_eq!(Preserved::parse(&text, Version::V1alpha1), None);
    }

    #[test]
    fn parse_refuses_malformed_values() {
        for bad in [
            json!(7),
            json!("not json"),
            json!("[1]"),
            json!(r#"{"spec":{}}"#),
            json!(r#"{"restores":"v1","spec":"x"}"#),
            json!(r#"{"restores":"v1","conditions":[{"restore":{}}]}"#),
            json!(r#"{"restores":"v1","conditions":[{"seen":{},"nth":-1}]}"#),
            json!(r#"{"restores":"v1","created":"spec"}"#),
            json!(r#"{"restores":"v1","carried":{"json":"x"}}"#),
            json!(r#"{"restores":"v1","truncated":"yes"}"#),
        ] {
            assert_eq!(Preserved::parse(&bad, Version::V1), None, "{bad}");
        }
    }

    #[test]
    fn parse_ignores_unknown_keys() {
        let text = json!(r#"{"restores":"v1","future":1,"spec":{"image":"x"}}"#);
        let p = Preserved::parse(&text, Version::V1).expect("readable");
        assert_eq!(p.spec.get("image"), Some(&json!("x")));
    }

    #[test]
    fn carried_annotations_of_every_kind_read_back_unchanged() {
        for annotation in [
            Some(json!(r#"{"restores":"v1alpha1"}"#)),
            Some(json!(r#"{ "spaced": 1 }"#)),
            Some(json!("plain text")),
            Some(json!(null)),
            Some(json!(5)),
            None,
        ] {
            let mut p = Preserved::new(Version::V1);
            p.carried = Some(Carried {
                annotation: annotation.clone(),
                regenerated: Some("r".into()),
            });
            let text = p.clone().render();
            let back = Preserved::parse(&Value::String(text.clone()), Version::V1);
            assert_eq!(back, Some(p), "{text}");
        }
    }

    #[test]
    fn a_carried_annotation_in_compact_json_is_embedded_as_json() {
        let mut p = Preserved::new(Version::V1);
        p.carried = Some(Carried {
            annotation: Some(json!(r#"{"restores":"v1alpha1"}"#)),
            regenerated: None,
        });
        assert_eq!(
            p.render(),
            r#"{"restores":"v1","carried":{"json":{"restores":"v1alpha1"}}}"#
        );
    }

    #[test]
    fn render_drops_least_useful_parts_first_to_fit() {
        let mut p = sample();
        p.carried = Some(Carried {
            annotation: Some(Value::String("x".repeat(MAX_BYTES))),
            regenerated: None,
        });
        let text = p.clone().render();
        assert!(text.len() <= MAX_BYTES);
        let back = Preserved::parse(&Value::String(text), Version::V1).expect("readable");
        assert!(back.truncated);
        assert_eq!(back.carried, None);
        assert_eq!(back.spec, p.spec);
        assert_eq!(back.conditions, p.conditions);

        // Many conditions: the largest entries go, the spec stays.
        let mut p = sample();
        for i in 0..2000 {
            let mut seen = Map::new();
            seen.insert("type".into(), json!(format!("T{i}")));
            p.conditions.push(Entry {
                seen,
                nth: 0,
                restore: Map::new(),
            });
        }
        let text = p.clone().render();
        assert!(text.len() <= MAX_BYTES, "{}", text.len());
        let back = Preserved::parse(&Value::String(text), Version::V1).expect("readable");
        assert!(back.truncated);
        assert_eq!(back.spec, p.spec);
        assert_eq!(back.status, p.status);
        assert!(back.conditions.len() < p.conditions.len());
        // Deterministic.
        assert_eq!(p.clone().render(), p.render());

        // A spec field alone over the bound is dropped too.
        let mut p = Preserved::new(Version::V1);
        p.spec.insert("image".into(), json!("i".repeat(MAX_BYTES)));
        p.spec
            .insert("storage".into(), json!({"retention": "Delete"}));
        let back = Preserved::parse(&Value::String(p.render()), Version::V1).expect("readable");
        assert!(back.truncated);
        assert_eq!(back.spec.get("image"), None);
        assert_eq!(
            back.spec.get("storage"),
            Some(&json!({"retention": "Delete"}))
        );
    }

    #[test]
    fn drop_largest_removes_the_largest_items_keeping_the_order_of_the_rest() {
        let kept = drop_largest(vec![3, 5, 1, 5, 2], |n| *n, 6);
        assert_eq!(kept, vec![3, 1, 2]);
    }

    #[test]
    fn drop_largest_removes_only_as_much_as_the_excess_needs() {
        let kept = drop_largest(vec![4, 4, 4], |n| *n, 1);
        assert_eq!(kept, vec![4, 4]);
        let kept = drop_largest(vec![4, 4, 4], |n| *n, 0);
        assert_eq!(kept, vec![4, 4, 4]);
    }
}
