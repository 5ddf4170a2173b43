//! The YAML we write: block style, keys in their order, sequences at their key's column (as
//! kubectl prints them), every scalar through [`super::scalar`]. Written here rather than by a
//! serializer so that quoting is ours and checked against kubectl.

use serde_json::{Map, Value};

use super::scalar;

/// Longest rendered key written as `key: value`. YAML limits implicit keys to 1,024 characters
/// and go-yaml and serde-saphyr refuse longer ones; longer keys (annotations can have them, and
/// `managedFields` does) are written as explicit `? key` entries. Half the limit leaves room.
const IMPLICIT_KEY_MAX: usize = 512;

/// One document as YAML, ending in a newline.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0),
        other => {
            out.push_str(&scalar_node(other));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// Null, booleans, numbers, strings and empty collections, on one line.
fn scalar_node(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar::string(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn is_long(key: &str) -> bool {
    key.chars().count() > IMPLICIT_KEY_MAX
}

/// A non-empty mapping whose first entry starts where the output is now, at column `indent`.
fn mapping(out: &mut String, map: &Map<String, Value>, indent: usize) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            pad(out, indent);
        }
        let key = scalar::string(key);
        if is_long(&key) {
            out.push_str("? ");
            out.push_str(&key);
            out.push('\n');
            pad(out, indent);
            out.push(':');
            value_after_indicator(out, value, indent, indent + 2);
        } else {
            out.push_str(&key);
            out.push(':');
            value_after_indicator(out, value, indent, indent);
        }
    }
}

/// The value of a mapping entry, after its `:`.
fn value_after_indicator(out: &mut String, value: &Value, indent: usize, sequence_indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            pad(out, indent + 2);
            mapping(out, map, indent + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            pad(out, sequence_indent);
            sequence(out, items, sequence_indent);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar_node(other));
            out.push('\n');
        }
    }
}

/// A non-empty sequence whose first `-` is where the output is now, at column `indent`.
fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            pad(out, indent);
        }
        out.push('-');
        match item {
            Value::Object(map) if !map.is_empty() => {
                // `- ? key` is valid YAML but rare enough that readers disagree on it.
                let compact = map
                    .keys()
                    .next()
                    .is_some_and(|k| !is_long(&scalar::string(k)));
                if compact {
                    out.push(' ');
                } else {
                    out.push('\n');
                    pad(out, indent + 2);
                }
                mapping(out, map, indent + 2);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push(' ');
                sequence(out, inner, indent + 2);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar_node(other));
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn layout_follows_kubectl() {
        let value = json!({
            "a": {"b": 1, "c": [1, {"d": "x", "e": [true, null]}, [2, 3]]},
            "f": {}, "g": [], "h": "yes"
        });
        assert_eq!(
            to_yaml(&value),
            "a:\n  b: 1\n  c:\n  - 1\n  - d: x\n    e:\n    - true\n    - null\n  - - 2\n    - 3\nf: {}\ng: []\nh: \"yes\"\n"
        );
    }

    #[test]
    fn long_keys_are_explicit() {
        let key = "k".repeat(IMPLICIT_KEY_MAX + 1);
        let value = json!({ key.clone(): {"a": 1}, "b": [{ key.clone(): [1] }] });
        assert_eq!(
            to_yaml(&value),
            format!("? {key}\n:\n  a: 1\nb:\n-\n  ? {key}\n  :\n    - 1\n")
        );
        let short = "k".repeat(IMPLICIT_KEY_MAX);
        assert_eq!(
            to_yaml(&json!({ short.clone(): 1 })),
            format!("{short}: 1\n")
        );
    }

    #[test]
    fn keys_are_quoted_like_values() {
        assert_eq!(
            to_yaml(&json!({"on": 1, "": 2, "a: b": 3})),
            "\"on\": 1\n\"\": 2\n\"a: b\": 3\n"
        );
    }

    #[test]
    fn scalar_documents() {
        assert_eq!(to_yaml(&json!("---")), "\"---\"\n");
        assert_eq!(to_yaml(&json!({})), "{}\n");
        assert_eq!(to_yaml(&json!(1.5)), "1.5\n");
    }
}
