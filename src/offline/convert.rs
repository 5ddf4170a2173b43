//! `trustyai-operator convert --to VERSION -f FILE`: rewrites TrustyAIService manifests to
//! another API version with the conversion webhook's own function
//! ([`trustyai_crds::conversion::convert_object`]), for Git repositories that must stop using
//! `v1alpha1` before a release stops serving it.
//!
//! - Input: YAML (one or several documents) or JSON, from a file or stdin (`-`). Output: the
//!   same format on stdout.
//! - A document is a TrustyAIService when its `kind` is `TrustyAIService` and its `apiVersion`
//!   is in the `trustyai.opendatahub.io` group (or missing, which is then reported). The items
//!   of a list are converted the same way, read as `validate` reads them ([`super::lists`]): a
//!   `List` (what `kubectl get -o yaml` prints) or a `TrustyAIServiceList`, which takes the
//!   target version too. Every other document passes through.
//! - YAML documents that do not change (other kinds, objects already in the target version) are
//!   copied byte for byte, comments included; a converted document is rendered again, keeping
//!   its key order and the comment lines that precede it. When the stream has YAML features this
//!   copying cannot follow (directives, `...`, content on a `---` line), every document is
//!   rendered again instead.
//! - All or nothing: when any TrustyAIService cannot be converted, nothing is printed on stdout,
//!   so `convert … > file` in a pipeline never writes half a conversion.
//!
//! Exit codes: 0 all converted; 1 some TrustyAIService could not be converted (each named on
//! stderr by document index); 2 the input cannot be read or parsed, or `--to` is unknown.

use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;
use trustyai_crds::contract::{DEPRECATED_VERSION, GROUP, KIND, STORAGE_VERSION};
use trustyai_crds::conversion::{ConversionError, convert_object};
use trustyai_crds::manifests::{ManifestError, TextFormat, parse_documents, render_documents};

use super::lists::{Document, ItemDefaults, classify, list_items};
use crate::cli::ConvertArgs;

/// One TrustyAIService that could not be converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentFailure {
    /// 1-based position of the document in the input.
    pub document: usize,
    /// 1-based position in the document's `items` when the document is a `List`.
    pub item: Option<usize>,
    /// `namespace/name` of the object, when it has one.
    pub name: Option<String>,
    /// Why it could not be converted.
    pub error: ConversionError,
}

impl std::fmt::Display for DocumentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "document {}", self.document)?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        if let Some(name) = &self.name {
            write!(f, " ({name})")?;
        }
        write!(f, ": {}", self.error)
    }
}

impl std::error::Error for DocumentFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Why `convert` produced no output.
#[derive(Debug, thiserror::Error)]
pub enum ConvertFailure {
    /// `--to` is not a version of the resource.
    #[error(
        "unknown target version {0:?}: use {STORAGE_VERSION} or {DEPRECATED_VERSION} (or {GROUP}/{STORAGE_VERSION}, {GROUP}/{DEPRECATED_VERSION})"
    )]
    UnknownTarget(String),
    /// The input could not be read.
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The input is not YAML or JSON.
    #[error(transparent)]
    Parse(ManifestError),
    /// The output could not be rendered.
    #[error(transparent)]
    Render(ManifestError),
    /// Some TrustyAIServices could not be converted.
    #[error("{} TrustyAIService(s) could not be converted", .0.len())]
    Objects(Vec<DocumentFailure>),
}

impl ConvertFailure {
    /// The command's exit code for this failure: 1 for objects that could not be converted, 2
    /// for unusable input or arguments.
    pub fn exit_code(&self) -> u8 {
        match self {
            ConvertFailure::Objects(_) => 1,
            _ => 2,
        }
    }
}

/// The full `apiVersion` for `--to`: `v1`, `v1alpha1`, or either with the group.
pub fn target_api_version(to: &str) -> Result<String, ConvertFailure> {
    let version = to.strip_prefix(&format!("{GROUP}/")).unwrap_or(to);
    if version == STORAGE_VERSION || version == DEPRECATED_VERSION {
        Ok(format!("{GROUP}/{version}"))
    } else {
        Err(ConvertFailure::UnknownTarget(to.to_owned()))
    }
}

