//! Reading manifests: JSON with a JSON parser, YAML the way kubectl reads it.
//!
//! kubectl (and Helm, Argo CD, Flux) read YAML through go-yaml v2, which resolves plain scalars
//! by YAML 1.1 rules: `yes`, `on`, `y` are booleans, `017` is octal, `1_000` and `0o17` are
//! integers; dates and `1:20` stay strings, `.inf` cannot become JSON. The options below make
//! serde-saphyr read the same values, so `convert` works on what the API server would be sent,
//! and `validate` judges it.

use serde_json::Value;
use serde_saphyr::granit_parser::{Event, Parser};
use serde_saphyr::{Budget, DuplicateKeyPolicy, Options};

use super::ManifestError;

/// A stream of JSON texts (one object, or several one after the other, as `kubectl get -o json`
/// prints for each object when given several files). `null` documents are skipped.
pub(super) fn json_stream(text: &str) -> Result<Vec<Value>, ManifestError> {
    let mut documents = Vec::new();
    let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    for (i, value) in stream.enumerate() {
        let value = value.map_err(|source| ManifestError::Json {
            index: i + 1,
            source,
        })?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// A YAML stream separated by `---`. Empty and `null` documents are skipped.
pub(super) fn yaml_stream(text: &str) -> Result<Vec<Value>, ManifestError> {
    serde_saphyr::from_multiple_with_options::<Value>(text, kubectl_options()).map_err(|source| {
        ManifestError::Yaml {
            index: document_of(text, &source),
            source: Box::new(source),
        }
    })
}

fn kubectl_options() -> Options {
    let mut options = Options::default();
    // go-yaml v2 reads `017` as 15; YAML 1.1 booleans (`yes`, `off`) are the default already.
    options.legacy_octal_numbers = true;
    // The last of two equal keys wins, as in go-yaml v2 and as these commands always did;
    // refusing them now would break manifests that were accepted.
    options.duplicate_keys = DuplicateKeyPolicy::LastWins;
    // One-line messages: the document number and position are in our own message.
    options.with_snippet = false;
    // The defaults guard services against hostile input; these are the user's own files, and a
    // `kubectl get -o yaml` of a large namespace has more than 1,024 documents or 250,000 nodes.
    let mut budget = Budget::default();
    budget.max_documents = 1_000_000;
    budget.max_nodes = 100_000_000;
    budget.max_events = 400_000_000;
    budget.max_depth = 128; // serde_json's own limit, so JSON and YAML nest alike
    options.budget = Some(budget);
    options
}

/// The 1-based number of the document `error` is in: the document starts up to the error's
/// line, or up to the syntax error that stopped the parser.
fn document_of(text: &str, error: &serde_saphyr::Error) -> usize {
    let line = error.location().map(|location| location.line());
    let mut starts = 0;
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else { break };
        if let Event::DocumentStart(..) = event {
            if line.is_some_and(|line| span.start.line() as u64 > line) {
                break;
            }
            starts += 1;
        }
    }
    starts.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(text: &str) -> Value {
        match yaml_stream(text) {
            Ok(mut docs) if docs.len() == 1 => docs.remove(0),
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn plain_scalars_resolve_as_kubectl_resolves_them() {
        // What `kubectl patch --local -o json` prints for the same input.
        let doc = yaml(
            "a: 0o17\nb: 1e3\nc: 017\nd: 1_000\ne: 2025-01-01\nf: 1:20\ng: NaN\nh: y\ni: off\nj: ~\nk: 0x1F\n",
        );
        assert_eq!(
            doc,
            json!({"a": 15, "b": 1000.0, "c": 15, "d": 1000, "e": "2025-01-01", "f": "1:20",
                   "g": "NaN", "h": true, "i": false, "j": null, "k": 31})
        );
    }

    #[test]
    fn quoted_scalars_keep_every_character() {
        let doc = yaml("a: \"x\\x85y \\u2028z\\u2029\\ufeff\"\nb: 'p\u{85}q'\n");
        assert_eq!(
            doc,
            json!({"a": "x\u{85}y \u{2028}z\u{2029}\u{feff}", "b": "p\u{85}q"})
        );
    }

    /// A key longer than the 1024 characters YAML allows an implicit key.
    fn long_key() -> String {
        "k".repeat(2000)
    }

    #[test]
    fn long_keys_are_read_in_json() {
        let key = long_key();
        let json_text = format!("{{\"{key}\": 1}}");
        assert_eq!(json_stream(&json_text).expect("JSON")[0][&key], 1);
    }

    #[test]
    fn long_keys_are_read_as_explicit_yaml_keys() {
        let key = long_key();
        assert_eq!(yaml(&format!("? \"{key}\"\n: 1\n"))[&key], 1);
    }

    #[test]
    fn a_json_stream_of_several_objects_is_read() {
        let docs = json_stream("{\"a\": 1}\n{\"b\": 2} null").expect("JSON stream");
        assert_eq!(docs, [json!({"a": 1}), json!({"b": 2})]);
        let err = json_stream("{\"a\": 1}\n{\"b\": }").expect_err("second is broken");
        assert!(
            err.to_string().starts_with("document 2: not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn errors_name_the_document_they_are_in() {
        for (text, index) in [
            ("b: [\n", 1),
            ("a: 1\n---\nb: [\n", 2),
            ("a: 1\n---\n---\n# c\n---\nb: {\n", 4),
            ("a: 1\n---\nb: .inf\n", 2),
        ] {
            let err = yaml_stream(text).expect_err(text);
            assert!(
                err.to_string().starts_with(&format!("document {index}: ")),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn the_last_of_two_equal_keys_wins() {
        assert_eq!(yaml("a: 1\na: 2\n"), json!({"a": 2}));
    }
}
