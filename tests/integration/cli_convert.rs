//! `trustyai-operator convert` as a user runs it: the binary, files under
//! `tests/fixtures/convert/`, stdin, exit codes and messages. No cluster needed.

use crate::support;

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;
use trustyai_crds::manifests::parse_documents;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/convert")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("fixture")
}

/// Runs `convert` with `args`, feeding `stdin` when given.
fn convert(args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::run("convert", args, stdin, &[], &[])
}

/// Runs `convert --to <to>` on the fixture `name`.
fn convert_fixture(to: &str, name: &str) -> Output {
    let input = fixture(name);
    convert(&["--to", to, "-f", input.to_str().expect("path")], None)
}

/// The stderr of `output`, asserted to have exited with `code` and printed nothing on stdout.
#[track_caller]
fn refused(output: &Output, code: i32) -> String {
    assert_eq!(output.status.code(), Some(code));
    assert!(output.stdout.is_empty());
    text(&output.stderr)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

fn succeeded(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
}

#[test]
fn multi_document_yaml_to_v1_converts_only_the_v1alpha1_service() {
    let out = succeeded(&convert_fixture("v1", "mixed.yaml"));
    assert_eq!(out, read("mixed.to-v1.yaml"));

    // Document by document: the v1alpha1 service is v1 now with the same body; the v1 service
    // and the ConfigMap are byte for byte what the file had (comments included).
    let (before, after) = (read("mixed.yaml"), out);
    let in_docs: Vec<&str> = before.split("---\n").collect();
    let out_docs: Vec<&str> = after.split("---\n").collect();
    assert_eq!(out_docs.len(), 3);
    assert_eq!(
        out_docs[0],
        in_docs[0].replace(
            "apiVersion: trustyai.opendatahub.io/v1alpha1",
            "apiVersion: trustyai.opendatahub.io/v1"
        )
    );
    assert_eq!(out_docs[1], in_docs[1]);
    assert_eq!(out_docs[2], in_docs[2]);
}

/// `mixed.yaml` converted to v1alpha1: the output, asserted to be the expected file.
fn mixed_as_v1alpha1() -> String {
    let alpha = succeeded(&convert_fixture("v1alpha1", "mixed.yaml"));
    assert_eq!(alpha, read("mixed.to-v1alpha1.yaml"));
    alpha
}

#[test]
fn to_v1alpha1_keeps_what_v1alpha1_cannot_hold_in_an_annotation() {
    let alpha = mixed_as_v1alpha1();
    let docs = parse_documents(&alpha).expect("parses");
    assert!(
        docs[..2]
            .iter()
            .all(|d| d["apiVersion"] == "trustyai.opendatahub.io/v1alpha1")
    );
    // v1alpha1 has no spec.image or retention: kept in the annotation.
    assert!(docs[1]["spec"].get("image").is_none());
    assert!(
        docs[1]["metadata"]["annotations"]
            .get("trustyai.opendatahub.io/conversion-preserved")
            .is_some()
    );
}

#[test]
fn a_round_trip_through_v1alpha1_on_stdin_loses_nothing() {
    let alpha = mixed_as_v1alpha1();
    let back = succeeded(&convert(&["--to", "v1", "-f", "-"], Some(&alpha)));
    let original = parse_documents(&read("mixed.yaml")).expect("parses");
    let mut expected = original.clone();
    expected[0]["apiVersion"] = "trustyai.opendatahub.io/v1".into();
    assert_eq!(parse_documents(&back).expect("parses"), expected);
}

/// `tas-v1alpha1.json` converted with `--to <to>`: the output parsed, and the input with the
/// v1 apiVersion it should equal.
fn json_converted_to(to: &str) -> (Value, Value) {
    let out = succeeded(&convert_fixture(to, "tas-v1alpha1.json"));
    let value: Value = serde_json::from_str(&out).expect("the output is JSON");
    let mut expected: Value = serde_json::from_str(&read("tas-v1alpha1.json")).expect("JSON");
    expected["apiVersion"] = "trustyai.opendatahub.io/v1".into();
    (value, expected)
}

#[test]
fn json_in_gives_json_out_in_the_same_key_order() {
    let (value, expected) = json_converted_to("v1");
    assert_eq!(value, expected);
    let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        ["apiVersion", "kind", "metadata", "spec"],
        "key order"
    );
}

#[test]
fn the_target_may_be_given_as_the_full_api_version() {
    let (value, expected) = json_converted_to("trustyai.opendatahub.io/v1");
    assert_eq!(value, expected);
}

#[test]
fn unparsable_input_exits_2_with_nothing_on_stdout() {
    let output = convert_fixture("v1", "garbage.yaml");
    let stderr = refused(&output, 2);
    assert!(
        stderr.contains("document 2: not valid YAML or JSON"),
        "{stderr}"
    );

    let output = convert_fixture("v1", "does-not-exist.yaml");
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("cannot read"));
}

#[test]
fn an_unknown_target_version_is_refused() {
    let output = convert_fixture("v2", "mixed.yaml");
    let stderr = refused(&output, 2);
    assert!(
        stderr.contains("unknown target version \"v2\"") && stderr.contains("v1alpha1"),
        "{stderr}"
    );
}

#[test]
fn an_unconvertible_service_exits_1_naming_its_document() {
    let output = convert_fixture("v1", "unconvertible.yaml");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        output.stdout.is_empty(),
        "all or nothing: {}",
        text(&output.stdout)
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("document 2 (team-c/from-the-future)")
            && stderr.contains("trustyai.opendatahub.io/v2"),
        "{stderr}"
    );
}