/// Converts every TrustyAIService in `text` (YAML or JSON, several documents allowed) to `to`
/// and returns the whole text in the input's format. See the module documentation.
pub fn convert_text(text: &str, to: &str) -> Result<String, ConvertFailure> {
    let target = target_api_version(to)?;
    let format = TextFormat::detect(text);
    let documents = parse_documents(text).map_err(ConvertFailure::Parse)?;
    let mut failures = Vec::new();
    let mut converted = Vec::with_capacity(documents.len());
    let mut changed = Vec::with_capacity(documents.len());
    for (index, document) in documents.iter().enumerate() {
        let out = convert_document(document, &target, index + 1, &mut failures);
        changed.push(out != *document);
        converted.push(out);
    }
    if !failures.is_empty() {
        return Err(ConvertFailure::Objects(failures));
    }
    if format == TextFormat::Yaml
        && let Some(segments) = split_yaml(text, &documents)
    {
        return render_keeping_text(&segments, &converted, &changed);
    }
    render_documents(&converted, format).map_err(ConvertFailure::Render)
}

/// One document converted (or returned as it is), recording failures.
fn convert_document(
    document: &Value,
    target: &str,
    index: usize,
    failures: &mut Vec<DocumentFailure>,
) -> Value {
    let mut convert = |object: &Value, item: Option<usize>| {
        // Ours in a version that does not exist, or without apiVersion: conversion says why.
        if classify(object) == Document::Other {
            return object.clone();
        }
        convert_object(object, target).unwrap_or_else(|error| {
            failures.push(DocumentFailure {
                document: index,
                item,
                name: name_of(object),
                error,
            });
            object.clone()
        })
    };
    if list_items(document).is_none() {
        return convert(document, None);
    }
    let defaults = ItemDefaults::of(document);
    let mut out = document.clone();
    let typed = out.get("kind").and_then(Value::as_str) == Some(&format!("{KIND}List"));
    if let Some(Value::Array(items)) = out.get_mut("items") {
        for (i, item) in items.iter_mut().enumerate() {
            defaults.fill(item);
            *item = convert(item, Some(i + 1));
        }
    }
    // A TrustyAIServiceList is of the version its items are now.
    if typed && let Some(map) = out.as_object_mut() {
        map.insert("apiVersion".to_owned(), Value::from(target));
    }
    out
}

fn name_of(object: &Value) -> Option<String> {
    let field = |name: &str| object.pointer(&format!("/metadata/{name}"))?.as_str();
    match (field("namespace"), field("name")) {
        (Some(namespace), Some(name)) => Some(format!("{namespace}/{name}")),
        (None, Some(name)) => Some(name.to_owned()),
        _ => None,
    }
}

/// A YAML document's text: the separator line that opened it (empty for the first) and its
/// body.
struct Segment<'a> {
    separator: &'a str,
    body: &'a str,
    /// Index into the parsed documents, or `None` for an empty (comment-only) document.
    document: Option<usize>,
}

/// Splits a YAML stream at its `---` lines, when that split is certain to match the parser's:
/// no directives, no `...` markers, nothing after a `---`, and each piece parsing on its own
/// to exactly the document the whole stream gave. Otherwise `None`.
fn split_yaml<'a>(text: &'a str, documents: &[Value]) -> Option<Vec<Segment<'a>>> {
    let mut pieces: Vec<(&str, &str)> = Vec::new();
    let (mut separator, mut start, mut offset) = ("", 0, 0);
    for line in text.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        if content.starts_with('%') || content.starts_with("...") {
            return None;
        }
        if content.starts_with("---") {
            if content.trim_end() != "---" {
                return None;
            }
            pieces.push((separator, &text[start..offset]));
            separator = line;
            start = offset + line.len();
        }
        offset += line.len();
    }
    pieces.push((separator, &text[start..]));

    let mut segments = Vec::with_capacity(pieces.len());
    let mut next = 0;
    for (separator, body) in pieces {
        let parsed = parse_documents(body).ok()?;
        let document = match parsed.as_slice() {
            [] => None,
            [one] if documents.get(next) == Some(one) => {
                next += 1;
                Some(next - 1)
            }
            _ => return None,
        };
        segments.push(Segment {
            separator,
            body,
            document,
        });
    }
    (next == documents.len()).then_some(segments)
}

