//! Reading and writing manifest files for the offline commands (`validate`, `convert`): YAML or
//! JSON, one or several documents, key order kept.

use serde::Deserialize;
use serde_json::Value;

/// Errors reading manifests.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("document {index}: not valid YAML or JSON: {source}")]
    Parse {
        /// 1-based position of the document in the input.
        index: usize,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("cannot render the documents as YAML: {0}")]
    Render(#[from] serde_yaml::Error),
    #[error("cannot render the documents as JSON: {0}")]
    RenderJson(#[from] serde_json::Error),
}

/// Input text format, guessed from the first non-blank character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Yaml,
    Json,
}

impl TextFormat {
    /// JSON when the text starts with `{` or `[`, YAML otherwise.
    pub fn detect(text: &str) -> Self {
        match text.trim_start().chars().next() {
            Some('{') | Some('[') => TextFormat::Json,
            _ => TextFormat::Yaml,
        }
    }
}

/// Parses every document in `text` (YAML streams separated by `---`, or JSON, which is YAML).
/// Empty documents are skipped; a JSON `List` (`kind: List` with `items`) is not expanded.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, ManifestError> {
    let mut docs = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(de).map_err(|source| ManifestError::Parse {
            index: i + 1,
            source,
        })?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// Renders documents in the given format: a YAML stream separated by `---`, or JSON (one
/// document as an object, several as a `v1` `List`).
pub fn render_documents(docs: &[Value], format: TextFormat) -> Result<String, ManifestError> {
    match format {
        TextFormat::Yaml => {
            let mut out = String::new();
            for (i, doc) in docs.iter().enumerate() {
                if i > 0 {
                    out.push_str("---\n");
                }
                out.push_str(&serde_yaml::to_string(doc)?);
            }
            Ok(out)
        }
        TextFormat::Json => {
            let value = match docs {
                [one] => one.clone(),
                many => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many}),
            };
            Ok(format!("{}\n", serde_json::to_string_pretty(&value)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_yaml_documents_keep_key_order() {
        let text = "b: 1\na: 2\n---\n---\nz: [1]\n";
        let docs = parse_documents(text).expect("parses");
        assert_eq!(docs.len(), 2);
        let keys: Vec<_> = docs[0]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(
            render_documents(&docs, TextFormat::Yaml).expect("renders"),
            "b: 1\na: 2\n---\nz:\n- 1\n"
        );
    }

    #[test]
    fn json_is_detected_and_parsed() {
        let text = " {\"kind\": \"X\"}";
        assert_eq!(TextFormat::detect(text), TextFormat::Json);
        assert_eq!(
            parse_documents(text).expect("parses"),
            vec![serde_json::json!({"kind": "X"})]
        );
    }

    #[test]
    fn a_parse_error_names_the_document() {
        let err = parse_documents("a: 1\n---\nb: [\n").expect_err("second document is broken");
        assert!(err.to_string().starts_with("document 2:"), "{err}");
    }
}
