//! Reading and writing manifest files for the offline commands (`validate`, `convert`): YAML or
//! JSON, one or several documents, key order kept. The YAML written must mean the same to
//! kubectl as the values it came from, so JSON is read as JSON, YAML as kubectl reads it
//! (`read`), and the YAML emitter and its quoting are our own (`emit`, `scalar`).

mod emit;
mod read;
mod scalar;

use serde_json::Value;

pub use emit::to_yaml;

/// Errors reading manifests.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("document {index}: not valid YAML or JSON")]
    Yaml {
        /// 1-based position of the document in the input.
        index: usize,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("document {index}: not valid JSON")]
    Json {
        /// 1-based position of the document in the input.
        index: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot render the documents as JSON")]
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

/// Parses every document in `text`: JSON (one value, or several one after another) when it
/// starts like JSON, YAML streams separated by `---` otherwise. Text that starts like JSON but
/// is not (a YAML flow mapping such as `{kind: X}`, JSON followed by `---`) is read as YAML, as
/// it always was; when that fails too, the JSON error is reported. Empty and `null` documents
/// are skipped; a `List` (`kind: List` with `items`) is not expanded.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, ManifestError> {
    match TextFormat::detect(text) {
        TextFormat::Json => {
            read::json_stream(text).or_else(|json| read::yaml_stream(text).map_err(|_| json))
        }
        TextFormat::Yaml => read::yaml_stream(text),
    }
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
                out.push_str(&to_yaml(doc));
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

    /// A JSON object after leading whitespace.
    const JSON_TEXT: &str = " {\"kind\": \"X\"}";

    #[test]
    fn text_starting_with_a_brace_is_detected_as_json() {
        assert_eq!(TextFormat::detect(JSON_TEXT), TextFormat::Json);
    }

    #[test]
    fn json_text_parses_to_its_document() {
        assert_eq!(
            parse_documents(JSON_TEXT).expect("parses"),
            vec![serde_json::json!({"kind": "X"})]
        );
    }

    #[test]
    fn json_that_is_not_json_is_read_as_yaml_as_before() {
        let docs = parse_documents("{kind: X, n: yes}\n---\na: 1\n").expect("YAML flow");
        assert_eq!(
            docs,
            [
                serde_json::json!({"kind": "X", "n": true}),
                serde_json::json!({"a": 1})
            ]
        );
        let err = parse_documents("{\"a\": 1} {\"b\": [}").expect_err("neither");
        assert!(
            err.to_string().starts_with("document 2: not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn json_strings_are_read_as_json() {
        let key = "k".repeat(1500);
        let text = format!("{{\"{key}\": \"a\\u0085b \\u2028c\u{2029}\"}}");
        assert_eq!(
            parse_documents(&text).expect("JSON"),
            [serde_json::json!({ key: "a\u{85}b \u{2028}c\u{2029}" })]
        );
    }

    #[test]
    fn a_parse_error_names_the_document() {
        let err = parse_documents("a: 1\n---\nb: [\n").expect_err("second document is broken");
        assert!(err.to_string().starts_with("document 2:"), "{err}");
    }
}