/// The original text with each changed document's body rendered again (after the comment and
/// blank lines that opened it).
fn render_keeping_text(
    segments: &[Segment<'_>],
    converted: &[Value],
    changed: &[bool],
) -> Result<String, ConvertFailure> {
    let mut out = String::new();
    for segment in segments {
        out.push_str(segment.separator);
        match segment.document {
            Some(i) if changed.get(i).copied().unwrap_or(false) => {
                let leading: usize = segment
                    .body
                    .split_inclusive('\n')
                    .take_while(|l| {
                        let l = l.trim();
                        l.is_empty() || l.starts_with('#')
                    })
                    .map(str::len)
                    .sum();
                out.push_str(&segment.body[..leading]);
                let rendered = render_documents(&converted[i..=i], TextFormat::Yaml)
                    .map_err(ConvertFailure::Render)?;
                out.push_str(&rendered);
            }
            // Every body but the last ends with a newline (a separator line follows it), so
            // copying it keeps the separators on lines of their own.
            _ => out.push_str(segment.body),
        }
    }
    Ok(out)
}

fn read_input(path: &Path) -> Result<String, ConvertFailure> {
    super::read_input(path)
        .map(|(_, text)| text)
        .map_err(|(path, source)| ConvertFailure::Read { path, source })
}

/// Runs `convert`: the converted text on stdout, or the failures on stderr.
pub fn run(args: &ConvertArgs) -> ExitCode {
    let result = read_input(&args.file).and_then(|text| convert_text(&text, &args.to));
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(ConvertFailure::Objects(failures)) => {
            for failure in &failures {
                eprintln!("error: {failure}");
            }
            eprintln!(
                "error: {} TrustyAIService(s) could not be converted to {}; nothing was written",
                failures.len(),
                args.to
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {}", crate::error_chain::Chain(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALPHA: &str = "\
# the service of team A
apiVersion: trustyai.opendatahub.io/v1alpha1
kind: TrustyAIService
metadata:
  name: a
  namespace: team-a
spec:
  storage:
    format: PVC
  metrics:
    schedule: 5s
";

    const CONFIG_MAP: &str = "\
apiVersion: v1
kind: ConfigMap # untouched, comments and all
metadata: {name: cm}
data:
  key: 'quoted'
";

    fn ok(text: &str, to: &str) -> String {
        convert_text(text, to).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_target_spelling_resolves_to_its_full_api_version() {
        for (to, full) in [
            ("v1", "trustyai.opendatahub.io/v1"),
            ("v1alpha1", "trustyai.opendatahub.io/v1alpha1"),
            ("trustyai.opendatahub.io/v1", "trustyai.opendatahub.io/v1"),
            (
                "trustyai.opendatahub.io/v1alpha1",
                "trustyai.opendatahub.io/v1alpha1",
            ),
        ] {
            assert_eq!(target_api_version(to).ok().as_deref(), Some(full));
        }
    }

    #[test]
    fn an_unknown_target_is_refused_with_exit_code_2() {
        for bad in ["v2", "", "apps/v1", "trustyai.opendatahub.io/v2"] {
            let err = convert_text(ALPHA, bad).expect_err("unknown target");
            assert!(matches!(err, ConvertFailure::UnknownTarget(_)), "{err}");
            assert_eq!(err.exit_code(), 2);
        }
    }

    /// [`ALPHA`] then [`CONFIG_MAP`], converted to v1.
    fn alpha_then_config_map_in_v1() -> String {
        ok(&format!("{ALPHA}---\n{CONFIG_MAP}"), "v1")
    }

    #[test]
    fn other_documents_of_the_stream_are_copied_verbatim() {
        let out = alpha_then_config_map_in_v1();
        let (_, second) = out.split_once("---\n").expect("two documents");
        assert_eq!(second, CONFIG_MAP);
    }

    #[test]
    fn a_v1alpha1_document_becomes_v1_in_place() {
        let out = alpha_then_config_map_in_v1();
        let (first, _) = out.split_once("---\n").expect("two documents");
        assert!(
            first.starts_with("# the service of team A\napiVersion: trustyai.opendatahub.io/v1\nkind: TrustyAIService\nmetadata:\n"),
            "{first}"
        );
        let docs = parse_documents(&out).expect("output parses");
        assert_eq!(
            docs[0]["spec"],
            parse_documents(ALPHA).expect("input")[0]["spec"]
        );
        // Key order is kept: apiVersion, kind, metadata, spec.
        let keys: Vec<&String> = docs[0].as_object().expect("object").keys().collect();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec"]);
    }

    #[test]
    fn nothing_to_convert_gives_the_input_back_byte_for_byte() {
        let text = format!("# header\n---\n{CONFIG_MAP}---\n{ALPHA}");
        assert_eq!(ok(&text, "v1alpha1"), text);
    }

    /// A v1 TrustyAIService with fields v1alpha1 does not have.
    fn v1_with_v1_only_fields() -> Value {
        json!({
            "apiVersion": "trustyai.opendatahub.io/v1", "kind": "TrustyAIService",
            "metadata": {"name": "b"},
            "spec": {"storage": {"format": "PVC", "retention": "Delete"},
                     "metrics": {"schedule": "5s"}, "image": "quay.io/trustyai/x:1"}
        })
    }

    /// `v1` converted to v1alpha1.
    fn in_v1alpha1(v1: &Value) -> String {
        ok(&trustyai_crds::manifests::to_yaml(v1), "v1alpha1")
    }

    #[test]
    fn v1_to_v1alpha1_keeps_the_v1_only_fields_in_the_annotation() {
        let alpha = in_v1alpha1(&v1_with_v1_only_fields());
        let doc = &parse_documents(&alpha).expect("parses")[0];
        assert_eq!(doc["apiVersion"], "trustyai.opendatahub.io/v1alpha1");
        assert!(doc["spec"].get("image").is_none());
        assert!(
            doc["metadata"]["annotations"]
                .get(trustyai_crds::contract::CONVERSION_PRESERVED_ANNOTATION)
                .is_some()
        );
    }

    #[test]
    fn v1_survives_the_round_trip_through_v1alpha1() {
        let v1 = v1_with_v1_only_fields();
        let alpha = in_v1alpha1(&v1);
        let back = ok(&alpha, "v1");
        assert_eq!(parse_documents(&back).expect("parses")[0], v1);
    }

    #[test]
    fn json_in_json_out() {
        let text = r#"{"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIService",
            "metadata": {"name": "j"}, "spec": {"storage": {"format": "PVC"}, "metrics": {"schedule": "5s"}}}"#;
        let out = ok(text, "v1");
        assert!(
            out.starts_with("{\n  \"apiVersion\": \"trustyai.opendatahub.io/v1\""),
            "{out}"
        );
        let value: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(value["metadata"]["name"], "j");
    }

    #[test]
    fn list_items_are_converted() {
        let text = serde_json::to_string(&json!({
            "apiVersion": "v1", "kind": "List",
            "items": [
                {"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIService",
                 "metadata": {"name": "x"}, "spec": {}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}}
            ]
        }))
        .expect("json");
        let out: Value = serde_json::from_str(&ok(&text, "v1")).expect("JSON");
        assert_eq!(out["items"][0]["apiVersion"], "trustyai.opendatahub.io/v1");
        assert_eq!(out["items"][1]["apiVersion"], "v1");
    }

    #[test]
    fn a_typed_list_is_converted_as_a_whole() {
        let text = r#"{"apiVersion": "trustyai.opendatahub.io/v1alpha1", "kind": "TrustyAIServiceList",
            "items": [{"metadata": {"name": "x"}, "spec": {"storage": {"format": "PVC"}}}]}"#;
        let out: Value = serde_json::from_str(&ok(text, "v1")).expect("JSON");
        assert_eq!(out["apiVersion"], "trustyai.opendatahub.io/v1");
        assert_eq!(out["items"][0]["apiVersion"], "trustyai.opendatahub.io/v1");
        assert_eq!(out["items"][0]["kind"], "TrustyAIService");
    }

    #[test]
    fn objects_that_are_not_our_trustyaiservices_pass_through() {
        let text = "apiVersion: example.com/v1\nkind: TrustyAIService\nmetadata: {name: other}\n---\napiVersion: trustyai.opendatahub.io/v1alpha1\nkind: Other\n";
        assert_eq!(ok(text, "v1"), text);
    }

    /// The failure converting a ConfigMap then two objects that cannot be converted.
    fn two_unconvertible_objects() -> ConvertFailure {
        let text = format!(
            "{CONFIG_MAP}---\napiVersion: trustyai.opendatahub.io/v2\nkind: TrustyAIService\nmetadata: {{name: future, namespace: ns}}\n---\nkind: TrustyAIService\nmetadata: {{name: bare}}\n"
        );
        convert_text(&text, "v1").expect_err("two failures")
    }

    #[test]
    fn unconvertible_objects_fail_the_whole_conversion_with_exit_code_1() {
        assert_eq!(two_unconvertible_objects().exit_code(), 1);
    }

    #[test]
    fn unconvertible_objects_are_named_by_document() {
        let err = two_unconvertible_objects();
        let ConvertFailure::Objects(failures) = err else {
            panic!("expected object failures");
        };
        let messages: Vec<String> = failures.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0].starts_with(
                "document 2 (ns/future): the object's apiVersion \"trustyai.opendatahub.io/v2\""
            ),
            "{messages:?}"
        );
        assert_eq!(
            messages[1],
            "document 3 (bare): the object has no apiVersion"
        );
    }

    #[test]
    fn a_failing_list_item_is_named_by_item() {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "trustyai.opendatahub.io/v0", "kind": "TrustyAIService"}]}"#;
        let Err(ConvertFailure::Objects(failures)) = convert_text(text, "v1") else {
            panic!("expected a failure");
        };
        assert!(
            failures[0].to_string().starts_with("document 1, item 1: "),
            "{}",
            failures[0]
        );
    }

    #[test]
    fn garbage_is_a_parse_error() {
        let err = convert_text("a: [\n", "v1").expect_err("unparsable");
        assert!(matches!(err, ConvertFailure::Parse(_)), "{err}");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn streams_the_split_cannot_follow_are_rendered_whole() {
        // Content after `---` on the same line: every document is rendered again, still correct.
        let text = "--- {apiVersion: v1, kind: ConfigMap}\n---\napiVersion: trustyai.opendatahub.io/v1alpha1\nkind: TrustyAIService\n";
        let out = ok(text, "v1");
        let docs = parse_documents(&out).expect("parses");
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0], json!({"apiVersion": "v1", "kind": "ConfigMap"}));
        assert_eq!(docs[1]["apiVersion"], "trustyai.opendatahub.io/v1");
    }

    #[test]
    fn a_last_document_without_newline_is_handled() {
        let text = format!(
            "{CONFIG_MAP}---\napiVersion: trustyai.opendatahub.io/v1alpha1\nkind: TrustyAIService"
        );
        let out = ok(&text, "v1");
        assert!(out.starts_with(CONFIG_MAP), "{out}");
        assert!(out.ends_with("kind: TrustyAIService\n"), "{out}");
        let unchanged = format!("{ALPHA}---\n{}", CONFIG_MAP.trim_end());
        assert_eq!(ok(&unchanged, "v1alpha1"), unchanged);
    }
}
