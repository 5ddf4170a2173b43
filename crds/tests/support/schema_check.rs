//! A small checker for the structural-schema subset our CRD uses (types, required, enum,
//! maxLength, minimum, unknown fields). The real API server checks the same in the
//! control-plane tests; this one runs in milliseconds and says exactly which field failed.

use serde_json::Value;

/// Returns one message per violation, each naming the field path.
pub fn check(value: &Value, schema: &Value, path: &str, errors: &mut Vec<String>) {
    let ty = schema.get("type").and_then(Value::as_str);
    let type_ok = match ty {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !type_ok {
        errors.push(format!("{path}: expected {ty:?}, got {value}"));
        return;
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{path}: {value} not in {options:?}"));
    }
    let max_length = schema.get("maxLength").and_then(Value::as_u64);
    if let (Some(max), Some(s)) = (max_length, value.as_str())
        && s.chars().count() as u64 > max
    {
        errors.push(format!("{path}: longer than {max}"));
    }
    let minimum = schema.get("minimum").and_then(Value::as_f64);
    if let (Some(min), Some(n)) = (minimum, value.as_f64())
        && n < min
    {
        errors.push(format!("{path}: below minimum {min}"));
    }
    if let Some(obj) = value.as_object() {
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(req) = req.as_str()
                && !obj.contains_key(req)
            {
                errors.push(format!("{path}.{req}: required"));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (key, child) in obj {
            let child_path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match props.and_then(|p| p.get(key)) {
                Some(child_schema) => check(child, child_schema, &child_path, errors),
                None => errors.push(format!("{child_path}: unknown field (would be pruned)")),
            }
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for (i, item) in list.iter().enumerate() {
            check(item, items, &format!("{path}[{i}]"), errors);
        }
    }
}
